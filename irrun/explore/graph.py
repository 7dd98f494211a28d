"""A loaded Program as Model Explorer graphs (model_explorer.graph_builder).

One GraphNode per layer, Consts included, labelled by its type; its attributes, inputs and
outputs (element type and inferred partial shape with bounds, the declared one where it
differs, tensor names), its XML line and its validation problems in the side panel. Edges
name the IR's port ids: an edge from output port 3 of layer 7 to input port 0 of layer 9 is
IncomingEdge("7", "3", "0") on node "9".

Namespaces come from the layer names the converters write, so that a large model opens as a
few collapsible blocks:

    __module.encoder.layer.0.attention.self/aten::linear/MatMul   (PyTorch)
        -> encoder/layer/0/attention/self
    self.encoder.layer.0.attention.self.query.weight               (PyTorch Consts)
        -> encoder/layer/0/attention/self/query
    model/dense_1/MatMul                                           (TensorFlow)
        -> model/dense_1
    /layer1/0/conv1/Conv                                           (ONNX)
        -> layer1/0/conv1

A layer whose name says nothing (`Constant_123`, `Multiply_456`, what OpenVINO's own passes
name) joins its consumers' common namespace, else its producers'. Parameters and Results
stay at the top.

Loop / TensorIterator / If bodies are graphs of their own, named on their layer's node
(`subgraphIds`). With fold_decompression, each weight's decompression subgraph (Const ->
Convert -> Subtract zero point -> Multiply scale -> Reshape, as NNCF and convert_model
write them) is one node, its layers listed on it.
"""
from __future__ import annotations

import os

import numpy as np
from ..ir.etypes import normalize_precision
from ..tools.drawing import ERROR_COLOR, WARNING_COLOR

# The layer types a decompression subgraph is made of (all their inputs constant).
DECOMPRESSION_OPS = frozenset(("Convert", "Subtract", "Multiply", "Reshape", "Transpose",
                               "Unsqueeze", "Squeeze"))
PREVIEW = 6        # values of a Const shown on its node


def namespace_of(name: str) -> str | None:
    """The namespace a converter's layer name states ('' for the top level), or None when
    the name states none (it is then inherited from the layer's neighbours)."""
    if not name:
        return None
    if "/" in name:
        parts = name.split("/")
        head = parts[0]
        if head.startswith("__module."):
            path = head[len("__module."):].split(".")
        elif head == "__module" or "::" in head:
            path = []
        else:
            path = parts[:-1]
    else:
        for prefix in ("__module.", "self."):
            if name.startswith(prefix):
                path = name[len(prefix):].split(".")[:-1]
                break
        else:
            parts = name.split(".")
            # bert.embeddings.word_embeddings.weight (an ONNX initializer from PyTorch)
            if len(parts) >= 3 and all(p.isidentifier() or p.isdigit() for p in parts):
                path = parts[:-1]
            else:
                return None
    return "/".join(p for p in path if p)


def _common(paths: list[str]) -> str:
    split = [p.split("/") if p else [] for p in paths]
    out = []
    for parts in zip(*split):
        if any(x != parts[0] for x in parts):
            break
        out.append(parts[0])
    return "/".join(out)


def namespaces(program) -> dict[str, str]:
    """{layer id: namespace} for every layer of one network."""
    ns: dict[str, str | None] = {}
    consumers: dict[str, list[str]] = {lid: [] for lid in program.nodes}
    for lid, node in program.nodes.items():
        kind = node.kind
        ns[lid] = "" if kind in ("parameter", "result") else namespace_of(node.layer.name)
        for src in node.inputs:
            if src is not None and src[0] in consumers:
                consumers[src[0]].append(lid)
    order = [lid for lid in program.order if lid in ns]
    seen = set(order)
    order += [lid for lid in ns if lid not in seen]
    edge_kinds = ("parameter", "result")
    for lid in reversed(order):
        if ns[lid] is None:
            near = [ns[c] for c in consumers[lid]
                    if ns[c] is not None and program.nodes[c].kind not in edge_kinds]
            if near:
                ns[lid] = _common(near)
    for lid in order:
        if ns[lid] is None:
            node = program.nodes[lid]
            near = [ns[s[0]] for s in node.inputs if s is not None and s[0] in ns
                    and ns[s[0]] is not None and program.nodes[s[0]].kind not in edge_kinds]
            ns[lid] = _common(near) if near else ""
    return ns


def _port_id(port, position: int) -> str:
    return str(port.id if port.id is not None else position)


def _declared(port) -> str:
    dims = "[" + ",".join("?" if d == -1 else str(d) for d in (port.dims or [])) + "]"
    return f"{normalize_precision(port.precision or '') or port.precision or '?'}{dims}"


def _differs(port, spec) -> bool:
    """Whether the declared type or shape says something else than inference."""
    if spec is None:
        return False
    precision = normalize_precision(port.precision or "")
    if precision is not None and precision != spec.etype.name:
        return True
    if spec.shape is None or port.dims is None:
        return False
    declared = [None if d == -1 else d for d in port.dims]
    inferred = [d.value if d.is_static else None for d in spec.shape]
    return declared != inferred


def value_preview(value, n: int = PREVIEW) -> str:
    """The first values of a Const: `[0.12, -0.5, 1, ...] (768 values)`."""
    try:
        a = np.asarray(value)
    except Exception:           # noqa: BLE001 - a packed or string Const: no preview
        return ""
    if a.dtype.kind not in "biuf" and a.dtype.kind != "V":
        if a.dtype.kind in "OU" and a.size:
            head = [repr(str(x)) for x in a.reshape(-1)[:n]]
            return "[" + ", ".join(head) + (", ..." if a.size > n else "") + "]"
        return ""
    flat = a.reshape(-1)[:n]
    if flat.dtype.kind == "V":
        flat = flat.astype(np.float32)
    head = [f"{x:.6g}" if flat.dtype.kind == "f" else str(x) for x in flat.tolist()]
    more = f", ... ({a.size} values)" if a.size > n else ""
    return "[" + ", ".join(head) + more + "]"


def _weight_bytes(layer) -> int | None:
    try:
        return int(layer.data.get("size"))
    except (TypeError, ValueError):
        return None


def decompression_groups(program) -> dict[str, list[str]]:
    """{output layer id: its decompression subgraph's layers, topological} for the weights
    of one network: a Const, then layers of DECOMPRESSION_OPS (a Convert among them) fed
    only by Consts and each other, of which one (the output) feeds the rest of the model. A
    Const that also feeds something else stays out (its own node); a layer that two weights
    share leaves both unfolded."""
    constant: set[str] = set()
    for lid in program.order:
        node = program.nodes[lid]
        if node.kind == "const" or (
                node.kind == "op" and node.layer.type in DECOMPRESSION_OPS and node.inputs
                and all(s is not None and s[0] in constant for s in node.inputs)):
            constant.add(lid)
    consumers: dict[str, set[str]] = {}
    for lid, node in program.nodes.items():
        for s in node.inputs:
            if s is not None:
                consumers.setdefault(s[0], set()).add(lid)
    outputs = [lid for lid in program.order if lid in constant
               and program.nodes[lid].kind == "op"
               and any(c not in constant for c in consumers.get(lid, ()))]
    position = {lid: i for i, lid in enumerate(program.order)}
    groups: dict[str, list[str]] = {}
    owner: dict[str, list[str]] = {}
    for out in outputs:
        members, stack = {out}, [out]
        while stack:
            for s in program.nodes[stack.pop()].inputs:
                if s is not None and s[0] in constant and s[0] not in members:
                    members.add(s[0])
                    stack.append(s[0])
        # A Const or layer feeding outside the group is not the group's own.
        members = {m for m in members if m == out or consumers.get(m, set()) <= members}
        if not any(program.nodes[m].layer.type == "Convert" for m in members):
            continue
        groups[out] = sorted(members, key=lambda m: position.get(m, 0))
        for m in members:
            owner.setdefault(m, []).append(out)
    shared = {o for outs in owner.values() if len(outs) > 1 for o in outs}
    return {out: members for out, members in groups.items() if out not in shared}


def _kv(key: str, value) -> dict:
    return {"key": key, "value": value}


def _meta(id_: str, attrs: list) -> dict:
    return {"id": id_, "attrs": attrs}


class _Builder:
    """Graphs as the JSON Model Explorer reads (graph_builder's field names), built as plain
    dicts: a 10,000-layer model is 10,000 nodes and some 60,000 key-value pairs, which as
    dataclasses (then `asdict`) took seconds."""

    def __init__(self, program, fold: bool):
        self.root = program
        self.fold = fold
        self.graphs: list[dict] = []
        diags: dict[tuple, list] = {}
        for d in program.diagnostics:
            if d.layer_id is not None:
                diags.setdefault((d.layer_id, d.layer_name), []).append(d)
        self.diags = diags

    def network(self, program, graph_id: str) -> dict:
        from ..run.model import output_names_of

        nodes: list[dict] = []
        graph = {"id": graph_id, "nodes": nodes}
        self.graphs.append(graph)
        ns = namespaces(program)
        groups = decompression_groups(program) if self.fold else {}
        folded_into = {m: out for out, members in groups.items() for m in members}
        results = {r.layer.id: r for r in program.results}
        order = [lid for lid in program.order if lid in program.nodes]
        seen = set(order)
        order += [lid for lid in program.nodes if lid not in seen]   # on a cycle
        for lid in order:
            if lid in folded_into and folded_into[lid] != lid:
                continue
            node = program.nodes[lid]
            if lid in groups:
                nodes.append(self.folded_node(program, groups[lid], ns, folded_into))
                continue
            gnode = self.layer_node(program, node, ns[lid], folded_into)
            if lid in results:
                gnode["attrs"].insert(0, _kv("output name", ", ".join(
                    output_names_of(program, results[lid]))))
            nodes.append(gnode)
            for k, body in enumerate(node.bodies or ()):
                if body is None or body.doc is None:
                    continue
                role = node.layer.bodies[k].role if k < len(node.layer.bodies) else f"body{k}"
                bid = f"{graph_id} > {node.layer.name} [{lid}] {role}"
                gnode.setdefault("subgraphIds", []).append(bid)
                self.network(body, bid)
        if program is self.root:
            errors = sum(d.severity == "error" for d in program.diagnostics)
            graph["groupNodeAttributes"] = {"": {
                "model": os.path.abspath(program.path),
                "layers": str(len(program.doc.layers)),
                "IR version": str(program.doc.version),
                "validation": f"{errors} errors, {len(program.diagnostics) - errors} warnings",
            }}
        return graph

    def edges(self, program, node, folded_into, inputs_meta, rename=None) -> list:
        """The incoming edges of `node` (a producer folded away: its group's node)."""
        layer = node.layer
        out = []
        for position, src in enumerate(node.inputs):
            if src is None:
                continue
            pid, k = src
            producer = program.nodes.get(pid)
            if producer is None:
                continue
            source_id = folded_into.get(pid, pid)
            ports = producer.layer.outputs
            source_out = _port_id(ports[k], k) if k < len(ports) else str(k)
            if source_id != pid:       # a folded group: its output is its output layer's
                group_out = program.nodes[source_id].layer.outputs
                source_out = _port_id(group_out[0], 0) if group_out else "0"
            target_in = (_port_id(layer.inputs[position], position)
                         if position < len(layer.inputs) else str(position))
            if rename is not None:
                target_in = rename(target_in)
            out.append({"sourceNodeId": source_id, "sourceNodeOutputId": source_out,
                        "targetNodeInputId": target_in})
            # Model Explorer shows the producer's output metadata (shape, names) beside it.
            inputs_meta.append(_meta(target_in, [_kv("__tensor_tag",
                                                     f"{producer.layer.name}:{k}")]))
        return out

    def outputs_meta(self, node) -> list:
        layer = node.layer
        meta = []
        for k, port in enumerate(layer.outputs):
            spec = node.specs[k] if node.specs and k < len(node.specs) else None
            attrs = [_kv("shape", str(spec) if spec is not None else "not inferred")]
            if spec is None or _differs(port, spec):
                attrs.append(_kv("declared", _declared(port)))
            if port.names:
                attrs.append(_kv("tensor names", ", ".join(port.names)))
            meta.append(_meta(_port_id(port, k), attrs))
        return meta

    def problems(self, layer) -> tuple[list, dict | None]:
        found = self.diags.get((layer.id, layer.name), ())
        if not found:
            return [], None
        attrs = [_kv(d.severity if i == 0 else f"{d.severity} {i + 1}", d.message)
                 for i, d in enumerate(found)]
        if any(d.severity == "error" for d in found):
            return attrs, {"backgroundColor": "#ffd7d7", "borderColor": ERROR_COLOR,
                           "hoveredBorderColor": ERROR_COLOR}
        return attrs, {"backgroundColor": "#fff3d6", "borderColor": WARNING_COLOR,
                       "hoveredBorderColor": WARNING_COLOR}

    @staticmethod
    def base_attrs(layer) -> list:
        return [_kv("layer name", layer.name), _kv("op", layer.op_label),
                _kv("xml line", str(layer.line))]

    def layer_node(self, program, node, namespace: str, folded_into) -> dict:
        layer = node.layer
        attrs = self.base_attrs(layer)
        problems, style = self.problems(layer)
        attrs += problems
        attrs += [_kv(k, str(v)) for k, v in layer.data.items()]
        outputs = self.outputs_meta(node)
        if node.kind == "const":
            attrs += self.const_attrs(node, outputs)
        inputs_meta: list = []
        edges = self.edges(program, node, folded_into, inputs_meta)
        gnode = {"id": layer.id, "label": layer.type or "?", "namespace": namespace,
                 "attrs": attrs, "incomingEdges": edges, "outputsMetadata": outputs,
                 "inputsMetadata": inputs_meta}
        if style is not None:
            gnode["style"] = style
        return gnode

    @staticmethod
    def const_attrs(node, outputs) -> list:
        """A Const's values and bytes: on the node, and (as Model Explorer shows a hidden
        Const's `__value` and output metadata beside its consumer's input) on its output."""
        attrs = []
        if node.const_value is not None:
            preview = value_preview(node.const_value)
            if preview:
                attrs.append(_kv("__value", preview))
        size = _weight_bytes(node.layer)
        if size is not None:
            attrs.append(_kv("weight bytes", f"{size:,}"))
            if outputs:
                outputs[0]["attrs"].append(_kv("weight bytes", f"{size:,}"))
        return attrs

    def folded_node(self, program, members: list[str], ns, folded_into) -> dict:
        """One node for a weight and its decompression layers; its id and outputs are those
        of the group's output layer (what its consumers' edges name)."""
        out = members[-1]
        node = program.nodes[out]
        consts = [program.nodes[m] for m in members if program.nodes[m].kind == "const"]
        weight = max(consts, key=lambda c: _weight_bytes(c.layer) or 0)
        outputs = self.outputs_meta(node)
        attrs = [_kv("weight", weight.layer.name)] + self.base_attrs(node.layer)
        spec = weight.specs[0] if weight.specs else None
        if spec is not None:
            attrs.append(_kv("stored as", str(spec)))
        attrs += self.const_attrs(weight, outputs)
        attrs.append(_kv("decompression", " -> ".join(
            program.nodes[m].layer.type for m in members if program.nodes[m].kind != "const")))
        attrs.append(_kv("folded layers", ", ".join(
            f"{program.nodes[m].layer.name} [{m}]" for m in members)))
        style = None
        for m in members:
            problems, s = self.problems(program.nodes[m].layer)
            attrs += problems
            style = style or s
        inputs_meta: list = []
        edges = []
        inside = set(members)
        for m in members:        # edges from outside the group into it (a shared Const)
            mnode = program.nodes[m]
            outer = [s if s is not None and s[0] not in inside else None for s in mnode.inputs]
            if any(outer):
                shadow = type(mnode)(layer=mnode.layer, inputs=outer)
                edges += self.edges(program, shadow, folded_into, inputs_meta,
                                    rename=lambda p, m=m: f"{m}.{p}")
        gnode = {"id": out, "label": "Const", "namespace": ns[weight.id], "attrs": attrs,
                 "incomingEdges": edges, "outputsMetadata": outputs,
                 "inputsMetadata": inputs_meta}
        if style is not None:
            gnode["style"] = style
        return gnode


def graph_id_of(program) -> str:
    """The main graph's id: the net's name, else the file's stem."""
    return (program.doc.name if program.doc is not None and program.doc.name
            else os.path.splitext(os.path.basename(program.path))[0])


def to_json(program, fold_decompression: bool = False) -> list[dict]:
    """Model Explorer graphs of a loaded Program as JSON-ready dicts: the main network
    first, then each body (depth first)."""
    builder = _Builder(program, fold_decompression)
    builder.network(program, graph_id_of(program))
    return builder.graphs


def as_dataclasses(graphs: list[dict]) -> list:
    """The same graphs as model_explorer.graph_builder objects (what an Adapter returns)."""
    from model_explorer import graph_builder as gb

    def kvs(items):
        return [gb.KeyValue(a["key"], a["value"]) for a in items]

    out = []
    for g in graphs:
        nodes = [gb.GraphNode(
            id=n["id"], label=n["label"], namespace=n["namespace"],
            subgraphIds=list(n.get("subgraphIds", ())), attrs=kvs(n["attrs"]),
            incomingEdges=[gb.IncomingEdge(**e) for e in n["incomingEdges"]],
            outputsMetadata=[gb.MetadataItem(m["id"], kvs(m["attrs"]))
                             for m in n["outputsMetadata"]],
            inputsMetadata=[gb.MetadataItem(m["id"], kvs(m["attrs"]))
                            for m in n["inputsMetadata"]],
            style=gb.GraphNodeStyle(**n["style"]) if "style" in n else None)
            for n in g["nodes"]]
        out.append(gb.Graph(id=g["id"], nodes=nodes,
                            groupNodeAttributes=g.get("groupNodeAttributes")))
    return out


def load(model_path, weights=None):
    """The Program of a model for exploring: read as far as it can be (an invalid model is
    shown with its problems on their layers)."""
    from ..tools.drawing import load_for_drawing

    return load_for_drawing(model_path, weights)


def graphs_for(model_path, fold_decompression: bool = False) -> list:
    """The adapter's conversion (graph_builder objects)."""
    return as_dataclasses(to_json(load(model_path), fold_decompression))
