"""Cutting a subgraph out of a model (`irrun extract`) and shrinking a failing model to a
minimal reproducer (`irrun reduce`), both written as IR with irrun.ir.writer.

A tensor is named `LAYER[:PORT]`: a layer name (or id) and the position of one of its output
ports (default 0), or a tensor name from a port's `names`. Cuts and outputs are top-level
tensors; a Loop/TensorIterator/If is kept or cut whole.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from ..errors import IrrunError
from ..ir.writer import (
    Net,
    WEdge,
    WLayer,
    WPort,
    format_dims,
    net_from_program,
    port_dims,
    precision_of,
    write_net,
)


class ExtractError(IrrunError):
    """A tensor named for extract or reduce does not exist, or the cut does not make sense."""

    code = "extract"


# ---------------------------------------------------------------- naming tensors

def resolve_tensor(program, text: str) -> tuple[str, int]:
    """(layer id, output position) of `LAYER[:PORT]`, a layer id, or a tensor name."""
    by_name = {n.layer.name: n for n in program.nodes.values()}
    by_id = program.nodes
    layer, sep, port = text.rpartition(":")
    candidates = []
    if sep and port.isdigit():
        candidates.append((layer, int(port)))
    candidates.append((text, 0))
    for name, position in candidates:
        node = by_name.get(name) or by_id.get(name)
        if node is not None:
            count = len(node.specs or ())
            if not 0 <= position < count:
                raise ExtractError(f"layer '{node.layer.name}' has {count} output port(s); "
                                   f"'{text}' asks for output {position}")
            return node.id, position
    for node in program.nodes.values():
        for port in node.layer.outputs:
            if text in port.names:
                return node.id, port.index
    import difflib

    close = difflib.get_close_matches(text, list(by_name), n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise ExtractError(f"no layer or tensor named '{text}'{hint}")


def tensor_label(program, tensor: tuple[str, int]) -> str:
    node = program.nodes[tensor[0]]
    port = node.layer.outputs[tensor[1]] if tensor[1] < len(node.layer.outputs) else None
    if port is not None and port.names:
        return port.names[0]
    return f"{node.layer.name}:{tensor[1]}"


# ---------------------------------------------------------------- the subgraph

@dataclass
class Cut:
    """A subgraph: the tensors it computes and the tensors it takes as new Parameters."""

    outputs: list[tuple[str, int]]
    inputs: list[tuple[str, int]]


def _needed(program, cut: Cut) -> tuple[list[str], list[tuple[str, int]]]:
    """Layer ids the outputs need (document order) and the cuts actually used."""
    cuts = set(cut.inputs)
    keep: set[str] = set()
    used: list[tuple[str, int]] = []
    stack = [lid for lid, _ in cut.outputs]
    for t in cut.outputs:
        if t in cuts:
            raise ExtractError(f"'{tensor_label(program, t)}' is both an output and a cut")
    while stack:
        lid = stack.pop()
        if lid in keep:
            continue
        keep.add(lid)
        for src in program.nodes[lid].inputs:
            if src in cuts:
                if src not in used:
                    used.append(src)
            else:
                stack.append(src[0])
    order = [layer.id for layer in program.doc.layers if layer.id in keep]
    return order, used


def subgraph_net(program, cut: Cut, name: str | None = None) -> tuple[Net, dict]:
    """The Net computing `cut.outputs` from `cut.inputs` (and the model's own Parameters),
    and {new Parameter name: (layer id, position) it stands for}."""
    full = net_from_program(program)
    by_id = {w.id: w for w in full.layers}
    order, used = _needed(program, cut)
    # The model's own Results of a requested tensor stay, with their output names.
    wanted = set(cut.outputs)
    order = [layer.id for layer in program.doc.layers if layer.id in set(order) or (
        program.nodes[layer.id].kind == "result" and program.nodes[layer.id].inputs
        and program.nodes[layer.id].inputs[0] in wanted)]
    next_id = max((int(w.id) for w in full.layers if w.id.lstrip("-").isdigit()), default=0) + 1
    layers: list[WLayer] = []
    cut_param: dict[tuple[str, int], str] = {}
    stands_for: dict[str, tuple[str, int]] = {}
    taken_names = {w.name for w in full.layers}
    for t in used:
        spec = program.nodes[t[0]].specs[t[1]]
        label = tensor_label(program, t)
        pname = label if label not in taken_names or program.nodes[t[0]].kind == "parameter" \
            else f"{label}/cut"
        src_port = program.nodes[t[0]].layer.outputs[t[1]]
        pid = str(next_id)
        next_id += 1
        layers.append(WLayer(pid, pname, "Parameter", "opset1",
                             {"shape": format_dims(spec.shape), "element_type": spec.etype.name},
                             outputs=[WPort(0, precision_of(spec.etype.name),
                                            port_dims(spec.shape),
                                            list(src_port.names) or [pname])]))
        cut_param[t] = pid
        stands_for[pname] = t
    keep = set(order)
    for lid in order:
        w = by_id[lid]
        if program.nodes[lid].kind == "result" and (
                program.nodes[lid].inputs[0] not in cut.outputs):
            continue
        layers.append(w)
    # Results for requested outputs no kept Result already takes.
    have = {program.nodes[lid].inputs[0] for lid in order if program.nodes[lid].kind == "result"}
    results = []
    for t in cut.outputs:
        if t in have or program.nodes[t[0]].kind == "result":
            continue
        spec = program.nodes[t[0]].specs[t[1]]
        rid = str(next_id)
        next_id += 1
        results.append((t, WLayer(rid, f"{tensor_label(program, t)}/result", "Result",
                                  "opset1", inputs=[WPort(0, precision_of(spec.etype.name),
                                                          port_dims(spec.shape))])))
        have.add(t)
    layers += [w for _, w in results]

    port_pos = {lid: {p.id: p.index for p in node.layer.outputs}
                for lid, node in program.nodes.items()}
    edges = []
    kept_ids = {w.id for w in layers}
    for e in full.edges:
        if e.to_layer not in kept_ids or e.to_layer not in keep:
            continue
        src = (e.from_layer, port_pos.get(e.from_layer, {}).get(e.from_port))
        if src in cut_param:
            edges.append(WEdge(cut_param[src], 0, e.to_layer, e.to_port))
        elif e.from_layer in kept_ids:
            edges.append(e)
    for t, w in results:
        out_port = program.nodes[t[0]].layer.outputs[t[1]].id
        edges.append(WEdge(t[0], out_port, w.id, 0))
    net = Net(name or f"{full.name}_extract", layers, edges, full.extras, full.source_bin)
    return net, stands_for


def cut_values(model, feed, stands_for: dict) -> dict[str, np.ndarray]:
    """The values at the cut points (and the model's own inputs) when the full model runs on
    `feed`: the new model's inputs."""
    values = model.infer(feed, intermediate=True)
    program = model.program
    out = {}
    for pname, (lid, position) in stands_for.items():
        key = f"{program.nodes[lid].layer.name}:{position}"
        if program.nodes[lid].kind == "parameter":
            out[pname] = np.asarray(feed[_input_name(model, lid)])
        elif key in values:
            out[pname] = np.asarray(values[key])
        else:
            raise ExtractError(f"the run computed no value for '{pname}'")
    return out


def _input_name(model, lid: str) -> str:
    for info, node in zip(model.inputs, model.program.parameters):
        if node.id == lid:
            return info.name
    raise KeyError(lid)


def _cut_model(model, cut: Cut) -> tuple[Net, dict]:
    """subgraph_net, with the model's own Parameters the subgraph still uses among its inputs
    ({input name: (layer id, position) it stands for})."""
    net, stands_for = subgraph_net(model.program, cut)
    for w in net.layers:
        if w.type == "Parameter" and w.name not in stands_for and w.id in model.program.nodes:
            stands_for[_input_name(model, w.id)] = (w.id, 0)
    return net, stands_for


def extract(model, outputs, inputs=(), xml_path=None, feed=None):
    """Cut the subgraph computing `outputs` (tensor names) from `inputs` (cut points).

    Returns (xml path or None, {input name: value} when `feed` is given, else None). With
    `xml_path` the subgraph is written there (and its .bin beside it).
    """
    program = model.program
    if xml_path:
        _not_the_source(model, xml_path)
    cut = Cut([resolve_tensor(program, t) for t in outputs],
              [resolve_tensor(program, t) for t in inputs])
    net, stands_for = _cut_model(model, cut)
    written = write_net(net, xml_path)[0] if xml_path else None
    values = cut_values(model, feed, stands_for) if feed is not None else None
    return written, values


def _not_the_source(model, xml_path) -> None:
    """Refuse to write the subgraph over the model it is cut from (its .xml or its .bin)."""
    xml = os.fspath(xml_path)
    targets = (xml, os.path.splitext(xml)[0] + ".bin")
    weights = model.program.bin_path
    for target, source in zip(targets, (model.path, weights)):
        if source and os.path.exists(target) and os.path.exists(source) and \
                os.path.samefile(target, source):
            raise IrrunError(f"-o {xml} would overwrite the model it is cut from ("
                             f"{source}): write the subgraph elsewhere", file=model.path,
                             code="write")


# ---------------------------------------------------------------- reduce

def _ov_outputs(xml: str, feed: dict) -> list[np.ndarray]:
    """OpenVINO's CPU plugin's outputs, computed in a child process (a crash of the plugin
    is an exception here, not the end of irrun)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="irrun-reduce-") as tmp:
        inputs, outputs = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(inputs, **feed)
        done = subprocess.run([sys.executable, "-c", _OV_OUTPUTS, xml, inputs, outputs],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise RuntimeError(last if done.returncode > 0 else
                               f"OpenVINO's CPU plugin crashed (signal {-done.returncode})")
        with np.load(outputs) as z:
            return [z[f"out{i}"] for i in range(len(z.files))]


_OV_OUTPUTS = """
import sys, numpy as np, openvino as ov
core = ov.Core()
c = core.compile_model(core.read_model(sys.argv[1]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
r = c.create_infer_request().infer(dict(np.load(sys.argv[2])))
np.savez(sys.argv[3], **{f"out{i}": np.asarray(r[o]) for i, o in enumerate(c.outputs)})
"""


_OV_RUNNER = """
import sys, numpy as np, openvino as ov
core = ov.Core()
c = core.compile_model(core.read_model(sys.argv[1]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
c.create_infer_request().infer(dict(np.load(sys.argv[2])))
"""


class Condition:
    """Whether a candidate model (xml, inputs.npz) still shows the problem."""

    def __init__(self, kind: str, command: str | None = None, rtol=None, atol=None):
        if kind not in ("diverges", "openvino-fails", "command"):
            raise ExtractError(f"unknown condition '{kind}' (diverges, openvino-fails, or "
                               "--command 'CMD {model}')")
        self.kind, self.command, self.rtol, self.atol = kind, command, rtol, atol

    def holds(self, xml: str, inputs: str) -> bool:
        if self.kind == "diverges":
            from .comparing import compare

            try:
                result = compare(xml, inputs, layers="outputs", rtol=self.rtol, atol=self.atol)
            except IrrunError:
                return False
            return not result.ok
        if self.kind == "openvino-fails":
            done = subprocess.run([sys.executable, "-c", _OV_RUNNER, xml, inputs],
                                  capture_output=True, timeout=600)
            return done.returncode != 0
        # Quoted: a path with a space or a $ is one word, never interpreted by the shell.
        cmd = self.command.replace("{model}", shlex.quote(xml)).replace("{inputs}",
                                                                         shlex.quote(inputs))
        return subprocess.run(cmd, shell=True, capture_output=True, timeout=600).returncode != 0


@dataclass
class Reduced:
    xml: str
    inputs: str
    layers: int          # op layers (not Parameter, Const, Result)
    tries: int


def _op_layers(net: Net) -> int:
    return sum(w.type.lower() not in ("parameter", "const", "result") for w in net.layers)


def reduce(model, feed, condition: Condition, out_dir: str, log=None) -> Reduced:
    """Shrink `model` to a small subgraph for which `condition` still holds.

    Delta debugging over the layers in two passes, as Polygraphy's `debug reduce` does:
    (1) outputs: the earliest tensor (in topological order) whose subgraph alone still shows
    the problem, found by bisection over the order, then checked linearly below it;
    (2) inputs: the cut points moved as close to that tensor as possible: every tensor at
    distance d from it becomes a Parameter (fed with the value the full model computed), for
    the smallest d where the condition holds, then each remaining producer is cut alone
    while that keeps the condition. Each candidate is written and tested once.
    """
    from ..run.feed import save_npz

    program = model.program
    os.makedirs(out_dir, exist_ok=True)
    work = os.path.join(out_dir, ".work")
    os.makedirs(work, exist_ok=True)
    tries = 0
    log = log or (lambda msg: None)

    def attempt(cut: Cut):
        nonlocal tries
        tries += 1
        net, stands_for = _cut_model(model, cut)
        xml = os.path.join(work, f"try{tries}.xml")
        write_net(net, xml)
        inputs = os.path.join(work, f"try{tries}.inputs.npz")
        save_npz(inputs, cut_values(model, feed, stands_for))
        ok = condition.holds(xml, inputs)
        layers, cuts = _op_layers(net), len(cut.inputs)
        log(f"try {tries}: {layers} op layer{'s' if layers != 1 else ''}, {cuts} "
            f"cut{'s' if cuts != 1 else ''}: "
            f"{'still fails' if ok else 'passes'}")
        return ok, net, xml, inputs

    full = Cut([r.inputs[0] for r in program.results], [])
    ok, net, xml, inputs = attempt(full)
    if not ok:
        raise ExtractError("the condition does not hold for the whole model: nothing to reduce")
    best = (net, xml, inputs, full)

    # (1) the earliest single output that still fails.
    candidates = [(lid, i) for lid in program.order
                  for i in range(len(program.nodes[lid].specs or ()))
                  if program.nodes[lid].kind not in ("result", "const")
                  and lid not in program.unused]
    lo, hi = 0, len(candidates) - 1
    found = None
    while lo <= hi:
        mid = (lo + hi) // 2
        cut = Cut([candidates[mid]], [])
        ok, net, xml, inputs = attempt(cut)
        if ok:
            found = (net, xml, inputs, cut)
            hi = mid - 1
        else:
            lo = mid + 1
    if found is not None:
        best = found
    # (2) move the cuts towards the output.
    net, xml, inputs, cut = best
    target = cut.outputs
    distance = _distances(program, target)
    for d in range(1, max(distance.values(), default=0) + 1):
        frontier = sorted({src for lid, dist in distance.items() if dist == d - 1
                           for src in program.nodes[lid].inputs
                           if program.nodes[src[0]].kind not in ("parameter", "const")})
        if not frontier:
            break
        trial = Cut(target, frontier)
        ok, n2, x2, i2 = attempt(trial)
        if ok:
            best = (n2, x2, i2, trial)
            break
    net, xml, inputs, cut = best
    final = os.path.join(out_dir, "model.xml")
    shutil.copyfile(xml, final)
    shutil.copyfile(os.path.splitext(xml)[0] + ".bin", os.path.join(out_dir, "model.bin"))
    shutil.copyfile(inputs, os.path.join(out_dir, "inputs.npz"))
    shutil.rmtree(work, ignore_errors=True)
    return Reduced(final, os.path.join(out_dir, "inputs.npz"), _op_layers(net), tries)


def _distances(program, outputs) -> dict[str, int]:
    """Layer id -> edges from the output layers (breadth first over inputs)."""
    dist = {lid: 0 for lid, _ in outputs}
    frontier = list(dist)
    while frontier:
        nxt = []
        for lid in frontier:
            for src, _ in program.nodes[lid].inputs:
                if src not in dist:
                    dist[src] = dist[lid] + 1
                    nxt.append(src)
        frontier = nxt
    return dist


def write_repro(model_dir: str, reduced: Reduced, command: str) -> None:
    """irrun's and OpenVINO's outputs and a README.txt beside the reduced model."""
    from ..run.feed import save_npz, write_text
    from ..run.model import read_model

    feed = dict(np.load(reduced.inputs))
    m = read_model(reduced.xml)
    save_npz(os.path.join(model_dir, "irrun_outputs.npz"), m.infer(feed))
    ov_note = ""
    try:
        outs = _ov_outputs(reduced.xml, feed)
        save_npz(os.path.join(model_dir, "openvino_outputs.npz"),
                 {o.name: v for o, v in zip(m.outputs, outs)})
    except Exception as e:     # OpenVINO missing, or the problem is that it fails
        ov_note = f"\nOpenVINO did not run it: {type(e).__name__}: {str(e).splitlines()[0]}\n"
    write_text(os.path.join(model_dir, "README.txt"), (
                f"A reduced model ({reduced.layers} op layer{'s' if reduced.layers != 1 else ''}) "
                f"made by `irrun reduce` "
                f"after {reduced.tries} tries.\n\nmodel.xml, model.bin: the model\n"
                "inputs.npz: its inputs (the values the full model computed at the cut)\n"
                "irrun_outputs.npz: irrun's outputs\n"
                "openvino_outputs.npz: OpenVINO's CPU plugin's outputs (f32 precision)\n"
                f"{ov_note}\nShow the problem with:\n\n    {command}\n"))
