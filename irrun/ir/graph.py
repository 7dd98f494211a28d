"""The layer graph: plain-dict adjacency (PortGraph) with edges resolved to port positions.

networkx is not needed to load a model (importing it costs more than reading a small file);
only a graph with a cycle uses it, to name a loop, and PortGraph.to_networkx() gives the
same graph as an nx.MultiDiGraph to anyone who wants its algorithms.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Collector
from .reader import IRDocument


class PortGraph:
    """One node per layer id and one edge per connected input port, as plain dicts.

    `succ[u][v]` and `pred[v][u]` map an edge's key (the consumer's input position) to its
    data {out, inp, line} (one dict, shared by both sides), laid out as networkx's
    MultiDiGraph lays them out, so iteration orders are networkx's too: nodes in file order,
    `edges()` by producer, then consumer (first edge to it first), then key.
    """

    __slots__ = ("layers", "succ", "pred", "_edge_count")

    def __init__(self, layers=()):
        self.layers: dict = {layer.id: layer for layer in layers}    # layer id -> Layer
        self.succ: dict[str, dict[str, dict[int, dict]]] = {lid: {} for lid in self.layers}
        self.pred: dict[str, dict[str, dict[int, dict]]] = {lid: {} for lid in self.layers}
        self._edge_count = 0

    def add_node(self, lid: str, layer=None) -> None:
        if lid not in self.layers:
            self.succ[lid] = {}
            self.pred[lid] = {}
        self.layers[lid] = layer

    def add_edge(self, u: str, v: str, key: int, **data) -> None:
        """An edge u -> v feeding input position `key` of v (a new key; nodes must exist)."""
        keys = self.succ[u].get(v)
        if keys is None:
            keys = self.succ[u][v] = self.pred[v][u] = {}
        if key not in keys:
            self._edge_count += 1
        keys[key] = data

    def __iter__(self):
        return iter(self.layers)

    def __contains__(self, lid) -> bool:
        return lid in self.layers

    def __len__(self) -> int:
        return len(self.layers)

    def has_edge(self, u: str, v: str) -> bool:
        return v in self.succ.get(u, ())

    def number_of_edges(self) -> int:
        return self._edge_count

    def edges(self, data: bool = False):
        """(u, v, data) for every edge (or (u, v) without data), in networkx's order."""
        for u, nbrs in self.succ.items():
            for v, keys in nbrs.items():
                for d in keys.values():
                    yield (u, v, d) if data else (u, v)

    def to_networkx(self):
        """The same graph as a networkx MultiDiGraph (node attribute `layer`; edges keyed
        by input position, with out, inp and line), for networkx's algorithms."""
        import networkx as nx

        g = nx.MultiDiGraph()
        for lid, layer in self.layers.items():
            g.add_node(lid, layer=layer)
        for u, nbrs in self.succ.items():
            for v, keys in nbrs.items():
                for key, d in keys.items():
                    g.add_edge(u, v, key=key, **d)
        return g


@dataclass
class LayerGraph:
    """What the graph pass derives from one network (the model's or a body's).

    `graph` has one node per layer id; an edge u->v carries `out` (the producer's output
    position), `inp` (the consumer's input position) and the XML `line`.
    """

    graph: PortGraph
    order: list[str] | None              # topological order; None when there is a cycle
    cycle: set[str] = field(default_factory=set)    # layers on a cycle (reported)
    unused: set[str] = field(default_factory=set)   # layers no Result or Assign depends on


def build_graph(doc: IRDocument, diag: Collector, *, body: bool = False) -> LayerGraph:
    """Resolve the edges, check inputs, order the layers and find what no output needs.

    Port ids are labels: `from-port` is looked up among the producer's <output> ports and
    `to-port` among the consumer's <input> ports; the position inside <input> is the op's
    input index (ir-format.md). A body (of a Loop, TensorIterator or If) is checked the same
    way; `body` only changes the wording of "no Result".
    """
    g = PortGraph(doc.layers)
    layers = g.layers
    indegree, taken, meant = _resolve_edges(doc, layers, g, diag)
    _check_unconnected_inputs(doc, indegree, taken, meant, diag)
    order = _topological_order(layers, g.succ, indegree)
    cycle = set() if order is not None else _report_cycles(doc, layers, g, diag)
    unused = _find_unused(doc, g, diag, body)
    return LayerGraph(g, order, cycle, unused)


def _resolve_edges(doc, layers, g, diag):
    """Add each well-formed <edge> to g; report the others at their line.

    Returns the in-degrees (for the ordering), the taken input ports {(layer id, input
    position): edge line}, and the layers a broken edge was meant to feed (their
    unconnected inputs are the same problem, reported once).
    """
    gsucc, gpred = g.succ, g.pred
    edge_count = 0
    indegree = dict.fromkeys(layers, 0)
    taken: dict[tuple[str, int], int] = {}
    meant: set[str] = set()
    for e in doc.edges:
        src, dst = layers.get(e.from_layer), layers.get(e.to_layer)
        if e.broken:   # the reader reported it
            if dst is not None:
                meant.add(dst.id)
            continue
        if src is None or dst is None:
            # Name the layer that exists: the consumer whose input is broken, else the producer.
            for lid, what in ((e.from_layer, "from-layer"), (e.to_layer, "to-layer")):
                if lid not in layers:
                    diag.error("bad-edge", f"edge {what}={lid} names no layer", line=e.line,
                               layer=dst or src)
            if dst is not None:
                meant.add(dst.id)
            continue
        ports = src.outputs    # one port (most layers): its position is 0
        out = (0 if ports[0].id == e.from_port else None) if len(ports) == 1 else \
            src.output_position(e.from_port)
        if out is None and any(p.id is None for p in src.outputs):
            meant.add(dst.id)   # a port id that is not a number is reported already
            continue
        if out is None:
            ids = ", ".join(str(p.id) for p in src.outputs) or "none"
            diag.error("bad-edge", f"edge from-port={e.from_port}: layer '{src.name}' (id {src.id}) "
                       f"has no output port {e.from_port} (its output ports: {ids})", line=e.line,
                       layer=src)
            meant.add(dst.id)
            continue
        ports = dst.inputs
        inp = (0 if ports[0].id == e.to_port else None) if len(ports) == 1 else \
            dst.input_position(e.to_port)
        if inp is None and any(p.id is None for p in dst.inputs):
            meant.add(dst.id)
            continue
        if inp is None:
            ids = ", ".join(str(p.id) for p in dst.inputs) or "none"
            diag.error("bad-edge", f"edge to-port={e.to_port}: layer '{dst.name}' (id {dst.id}) "
                       f"has no input port {e.to_port} (its input ports: {ids})", line=e.line,
                       layer=dst)
            meant.add(dst.id)
            continue
        u, v = src.id, dst.id
        where = (v, inp)
        if where in taken:
            diag.error("duplicate-edge", f"input port {e.to_port} already has an edge (line "
                       f"{taken[where]}); each input port takes exactly one", line=e.line,
                       layer=dst)
            continue
        taken[where] = e.line
        # PortGraph.add_edge, inlined: one call per edge was a tenth of the graph pass.
        keys = gsucc[u].get(v)
        if keys is None:
            keys = gsucc[u][v] = gpred[v][u] = {}
        keys[inp] = {"out": out, "inp": inp, "line": e.line}
        edge_count += 1
        indegree[v] += 1
    g._edge_count += edge_count
    return indegree, taken, meant


def _check_unconnected_inputs(doc, indegree, taken, meant, diag) -> None:
    for layer in doc.layers:
        if indegree[layer.id] == len(layer.inputs) or layer.id in meant:
            # (Each edge takes a distinct input position of the layer: as many edges as
            # inputs is every input connected, the usual case, told without a look-up each.)
            continue
        for p in layer.inputs:
            if (layer.id, p.index) not in taken and p.id is not None:
                diag.error("unconnected-input", f"input port {p.id} has no edge", line=p.line,
                           layer=layer)


def _report_cycles(doc, layers, g, diag) -> set[str]:
    """Name one loop per strongly connected component; the layers on cycles.

    Only a graph with a cycle needs networkx's components (and networkx itself: importing
    it costs more than reading a small model).
    """
    import networkx as nx

    cycle_nodes: set[str] = set()
    ng = g.to_networkx()
    for component in nx.strongly_connected_components(ng):
        if len(component) > 1 or any(g.has_edge(n, n) for n in component):
            ordered = [layer.id for layer in doc.layers if layer.id in component]
            cycle_nodes |= component
            first = layers[ordered[0]]
            # One loop along its edges, from the component's first layer in the file.
            loop = [u for u, _, _ in nx.find_cycle(ng.subgraph(component), ordered[0])]
            names = " -> ".join(f"'{layers[n].name}' (id {n})" for n in loop + [loop[0]])
            more = len(component) - len(loop)
            extra = f" (and {more} more layer{'s' if more != 1 else ''} on loops through these)" \
                if more else ""
            diag.error("cycle", f"the graph has a cycle: {names}{extra}", layer=first)
    return cycle_nodes


def _find_unused(doc, g, diag, body: bool) -> set[str]:
    """Layers no Result (or Assign, a sink OpenVINO keeps too) depends on; warned about."""
    roots = [layer for layer in doc.layers if layer.type.lower() in ("result", "assign")]
    if not any(layer.type.lower() == "result" for layer in roots):
        what = "the body has no Result layer, so it has no outputs" if body else \
            "the model has no Result layer, so it has no outputs"
        diag.error("no-result", what, line=getattr(doc, "line", None))
    needed = ancestors_and_self(g, [r.id for r in roots])
    unused = set()
    if len(needed) == len(g.layers):
        return unused       # every layer is needed (the usual case): nothing to look for
    for layer in doc.layers:
        if layer.id in needed:
            continue
        unused.add(layer.id)
        # An unused Parameter is still an input (the caller feeds it): not a mistake.
        if roots and layer.type.lower() != "parameter":
            diag.warning("unused-layer", "no Result depends on this layer; it is never run",
                         layer=layer)
    return unused


def _topological_order(layers, succ, indegree) -> list[str] | None:
    """The order nx.topological_sort(g) gives, or None when the graph has a cycle.

    `succ[u][v]` holds the edges u -> v (PortGraph.succ: their keys); `indegree[v]` counts
    v's edges. The same Kahn walk (sources in file order, then each layer's consumers in
    edge order as their last input is reached), over plain dicts: networkx's generators
    cost ~20 µs a layer. Keeping networkx's order keeps the run order and the diagnostics'
    order as they were.
    """
    remaining = dict(indegree)
    order = [lid for lid in layers if remaining[lid] == 0]
    for u in order:   # the list grows while it is walked: a FIFO queue
        for v, keys in succ[u].items():
            remaining[v] -= len(keys)
            if remaining[v] == 0:
                order.append(v)
    return order if len(order) == len(layers) else None


def ancestors_and_self(g, roots) -> set[str]:
    """The roots and every layer they depend on, in one walk for all roots
    (nx.ancestors walks the graph once per root). `g`: a PortGraph or a networkx graph."""
    pred = g.pred
    seen = set(roots)
    stack = list(seen)
    while stack:
        for u in pred[stack.pop()]:
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return seen
