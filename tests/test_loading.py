"""The loader's fast paths give the same result as the plain networkx forms they replace.

Correctness only: timing is in bench/run.py, never in tests.
"""
from __future__ import annotations

import gc
import sys

import networkx as nx
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from irfiles import IRBuilder

import irrun
from irrun.ir.graph import _topological_order, ancestors_and_self
from irrun.run.program import load_program


def _graph(n, edges):
    """A MultiDiGraph of n nodes (inserted in order) and the dicts build_graph keeps."""
    g = nx.MultiDiGraph()
    layers = [f"L{i}" for i in range(n)]
    g.add_nodes_from(layers)
    succ = {lid: {} for lid in layers}
    indegree = dict.fromkeys(layers, 0)
    for u, v in edges:
        g.add_edge(layers[u], layers[v])
        succ[layers[u]].setdefault(layers[v], []).append(None)   # one key per edge
        indegree[layers[v]] += 1
    return g, layers, succ, indegree


edge_lists = st.integers(1, 12).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1),
                                                       st.integers(0, n - 1)), max_size=30)))


@given(edge_lists)
def test_topological_order_is_networkx_order(case):
    n, edges = case
    # Forward edges only (u < v, repeats allowed): a DAG whose order has many ties.
    dag = [(min(u, v), max(u, v)) for u, v in edges if u != v]
    g, layers, succ, indegree = _graph(n, dag)
    assert _topological_order(layers, succ, indegree) == list(nx.topological_sort(g))


@given(edge_lists)
def test_topological_order_is_none_exactly_for_a_cycle(case):
    n, edges = case
    g, layers, succ, indegree = _graph(n, edges)
    order = _topological_order(layers, succ, indegree)
    assert (order is None) == (not nx.is_directed_acyclic_graph(g))
    if order is not None:
        assert order == list(nx.topological_sort(g))


@given(edge_lists, st.data())
def test_ancestors_and_self_is_the_union_of_networkx_ancestors(case, data):
    n, edges = case
    g, layers, _, _ = _graph(n, edges)
    roots = data.draw(st.lists(st.sampled_from(layers), max_size=4))
    want = set(roots)
    for r in roots:
        want |= nx.ancestors(g, r)
    assert ancestors_and_self(g, roots) == want


def _long_chain(tmp_path, units: int):
    """Parameter -> `units` x [Convert f16, Convert f32, Negative, Maximum with the unit's
    input] -> Result, with a Minimum(v, v) (two edges between one pair of layers) every 50
    units. Returns the .xml path and the NumPy function it computes."""
    b = IRBuilder()
    prev = b.parameter("x", "f32", "2,3", [2, 3])
    dims = [[2, 3]]
    for u in range(units):
        a = b.op("Convert", "opset1", [prev], [0], [1], {"destination_type": "f16"},
                 out_dims=dims, out_precisions=["FP16"])
        c = b.op("Convert", "opset1", [(a, 1)], [0], [1], {"destination_type": "f32"},
                 out_dims=dims, out_precisions=["FP32"])
        neg = b.op("Negative", "opset1", [(c, 1)], [0], [1], out_dims=dims)
        prev = (b.op("Maximum", "opset1", [(neg, 1), prev], [0, 1], [2], out_dims=dims), 2)
        if u % 50 == 49:
            prev = (b.op("Minimum", "opset1", [prev, prev], [0, 1], [2], out_dims=dims), 2)
    b.result(prev, "y")

    def expected(x):
        v = x
        for u in range(units):
            v = np.maximum(-(v.astype(np.float16).astype(np.float32)), v)
            if u % 50 == 49:
                v = np.minimum(v, v)
        return v
    return b.write(tmp_path), expected


def test_a_2000_layer_chain_loads_and_runs(tmp_path):
    xml, expected = _long_chain(tmp_path, 500)   # 2,000 op layers (and 10 Minimums)
    program = load_program(xml)
    assert program.ok, program.diagnostics
    # IRBuilder writes input ports without <dim>s: one warning per input port, in file order.
    ports = [(d.line, d.layer_name) for d in program.diagnostics]
    assert ports == sorted(ports, key=lambda p: p[0]) and len(ports) == 500 * 5 + 10 * 2 + 1
    assert all(d.code == "declared-mismatch" and d.message.endswith("declares dims [] but "
                                                                    "receives [2,3]")
               for d in program.diagnostics)
    assert len(program.nodes) == 2 + 500 * 4 + 10
    # The run order is networkx's topological order, every layer once.
    assert program.order == list(nx.topological_sort(program.graph.to_networkx()))
    assert program.cycle == set() and program.unused == set()
    model = irrun.read_model(xml)
    # Every layer runs but the Result (the plan stops at the tensor it returns).
    assert model.run_order() == [program.nodes[lid].layer.name for lid in program.order][:-1]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32) * 100
    out = model.infer({"x": x})["y"]
    assert out.dtype == np.float32 and out.shape == (2, 3)
    np.testing.assert_array_equal(out, expected(x))
    # The intermediate after the first unit is what the first unit computes.
    first = model.infer({"x": x}, until="Maximum_4")["Maximum_4"]
    np.testing.assert_array_equal(first, np.maximum(-(x.astype(np.float16).astype(np.float32)), x))


def test_a_long_chain_with_a_cycle_reports_it_once(tmp_path):
    """The cycle path (networkx components and a subgraph order) still runs when the fast
    order finds a cycle."""
    xml, _ = _long_chain(tmp_path, 30)
    with open(xml) as f:
        text = f.read()
    # Feed the first Convert from the last Maximum instead of from the Parameter.
    last = text.rsplit('type="Maximum"', 1)[0].rsplit('<layer id="', 1)[1].split('"', 1)[0]
    text = text.replace('<edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>',
                        f'<edge from-layer="{last}" from-port="2" to-layer="1" to-port="0"/>')
    with open(xml, "w") as f:
        f.write(text)
    diagnostics = irrun.validate(xml)
    cycles = [d for d in diagnostics if d.code == "cycle"]
    assert len(cycles) == 1 and cycles[0].severity == "error"
    assert "'Convert_1' (id 1)" in cycles[0].message


def test_loading_leaves_the_garbage_collector_as_it_was(tmp_path):
    xml, _ = _long_chain(tmp_path, 2)
    assert gc.isenabled()
    assert load_program(xml).ok and gc.isenabled()
    assert not load_program(tmp_path / "missing.xml").ok and gc.isenabled()
    gc.disable()
    try:
        assert load_program(xml).ok and not gc.isenabled()
    finally:
        gc.enable()


def _concat_of_parameters(tmp_path, n: int, stem: str) -> str:
    b = IRBuilder()
    params = [b.parameter(f"p{i}", "f32", "1", [1]) for i in range(n)]
    cat = b.op("Concat", "opset1", params, list(range(n)), [n], {"axis": "0"}, out_dims=[[n]])
    b.result((cat, n), "y")
    return b.write(tmp_path, stem)


def _lines_run(fn) -> int:
    """The Python lines fn() executes (a count of trace events: no timing)."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(before)
    return count


def test_validating_is_linear_in_layers_and_edges(tmp_path):
    """Doubling a Concat's inputs (and the Parameters feeding them) or a chain's length
    doubles the Python work of irrun.validate, not quadruples it: a scan of a layer's ports
    per edge, or of the layers per layer, would show here as lines executed."""
    files = {n: _concat_of_parameters(tmp_path, n, f"cat{n}") for n in (20, 150, 300, 600)}
    chains = {}
    for n in (5, 40, 80, 160):    # units of 4 layers
        (tmp_path / f"chain{n}").mkdir()
        chains[n] = _long_chain(tmp_path / f"chain{n}", n)[0]
    for sizes in (files, chains):
        small, *rest = sizes
        assert irrun.validate(sizes[small]) is not None    # warm: lazy imports, caches
        n1, n2, n3 = rest
        lines = {n: _lines_run(lambda n=n: irrun.validate(sizes[n])) for n in rest}
        first, second = lines[n2] - lines[n1], lines[n3] - lines[n2]
        # Linear work gives second == 2 * first (quadratic: 4 *); a little slack for the
        # ids, names and line numbers that grow a digit.
        assert 0 < first and second <= 2.2 * first, (sizes, lines)


def test_layers_asking_inference_the_same_each_get_its_warnings(tmp_path):
    """Inference answers a repeated question (op, attributes, input specs) once, but every
    layer that asks still gets the shape rule's warnings and its own declared-port checks."""
    b = IRBuilder()
    x = b.parameter("x", "f32", "1,1,1", [1, 1, 1])
    pool = {"strides": "1", "pads_begin": "0", "pads_end": "2", "kernel": "1",
            "rounding_type": "floor", "auto_pad": "explicit"}
    first = b.op("MaxPool", "opset1", [x], [0], [1], pool, name="first", out_dims=[[1, 1, 3]])
    second = b.op("MaxPool", "opset1", [x], [0], [1], pool, name="second",
                  out_dims=[[1, 1, 4]])
    b.result((first, 1))
    b.result((second, 1))
    found = [(d.layer_name, d.code, d.message.split(" ")[0]) for d in
             irrun.validate(b.write(tmp_path))]
    assert found.count(("first", "empty-window", "window(s)")) == 1
    assert found.count(("second", "empty-window", "window(s)")) == 1
    assert ("second", "declared-mismatch", "output") in found
    assert ("first", "declared-mismatch", "output") not in found


def test_what_a_load_makes_is_not_left_for_the_young_collections(tmp_path):
    """The objects a load makes live as long as the model: they go to the collector's oldest
    generation, not into the young ones that every collection walks."""
    xml, _ = _long_chain(tmp_path, 500)
    gc.collect()
    model = irrun.read_model(xml)
    young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
    assert young < 2000, young      # the 2,000-odd layers alone make over 10,000
    assert model.program.nodes
    assert gc.isenabled() and gc.get_freeze_count() == 0
