"""Loop-5, TensorIterator-1 and If-8: bodies read, checked, inferred and run, against
OpenVINO's CPU plugin; and the validator on corrupted bodies (every problem at its line)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_same, ov, ov_run, save

import irrun
from irrun.ui.cli import cli

o8 = pytest.importorskip("openvino.opset8")


def _f32(shape, name):
    return o8.parameter(list(shape), np.float32, name=name)


# ---------------------------------------------------------------- model builders

def build_loop(shape=(2, 3), trip=None, limit=None, dynamic_trip=False, grow=False):
    """acc_{i+1} = acc_i + x * (i + 1); stops after `trip` iterations, or (with `limit`) when
    the iteration number reaches `limit` (the body's condition). Outputs: the last acc, and
    every iteration's acc stacked on a new axis 0 (and, with `grow`, a back edge whose shape
    grows by one row per iteration)."""
    x = _f32(shape, "x")
    inputs = [x]
    if dynamic_trip:
        trip_count = o8.parameter([], np.int64, name="trip")
        inputs.append(trip_count)
    else:
        trip_count = o8.constant(np.int64(trip if trip is not None else -1))
    exec_cond = o8.constant(True)
    bx = _f32(shape, "bx")
    bacc = _f32(shape, "bacc")
    it = o8.parameter([], np.int64, name="it")
    step = o8.convert(o8.add(it, o8.constant(np.int64(1))), "f32")
    acc = o8.add(bacc, o8.multiply(bx, step))
    cond = o8.less(it, o8.constant(np.int64(limit))) if limit is not None else o8.constant(True)
    r_cond, r_acc = o8.result(cond), o8.result(acc)
    r_scan = o8.result(o8.unsqueeze(acc, o8.constant([0])))
    results, params = [r_cond, r_acc, r_scan], [bx, bacc, it]
    if grow:
        bbuf = o8.parameter([-1, shape[1]], np.float32, name="bbuf")
        r_buf = o8.result(o8.concat([bbuf, o8.reshape(o8.reduce_sum(acc, [0], True), [1, -1],
                                                     False)], 0))
        results.append(r_buf)
        params.append(bbuf)
    body = ov.Model(results, params, "body")
    loop = o8.loop(trip_count, exec_cond)
    loop.set_function(body)
    loop.set_special_body_ports([2, 0])
    loop.set_invariant_input(bx, x.output(0))
    loop.set_merged_input(bacc, x.output(0), r_acc.output(0))
    outs = [loop.get_iter_value(r_acc.output(0), -1),
            loop.get_concatenated_slices(r_scan.output(0), 0, 1, 1, -1, 0)]
    if grow:
        init = o8.reshape(o8.reduce_sum(x, [0], True), [1, -1], False)
        loop.set_merged_input(bbuf, init.output(0), r_buf.output(0))
        outs.append(loop.get_iter_value(r_buf.output(0), -1))
    return ov.Model(outs, inputs)


def build_ti(seq=5, start=0, stride=1, end=-1, out_stride=1):
    """An RNN-like cell: h_t = tanh(x_t + 0.5 h_{t-1}) over axis 1, sliced in `stride`
    order; outputs the last h and every h concatenated on axis 1."""
    y = _f32((2, seq, 3), "y")
    h0 = _f32((2, 3), "h0")
    xi = _f32((2, 1, 3), "xi")
    hi = _f32((2, 3), "hi")
    nh = o8.tanh(o8.add(o8.squeeze(xi, o8.constant([1])),
                        o8.multiply(hi, o8.constant(np.float32(0.5)))))
    rh = o8.result(nh)
    ro = o8.result(o8.unsqueeze(nh, o8.constant([1])))
    body = ov.Model([rh, ro], [xi, hi])
    ti = o8.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(xi, y.output(0), start, stride, 1, end, 1)
    ti.set_merged_input(hi, h0.output(0), rh.output(0))
    a = ti.get_iter_value(rh.output(0), -1)
    b = ti.get_concatenated_slices(ro.output(0), 0 if out_stride > 0 else -1, out_stride, 1,
                                   -1 if out_stride > 0 else 0, 1)
    return ov.Model([a, b], [y, h0])


def build_if(rows=2):
    """then: relu(x) of x's shape; else: x concatenated with itself (twice the rows)."""
    x = _f32((rows, 3), "x")
    c = o8.parameter([], bool, name="c")
    tp = _f32((rows, 3), "tp")
    then = ov.Model([o8.result(o8.relu(tp))], [tp], "then")
    ep = _f32((rows, 3), "ep")
    other = ov.Model([o8.result(o8.concat([ep, ep], 0))], [ep], "else")
    node = o8.if_op(c)
    node.set_then_body(then)
    node.set_else_body(other)
    node.set_input(x.output(0), tp, ep)
    out = node.set_output(then.get_results()[0], other.get_results()[0])
    return ov.Model([out], [x, c])


def _compare(model, feed, tmp_path, name="model"):
    xml = save(model, tmp_path, name)
    expected = ov_run(xml, feed)
    m = irrun.read_model(xml)
    got = m.infer(feed)
    assert len(got) == len(expected)
    for g, e in zip(got.values(), expected):
        assert_same(g, e)
    return m, xml


# ---------------------------------------------------------------- reading

def test_reader_keeps_body_lines_and_port_maps(tmp_path):
    xml = save(build_loop(trip=3), tmp_path)
    text = Path(xml).read_text().splitlines()
    m = irrun.read_model(xml)
    loop = next(n for n in m.program.nodes.values() if n.layer.type == "Loop")
    (body,) = loop.layer.bodies
    assert body.role == "body" and text[body.line - 1].strip() == "<body>"
    for layer in body.doc.layers:   # every body layer at the line of its <layer id=...>
        assert f'<layer id="{layer.id}" name="{layer.name}"' in text[layer.line - 1]
    purposes = {e.purpose for e in body.port_map}
    assert {"current_iteration", "execution_condition"} <= purposes
    for e in body.port_map:
        assert f'internal_layer_id="{e.internal_layer_id}"' in text[e.line - 1]
    (edge,) = body.back_edges
    assert f'from-layer="{edge.from_layer}" to-layer="{edge.to_layer}"' in text[edge.line - 1]


# ---------------------------------------------------------------- Loop

@pytest.mark.oracle
@pytest.mark.parametrize("trip", [1, 4])
def test_loop_for_matches_openvino(tmp_path, trip):
    x = np.random.default_rng(trip).standard_normal((2, 3)).astype(np.float32)
    m, _ = _compare(build_loop(trip=trip), {"x": x}, tmp_path)
    # The trip count is a constant and the body's condition is constantly true: the scan
    # output's length is known at load time.
    assert m.outputs[1].partial_shape == f"[{trip},2,3]"


@pytest.mark.oracle
@pytest.mark.parametrize("trip,limit", [(10, 3), (2, 5), (-1, 4)])
def test_loop_with_body_condition_matches_openvino(tmp_path, trip, limit):
    x = np.random.default_rng(limit).standard_normal((2, 3)).astype(np.float32)
    m, _ = _compare(build_loop(trip=trip, limit=limit), {"x": x}, tmp_path)
    assert m.outputs[1].partial_shape == "[?,2,3]"   # the condition decides at run time
    got = m.infer({"x": x})
    assert list(got.values())[1].shape[0] == (min(trip, limit + 1) if trip >= 0 else limit + 1)


@pytest.mark.oracle
@given(trip=st.integers(1, 6), seed=st.integers(0, 2**16))
@settings(max_examples=6)
def test_loop_dynamic_trip_count_matches_openvino(tmp_path_factory, trip, seed):
    tmp = tmp_path_factory.mktemp("loop")
    x = np.random.default_rng(seed).standard_normal((3, 2)).astype(np.float32)
    _compare(build_loop(shape=(3, 2), dynamic_trip=True), {"x": x, "trip": np.int64(trip)}, tmp)


@pytest.mark.oracle
def test_loop_back_edge_that_grows_settles_to_a_dynamic_dim(tmp_path):
    x = np.random.default_rng(7).standard_normal((2, 3)).astype(np.float32)
    m, _ = _compare(build_loop(trip=4, grow=True), {"x": x}, tmp_path)
    # The buffer gains a row per iteration: the fixed point makes its dim 0 dynamic (at
    # least 1: the body's Concat adds a row to whatever comes in).
    assert m.outputs[2].partial_shape == "[1..,3]"
    assert m.infer({"x": x})[m.outputs[2].name].shape == (5, 3)


def test_loop_plan_is_built_once(tmp_path):
    xml = save(build_loop(trip=5), tmp_path)
    m = irrun.read_model(xml)
    loop = next(n for n in m.program.nodes.values() if n.layer.type == "Loop")
    body = loop.attrs.body.body
    m.infer({"x": np.ones((2, 3), np.float32)})
    plans = body.plans                   # (general plan, signature plans, plan maker)
    assert plans is not None
    m.infer({"x": np.ones((2, 3), np.float32)})
    assert body.plans is plans and body.plans[0] is plans[0]


def test_loop_body_gets_a_plan_for_its_iterations_shapes():
    """The GRU's while loop of models/keras_gru_classifier keeps dynamic shapes in its body
    (the Loop does not infer it again per run), and every iteration feeds it the same
    shapes: from the second iteration on it runs a plan for them (irrun.run.specialize), all
    of whose layers take the fast path, and the outputs are still OpenVINO's."""
    folder = Path(__file__).resolve().parent.parent / "models" / "keras_gru_classifier"
    m = irrun.read_model(folder / "model.xml")
    with np.load(folder / "inputs.npz") as z, np.load(folder / "expected.npz") as e:
        got, expected = m.infer(dict(z)), dict(e)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)
    loop = next(n for n in m.program.nodes.values() if n.layer.type == "Loop")
    body = loop.attrs.body.body
    general, signature_plans, _ = body.plans
    assert general.most_bytes is None                    # the general plan: dynamic
    plans = [p for p in signature_plans.plans.values() if p]
    assert plans and all(s.recheck is None for p in plans for s in p.steps)


def build_sliced_loop():
    """A Loop over axis 1 of x (a sliced input), summing into a back edge; the trip count and
    the initial condition are inputs."""
    x = _f32((2, 4, 3), "x")
    c = o8.parameter([], bool, name="c")
    t = o8.parameter([], np.int64, name="t")
    bx = _f32((2, 1, 3), "bx")
    bs = _f32((2, 3), "bs")
    s = o8.add(bs, o8.squeeze(bx, o8.constant([1])))
    r, rs = o8.result(s), o8.result(o8.unsqueeze(s, o8.constant([0])))
    rc = o8.result(o8.constant(True))
    loop = o8.loop(t, c)
    loop.set_function(ov.Model([r, rs, rc], [bx, bs]))
    loop.set_special_body_ports([-1, 2])
    loop.set_sliced_input(bx, x.output(0), 0, 1, 1, -1, 1)
    loop.set_merged_input(bs, o8.reduce_sum(x, [1], False).output(0), r.output(0))
    return ov.Model([loop.get_iter_value(r.output(0), -1),
                     loop.get_concatenated_slices(rs.output(0), 0, 1, 1, -1, 0)], [x, c, t])


@pytest.mark.oracle
@pytest.mark.parametrize("cond,trip", [(True, 4), (True, 2), (False, 3)])
def test_loop_sliced_input_and_zero_iterations_match_openvino(tmp_path, cond, trip):
    x = np.random.default_rng(trip).standard_normal((2, 4, 3)).astype(np.float32)
    m, _ = _compare(build_sliced_loop(), {"x": x, "c": np.array(cond), "t": np.int64(trip)},
                    tmp_path)
    got = list(m.infer({"x": x, "c": np.array(cond), "t": np.int64(trip)}).values())
    # No iteration: the back edge's Parameter keeps its initial value, the scan is empty.
    assert got[1].shape == ((trip, 2, 3) if cond else (0, 2, 3))


def build_nested():
    """A Loop whose body holds an If on the iteration number: +1 on even, *2 on odd."""
    x = _f32((3,), "x")
    bacc = _f32((3,), "bacc")
    it = o8.parameter([], np.int64, name="it")
    even = o8.equal(o8.floor_mod(it, o8.constant(np.int64(2))), o8.constant(np.int64(0)))
    tp = _f32((3,), "tp")
    then = ov.Model([o8.result(o8.add(tp, o8.constant(np.float32(1))))], [tp])
    ep = _f32((3,), "ep")
    other = ov.Model([o8.result(o8.multiply(ep, o8.constant(np.float32(2))))], [ep])
    node = o8.if_op(even.output(0))
    node.set_then_body(then)
    node.set_else_body(other)
    node.set_input(bacc.output(0), tp, ep)
    v = node.set_output(then.get_results()[0], other.get_results()[0])
    r, rc = o8.result(v), o8.result(o8.constant(True))
    loop = o8.loop(o8.constant(np.int64(5)), o8.constant(True))
    loop.set_function(ov.Model([r, rc], [bacc, it]))
    loop.set_special_body_ports([1, 1])
    loop.set_merged_input(bacc, x.output(0), r.output(0))
    return ov.Model([loop.get_iter_value(r.output(0), -1)], [x])


@pytest.mark.oracle
def test_if_inside_a_loop_matches_openvino(tmp_path):
    x = np.array([1, 2, 3], np.float32)
    m, xml = _compare(build_nested(), {"x": x}, tmp_path)
    np.testing.assert_array_equal(m.infer({"x": x})[m.outputs[0].name], [11, 15, 19])
    from click.testing import CliRunner
    r = CliRunner().invoke(cli, ["graph", xml])
    assert r.output.count('subgraph "cluster_') == 3   # the Loop's body and the If's two


# ---------------------------------------------------------------- TensorIterator

@pytest.mark.oracle
@pytest.mark.parametrize("start,stride,end,out_stride", [
    (0, 1, -1, 1), (-1, -1, 0, 1), (-1, -1, 0, -1), (0, 1, -1, -1)])
def test_tensor_iterator_slicing_matches_openvino(tmp_path, start, stride, end, out_stride):
    rng = np.random.default_rng(3)
    feed = {"y": rng.standard_normal((2, 5, 3)).astype(np.float32),
            "h0": rng.standard_normal((2, 3)).astype(np.float32)}
    m, _ = _compare(build_ti(5, start, stride, end, out_stride), feed, tmp_path)
    assert m.outputs[1].partial_shape == "[2,5,3]"


def test_tensor_iterator_reverse_is_forward_of_reversed_input(tmp_path):
    rng = np.random.default_rng(4)
    y = rng.standard_normal((2, 5, 3)).astype(np.float32)
    h0 = np.zeros((2, 3), np.float32)
    fwd = irrun.read_model(save(build_ti(5, 0, 1, -1), tmp_path, "f"))
    rev = irrun.read_model(save(build_ti(5, -1, -1, 0), tmp_path, "r"))
    a = list(fwd.infer({"y": y[:, ::-1].copy(), "h0": h0}).values())
    b = list(rev.infer({"y": y, "h0": h0}).values())
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


# ---------------------------------------------------------------- If

@pytest.mark.oracle
@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_of_different_shapes_match_openvino(tmp_path, cond):
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    m, _ = _compare(build_if(), {"x": x, "c": np.array(cond)}, tmp_path)
    # then gives [2,3], else [4,3]: the output spec is their merge.
    assert m.outputs[0].partial_shape == "[?,3]"
    assert m.infer({"x": x, "c": np.array(cond)})[m.outputs[0].name].shape == \
        ((2, 3) if cond else (4, 3))


# ---------------------------------------------------------------- the CLI understands bodies

def test_trace_and_profile_attribute_body_time_to_the_loop(tmp_path):
    from click.testing import CliRunner

    xml = save(build_loop(trip=3), tmp_path)
    np.savez(tmp_path / "in.npz", x=np.ones((2, 3), np.float32))
    r = CliRunner().invoke(cli, ["run", xml, "-i", str(tmp_path / "in.npz"), "--profile"])
    assert r.exit_code == 0, r.output
    assert re.search(r"Loop", r.output)
    rows = irrun.read_model(xml).profile({"x": np.ones((2, 3), np.float32)})
    assert rows[0]["type"] == "Loop"        # the body's time is the Loop's
    assert not any(row["type"] == "Multiply" for row in rows)   # body layers are not rows
    r = CliRunner().invoke(cli, ["run", xml, "-i", str(tmp_path / "in.npz"), "-vv"])
    assert r.exit_code == 0, r.output
    # -vv traces the body's layers too, once per iteration, marked as inside the Loop.
    assert len([line for line in r.output.splitlines()
                if line.startswith("  | Multiply-opset1")]) == 3
    # With --profile -vv, each body layer's time summed over the iterations (3 runs).
    rows = irrun.read_model(xml).profile({"x": np.ones((2, 3), np.float32)}, bodies=True)
    inner = [row for row in rows if row.get("body") is not None]
    assert inner and all(row["runs"] == 3 and row["name"].startswith(row["body"] + "/body/")
                         for row in inner)
    assert {row["type"] for row in inner} >= {"Multiply", "Add", "Convert"}
    r = CliRunner().invoke(cli, ["run", xml, "-i", str(tmp_path / "in.npz"), "-vv",
                                 "--profile"])
    assert r.exit_code == 0, r.output
    assert "inside bodies" in r.output


def test_graph_draws_bodies_as_clusters(tmp_path):
    from click.testing import CliRunner

    xml = save(build_if(), tmp_path)
    r = CliRunner().invoke(cli, ["graph", xml])
    assert r.exit_code == 0, r.output
    assert r.output.count('subgraph "cluster_') == 2
    assert "then_body" in r.output and "else_body" in r.output


# ---------------------------------------------------------------- the validator on bodies

def _corrupt(xml: str, out: str) -> tuple[str, dict]:
    """Break a Loop three ways; return the new path and the line of each problem."""
    text = Path(xml).read_text()
    # 1. A port map entry naming a body layer that is not a Parameter.
    text, n1 = re.subn(r'(<input external_port_id="3" internal_layer_id=")\d+(")', r"\g<1>7\2",
                       text, count=1)
    # 2. A back edge to a layer the body does not have.
    text, n2 = re.subn(r'(<back_edges>\s*<edge from-layer="\d+" to-layer=")\d+(")', r"\g<1>99\2",
                       text, count=1)
    # 3. A body Parameter declared i32 where the Loop feeds it f32.
    text, n3 = re.subn(r'(name="bx" type="Parameter" version="opset1">\s*<data shape="2,3" '
                       r'element_type=")f32(")', r"\g<1>i32\2", text, count=1)
    assert n1 == n2 == n3 == 1
    with open(out, "w") as f:
        f.write(text)
    lines = text.splitlines()
    where = {
        "port map": next(i for i, s in enumerate(lines, 1)
                         if 'external_port_id="3" internal_layer_id="7"' in s),
        "back edge": next(i for i, s in enumerate(lines, 1) if 'to-layer="99"' in s),
        "type": next(i for i, s in enumerate(lines, 1) if 'element_type="i32"' in s
                     and i > next(j for j, t in enumerate(lines, 1) if "<body>" in t)),
    }
    return out, where


def test_validate_finds_three_body_problems_in_one_pass(tmp_path):
    from click.testing import CliRunner

    xml = save(build_loop(trip=3), tmp_path)
    bad, where = _corrupt(xml, str(tmp_path / "bad.xml"))
    os.link(os.path.splitext(xml)[0] + ".bin", tmp_path / "bad.bin")
    r = CliRunner().invoke(cli, ["validate", bad])
    assert r.exit_code == 1
    errors = [line for line in r.output.splitlines() if ": error: " in line]
    assert any(f"bad.xml:{where['port map']}: error:" in e and "internal_layer_id=7" in e
               and "has no Parameter with id 7" in e for e in errors), r.output
    assert any(f"bad.xml:{where['back edge']}: error:" in e and "to-layer=99 is not a Parameter"
               in e for e in errors), r.output
    assert any(f"bad.xml:{where['type']}: error:" in e and "the body Parameter is i32" in e
               and "feeds it f32" in e for e in errors), r.output


def test_body_problems_are_at_their_lines(tmp_path):
    """A problem inside a body is reported like one in the top network, at its own line."""
    xml = save(build_if(), tmp_path)
    text = Path(xml).read_text()
    text = text.replace('type="ReLU"', 'type="ReLUX"', 1)
    bad = tmp_path / "bad.xml"
    bad.write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if 'type="ReLUX"' in s)
    diags = irrun.validate(bad)
    assert any(d.line == line and d.code == "unknown-op" for d in diags), diags


@pytest.mark.parametrize("blank", ['to-layer=""', 'to-layer="  "', 'from-layer=""'])
def test_a_back_edge_with_a_blank_id_is_an_error_at_its_line(tmp_path, blank):
    """Fuzzing found it (case 7007506): an empty id was taken as no edge, nothing said why,
    and read_model ended in "internal error: nothing is known about this layer's outputs"."""
    xml = save(build_loop(trip=3), tmp_path)
    text = Path(xml).read_text()
    attr = blank.split("=")[0]
    text, n = re.subn(rf'(<back_edges>\s*<edge [^>]*?){attr}="\d+"', rf"\g<1>{blank}", text,
                      count=1)
    assert n == 1
    bad = tmp_path / "bad.xml"
    bad.write_text(text)
    os.link(os.path.splitext(xml)[0] + ".bin", tmp_path / "bad.bin")
    line = next(i for i, s in enumerate(text.splitlines(), 1) if blank in s and "<edge" in s)
    diags = [d for d in irrun.validate(bad) if d.severity == "error"]
    assert any(d.line == line and d.code == "bad-back-edge" and blank.replace('"', "'") in d.message
               for d in diags), diags
    with pytest.raises(irrun.IrrunError) as info:
        irrun.read_model(bad)
    assert "back edge needs from-layer" in str(info.value)
    assert "internal error" not in str(info.value)


def test_back_edge_type_clash_is_at_the_back_edge(tmp_path):
    xml = save(build_loop(trip=3), tmp_path)
    text = Path(xml).read_text()
    # The accumulator Parameter and its back edge's Result: make the Parameter i32.
    text, n = re.subn(r'(name="bacc" type="Parameter" version="opset1">\s*<data shape="2,3" '
                      r'element_type=")f32(")', r"\g<1>i32\2", text, count=1)
    assert n == 1
    bad = tmp_path / "bad.xml"
    bad.write_text(text)
    os.link(os.path.splitext(xml)[0] + ".bin", tmp_path / "bad.bin")
    diags = [d for d in irrun.validate(bad) if d.severity == "error"]
    line = next(i for i, s in enumerate(text.splitlines(), 1) if 'name="bacc"' in s) + 1
    assert any(d.line == line and "the body Parameter is i32" in d.message for d in diags), diags


def test_trip_count_and_condition_types_are_checked(tmp_path):
    xml = save(build_loop(trip=3), tmp_path)
    text = Path(xml).read_text()
    # The execution condition Const becomes an f32... (its bytes: size 1 -> 4 is too small,
    # so make it a u8 instead: still not boolean).
    text = text.replace('element_type="boolean" shape="" offset="8" size="1"',
                        'element_type="u8" shape="" offset="8" size="1"', 1)
    bad = tmp_path / "bad.xml"
    bad.write_text(text)
    os.link(os.path.splitext(xml)[0] + ".bin", tmp_path / "bad.bin")
    diags = [d for d in irrun.validate(bad) if d.severity == "error"]
    assert any("execution condition (input 1) must be boolean, got u8" in d.message
               and d.op == "Loop-opset5" for d in diags), diags


def test_missing_output_in_port_map(tmp_path):
    xml = save(build_loop(trip=3), tmp_path)
    text = Path(xml).read_text()
    text, n = re.subn(r'\s*<output axis="0" external_port_id="\d+"[^>]*/>', "", text, count=1)
    assert n == 1
    bad = tmp_path / "bad.xml"
    bad.write_text(text)
    os.link(os.path.splitext(xml)[0] + ".bin", tmp_path / "bad.bin")
    diags = [d for d in irrun.validate(bad) if d.severity == "error"]
    assert any("is not in the body's port map" in d.message for d in diags), diags


def test_dump_writes_body_layers_per_iteration_when_named(tmp_path):
    import json

    from click.testing import CliRunner

    xml = save(build_loop(trip=3), tmp_path)
    np.savez(tmp_path / "in.npz", x=np.ones((2, 3), np.float32))
    m = irrun.read_model(xml)
    loop = next(n for n in m.program.nodes.values() if n.layer.type == "Loop").layer.name
    mul = next(n for n in m.program.nodes.values() if n.layer.type == "Loop").bodies[0]
    mul = next(n.layer.name for n in mul.nodes.values() if n.layer.type == "Multiply")
    # Without a pattern naming them, body layers are not written (bodies may run often).
    r = CliRunner().invoke(cli, ["run", xml, "-i", str(tmp_path / "in.npz"), "--dump",
                                 str(tmp_path / "all")])
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "all" / "index.json").read_text())
    assert not any("iteration" in e for e in index) and any(e["layer"] == loop for e in index)
    r = CliRunner().invoke(cli, ["run", xml, "-i", str(tmp_path / "in.npz"), "--dump",
                                 str(tmp_path / "body"), "--dump-layers", f"{loop}/body/{mul}"])
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "body" / "index.json").read_text())
    assert [(e["layer"], e["iteration"]) for e in index] == \
        [(f"{loop}/body/{mul}", k) for k in range(3)]
    # x * (i + 1) with x = 1: the Multiply of iteration k holds k + 1.
    for e in index:
        np.testing.assert_array_equal(np.load(tmp_path / "body" / e["file"]),
                                      np.full((2, 3), e["iteration"] + 1, np.float32))


def build_ti_axis(shape, axis, stride, out_stride, out_axis):
    """h' = 0.5 h + x_part over `axis` of x (parts keep the axis with length 1); the parts of
    every iteration concatenated on `out_axis`."""
    x = _f32(shape, "x")
    part = list(shape)
    part[axis] = 1
    h0 = _f32(part, "h0")
    xi, hi = _f32(part, "xi"), _f32(part, "hi")
    nh = o8.add(o8.multiply(hi, o8.constant(np.float32(0.5))), xi)
    rh, ro = o8.result(nh), o8.result(o8.sigmoid(nh))
    ti = o8.tensor_iterator()
    ti.set_body(ov.Model([rh, ro], [xi, hi]))
    start, end = (0, -1) if stride > 0 else (-1, 0)
    ti.set_sliced_input(xi, x.output(0), start, stride, 1, end, axis)
    ti.set_merged_input(hi, h0.output(0), rh.output(0))
    o_start, o_end = (0, -1) if out_stride > 0 else (-1, 0)
    return ov.Model([ti.get_iter_value(rh.output(0), -1),
                     ti.get_concatenated_slices(ro.output(0), o_start, out_stride, 1, o_end,
                                                out_axis)], [x, h0])


@pytest.mark.oracle
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(),
       stride=st.sampled_from([1, -1]), out_stride=st.sampled_from([1, -1]),
       seed=st.integers(0, 2**16))
@settings(max_examples=10)
def test_tensor_iterator_axes_and_strides_match_openvino(tmp_path_factory, shape, data, stride,
                                                         out_stride, seed):
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    part = list(shape)
    part[axis] = 1
    # The CPU plugin concatenates only along an axis where each part has length 1.
    out_axis = data.draw(st.sampled_from([i for i, d in enumerate(part) if d == 1]),
                         label="out_axis")
    rng = np.random.default_rng(seed)
    feed = {"x": rng.standard_normal(shape).astype(np.float32),
            "h0": rng.standard_normal(part).astype(np.float32)}
    m, _ = _compare(build_ti_axis(shape, axis, stride, out_stride, out_axis), feed,
                    tmp_path_factory.mktemp("ti"))
    scan = list(part)
    scan[out_axis] *= shape[axis]
    assert m.outputs[1].partial_shape == "[" + ",".join(map(str, scan)) + "]"


@pytest.mark.oracle
@pytest.mark.parametrize("start,stride,end", [(0, 2, -1), (-1, -2, 0)])
def test_tensor_iterator_parts_of_two_match_openvino(tmp_path, start, stride, end):
    x = _f32((2, 6, 3), "x")
    h0 = _f32((2, 2, 3), "h0")
    xi, hi = _f32((2, 2, 3), "xi"), _f32((2, 2, 3), "hi")
    nh = o8.add(o8.multiply(hi, o8.constant(np.float32(0.5))), xi)
    rh, ro = o8.result(nh), o8.result(o8.tanh(nh))
    ti = o8.tensor_iterator()
    ti.set_body(ov.Model([rh, ro], [xi, hi]))
    ti.set_sliced_input(xi, x.output(0), start, stride, 2, end, 1)
    ti.set_merged_input(hi, h0.output(0), rh.output(0))
    model = ov.Model([ti.get_iter_value(rh.output(0), -1),
                      ti.get_concatenated_slices(ro.output(0), start, stride, 2, end, 1)], [x, h0])
    rng = np.random.default_rng(11)
    m, _ = _compare(model, {"x": rng.standard_normal((2, 6, 3)).astype(np.float32),
                            "h0": rng.standard_normal((2, 2, 3)).astype(np.float32)}, tmp_path)
    assert m.outputs[1].partial_shape == "[2,6,3]"   # 3 iterations of parts of 2


def test_loop_without_a_condition_result_is_an_error(tmp_path):
    # OpenVINO refuses it too ("node index is out of range" when reading the file).
    xml = save(build_loop(trip=3), tmp_path)
    text = Path(xml).read_text().replace(' purpose="execution_condition"', "")
    bad = tmp_path / "bad.xml"
    bad.write_text(text)
    os.link(os.path.splitext(xml)[0] + ".bin", tmp_path / "bad.bin")
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "<port_map>" in s)
    errors = [d for d in irrun.validate(bad) if d.severity == "error"]
    assert [(d.line, d.code) for d in errors] == [(line, "bad-port-map")]
    assert 'purpose="execution_condition"' in errors[0].message


def _if_model(cond_const, else_rank2=True):
    x = _f32((2, 3), "x")
    c = o8.constant(cond_const) if cond_const is not None else o8.parameter([], bool, name="c")
    tp = _f32((2, 3), "tp")
    then = ov.Model([o8.result(o8.relu(tp))], [tp], "then")
    ep = _f32((2, 3), "ep")
    other = o8.concat([ep, ep], 0) if else_rank2 else o8.reshape(ep, [-1], False)
    other = ov.Model([o8.result(other)], [ep], "else")
    node = o8.if_op(c.output(0))
    node.set_then_body(then)
    node.set_else_body(other)
    node.set_input(x.output(0), tp, ep)
    out = node.set_output(then.get_results()[0], other.get_results()[0])
    return ov.Model([out], [x] + ([c] if cond_const is None else []))


@pytest.mark.parametrize("cond,shape", [(True, "[2,3]"), (False, "[4,3]"), (None, "[?,3]")])
def test_if_output_spec_follows_a_constant_condition(tmp_path, cond, shape):
    m = irrun.read_model(save(_if_model(cond), tmp_path))
    assert m.outputs[0].partial_shape == shape


def test_if_branches_of_different_ranks_give_a_dynamic_rank(tmp_path):
    m = irrun.read_model(save(_if_model(None, else_rank2=False), tmp_path))
    assert m.outputs[0].shape is None
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert m.infer({"x": x, "c": np.array(False)})[m.outputs[0].name].shape == (6,)
    assert m.infer({"x": x, "c": np.array(True)})[m.outputs[0].name].shape == (2, 3)


def test_a_run_time_error_in_a_body_names_the_body_layer_and_its_loop(tmp_path):
    x = _f32((3,), "x")
    bx = _f32((3,), "bx")
    it = o8.parameter([], np.int64, name="it")
    g = o8.gather(bx, it, o8.constant(np.int64(0)))     # index 3 at the fourth iteration
    r, rc = o8.result(o8.unsqueeze(g, o8.constant([0]))), o8.result(o8.constant(True))
    loop = o8.loop(o8.constant(np.int64(5)), o8.constant(True))
    loop.set_function(ov.Model([r, rc], [bx, it]))
    loop.set_special_body_ports([1, 1])
    loop.set_invariant_input(bx, x.output(0))
    xml = save(ov.Model([loop.get_concatenated_slices(r.output(0), 0, 1, 1, -1, 0)], [x]),
               tmp_path)
    text = Path(xml).read_text().splitlines()
    m = irrun.read_model(xml)
    with pytest.raises(irrun.OpError) as e:
        m.infer({"x": np.ones(3, np.float32)})
    d = e.value.diagnostic
    assert d.op == "Gather-opset8" and 'type="Gather"' in text[d.line - 1]
    assert "indices = 3 is out of range" in d.message
    assert re.search(r"\(in the body of layer 'Loop_\d+' \(Loop-opset5\)\)$", d.message)


# ---------------------------------------------------------------- the memory budget

def build_nested_ifs(n, depth=3):
    """x f32[n] -> If -> If -> ... (`depth` levels), each then_body holding relu(p) (a new
    buffer of x's size) while the If inside it runs; the else_bodies pass p on."""
    def level(d):
        p = _f32((n,), f"p{d}")
        held = o8.relu(p)
        if d == depth:
            inner = held
        else:
            c = o8.constant(True)
            node = o8.if_op(c)
            then = level(d + 1)
            ep = _f32((n,), f"e{d}")
            node.set_then_body(then)
            node.set_else_body(ov.Model([o8.result(ep)], [ep], f"else{d}"))
            node.set_input(held.output(0), then.get_parameters()[0], ep)
            inner = node.set_output(then.get_results()[0], node.get_else_body().get_results()[0])
        return ov.Model([o8.result(o8.add(inner, held))], [p], f"then{d}")

    x = _f32((n,), "x")
    c = o8.parameter([], bool, name="c")
    node = o8.if_op(c)
    then = level(1)
    ep = _f32((n,), "ep")
    node.set_then_body(then)
    node.set_else_body(ov.Model([o8.result(ep)], [ep], "else0"))
    node.set_input(x.output(0), then.get_parameters()[0], ep)
    out = node.set_output(then.get_results()[0], node.get_else_body().get_results()[0])
    return ov.Model([out], [x, c])


def test_one_memory_budget_covers_a_run_and_its_bodies(tmp_path, monkeypatch):
    """Each level of three nested Ifs holds its relu (1 MiB, as x) while the level inside
    it runs: at the innermost Add, x, the three relus and the sum (5 MiB) are alive at once.
    Under a 3.5 MiB budget that is refused, though no body alone holds more than 3 MiB;
    under 6 MiB the run gives its value."""
    n = 1 << 18
    xml = save(build_nested_ifs(n), tmp_path)
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    m = irrun.read_model(xml)
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(7 << 19))
    with pytest.raises(irrun.ResourceError, match="live tensors would need"):
        m.infer({"x": x, "c": np.array(True)})
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(6 << 20))
    got = m.infer({"x": x, "c": np.array(True)})[m.outputs[0].name]
    np.testing.assert_allclose(got, _nested_expected(x, 3), rtol=1e-6)
    np.testing.assert_array_equal(m.infer({"x": x, "c": np.array(False)})[m.outputs[0].name], x)


def _nested_expected(x, depth):
    """level d: h = relu(p); out = (level d+1 of h, or h at the last level) + h."""
    def level(p, d):
        h = np.maximum(p, 0)
        return (h if d == depth else level(h, d + 1)) + h
    return level(x, 1)


# ---------------------------------------------------------------- body Parameters of element_type="dynamic"

def build_untyped_bodies(seq, etype, body_type):
    """A TensorIterator (h_t = 2 h_{t-1} + x_t, every h concatenated) and a Loop (acc = acc +
    x, three times) whose body Parameters have `body_type`: ov.Type.dynamic, as OpenVINO's
    converters write them (and every body port then says precision="UNSPECIFIED"), or the
    input's type. Constants follow the data through ConvertLike, so one body serves every
    input type."""
    y = o8.parameter([seq, 2, 3], etype, name="y")
    h0 = o8.parameter([2, 3], etype, name="h0")
    xi = o8.parameter([1, 2, 3], body_type, name="xi")
    hi = o8.parameter([2, 3], body_type, name="hi")
    two = o8.convert_like(o8.constant(np.float32(2)), hi)
    nh = o8.add(o8.multiply(hi, two), o8.squeeze(xi, o8.constant([0])))
    rh, ro = o8.result(nh), o8.result(o8.unsqueeze(nh, o8.constant([0])))
    ti = o8.tensor_iterator()
    ti.set_body(ov.Model([rh, ro], [xi, hi], "ti_body"))
    ti.set_sliced_input(xi, y.output(0), 0, 1, 1, -1, 0)
    ti.set_merged_input(hi, h0.output(0), rh.output(0))
    outs = [ti.get_iter_value(rh.output(0), -1),
            ti.get_concatenated_slices(ro.output(0), 0, 1, 1, -1, 0)]
    bx = o8.parameter([2, 3], body_type, name="bx")
    bacc = o8.parameter([2, 3], body_type, name="bacc")
    it = o8.parameter([], np.int64, name="it")
    r_cond, r_acc = o8.result(o8.constant(True)), o8.result(o8.add(bacc, bx))
    loop = o8.loop(o8.constant(np.int64(3)), o8.constant(True))
    loop.set_function(ov.Model([r_cond, r_acc], [bx, bacc, it], "loop_body"))
    loop.set_special_body_ports([2, 0])
    loop.set_invariant_input(bx, h0.output(0))
    loop.set_merged_input(bacc, h0.output(0), r_acc.output(0))
    outs.append(loop.get_iter_value(r_acc.output(0), -1))
    return ov.Model(outs, [y, h0])


def test_untyped_body_parameters_are_written_as_dynamic_and_read(tmp_path):
    xml = save(build_untyped_bodies(4, np.float32, ov.Type.dynamic), tmp_path, "untyped")
    text = Path(xml).read_text()
    # OpenVINO's Loop types its body Parameters from its inputs when it validates; its
    # TensorIterator leaves them as built, and the file says so.
    assert text.count('element_type="dynamic"') == 2 and 'precision="UNSPECIFIED"' in text
    assert irrun.validate(xml) == []


def test_a_models_own_dynamic_parameter_is_refused_at_its_line(tmp_path):
    xml = save(build_untyped_bodies(2, np.float32, ov.Type.f32), tmp_path, "typed")
    text = Path(xml).read_text().replace('shape="2,3" element_type="f32"',
                                         'shape="2,3" element_type="dynamic"', 1)
    Path(xml).write_text(text)
    problems = [p for p in irrun.validate(xml) if p.severity == "error"]
    line = next(i for i, s in enumerate(text.splitlines(), 1) if 'name="h0" type="Parameter"' in s)
    assert [(p.line, p.layer_name) for p in problems] == [(line, "h0")], problems
    assert "a model's own Parameter needs an element type" in problems[0].message


@pytest.mark.oracle
@given(seq=st.integers(1, 5), etype=st.sampled_from([np.float32, np.float16, np.int32, np.int64]),
       seed=st.integers(0, 2**16))
@settings(max_examples=12, deadline=None)
def test_untyped_body_parameters_take_the_fed_type_as_openvino(tmp_path_factory, seq, etype, seed):
    # OpenVINO reads the untyped file, but its CPU plugin cannot compile a body Convert
    # "from dynamic precision": the same bodies with typed Parameters are the oracle.
    d = tmp_path_factory.mktemp("untyped")
    rng = np.random.default_rng(seed)
    feed = {"y": rng.integers(-8, 8, (seq, 2, 3)).astype(etype),
            "h0": rng.integers(-8, 8, (2, 3)).astype(etype)}
    expected = ov_run(save(build_untyped_bodies(seq, etype, ov.Type(np.dtype(etype))), d, "typed"),
                      feed)
    m = irrun.read_model(save(build_untyped_bodies(seq, etype, ov.Type.dynamic), d, "untyped"))
    got = m.infer(feed)
    assert len(got) == len(expected) == 3
    for g, e in zip(got.values(), expected):
        assert_same(g, e)


def test_nested_loops_infer_in_linear_time(tmp_path):
    """Each Loop's rule asks for its body's inference twice (its own rule, then the pass
    that settles the back edges): with the same specs, the second is the first's results,
    so 12 nested Loops take about 12 inferences of a body, not 2**12. Counted, not timed."""
    from irrun.run import bodies

    def nested(depth):
        def level(d):
            bx = o8.parameter([3], np.float32, name=f"bx{d}")
            out = o8.add(bx, o8.constant(np.float32(1))) if d == 0 else level(d - 1)(bx)
            r, rc = o8.result(out), o8.result(o8.constant(True))

            def apply(x):
                loop = o8.loop(o8.constant(np.int64(2)), o8.constant(True))
                loop.set_function(ov.Model([r, rc], [bx]))
                loop.set_special_body_ports([-1, 1])
                loop.set_merged_input(bx, x.output(0), r.output(0))
                return loop.get_iter_value(r.output(0), -1)
            return apply
        x = o8.parameter([3], np.float32, name="x")
        return ov.Model([o8.result(level(depth)(x))], [x])

    calls = {"n": 0}
    real = bodies.Body.infer

    def counting(self, specs):
        calls["n"] += 1 if self._last_key is None or bodies._specs_key(specs) != \
            self._last_key else 0
        return real(self, specs)

    import unittest.mock
    counts = {}
    with unittest.mock.patch.object(bodies.Body, "infer", counting):
        for depth in (4, 8):
            calls["n"] = 0
            xml = save(nested(depth), tmp_path / str(depth))
            assert irrun.validate(xml) == []
            counts[depth] = calls["n"]
    assert counts[8] <= 4 * counts[4]          # linear (2**8 / 2**4 = 16 times if not)
    m = irrun.read_model(save(nested(6), tmp_path / "run"))
    np.testing.assert_array_equal(m.infer({"x": np.zeros(3, np.float32)})[0],
                                  np.full(3, 2.0 ** 7, np.float32))   # 7 Loops of 2: +1 128 times


def build_loop_in_if(n):
    """x f32[n] -> If whose then_body holds h = relu(p) while a Loop of 2 iterations runs,
    each iteration holding relu(acc) beside acc and their sum (acc starts at h)."""
    p = _f32((n,), "p")
    h = o8.relu(p)
    bacc = _f32((n,), "bacc")
    r_cond = o8.result(o8.constant(True))
    r_acc = o8.result(o8.add(o8.relu(bacc), bacc))
    body = ov.Model([r_cond, r_acc], [bacc], "body")
    loop = o8.loop(o8.constant(np.int64(2)), o8.constant(True))
    loop.set_function(body)
    loop.set_special_body_ports([-1, 0])
    loop.set_merged_input(bacc, h.output(0), r_acc.output(0))
    then = ov.Model([o8.result(loop.get_iter_value(r_acc.output(0), -1))], [p], "then")
    x = _f32((n,), "x")
    c = o8.parameter([], bool, name="c")
    node = o8.if_op(c)
    ep = _f32((n,), "ep")
    node.set_then_body(then)
    node.set_else_body(ov.Model([o8.result(ep)], [ep], "else"))
    node.set_input(x.output(0), p, ep)
    out = node.set_output(then.get_results()[0], node.get_else_body().get_results()[0])
    return ov.Model([out], [x, c])


def test_a_loop_body_counts_against_the_budget_of_the_run_around_it(tmp_path, monkeypatch):
    """Inside the If, h (1 MiB, as x) stays alive while the Loop runs; an iteration holds
    acc, relu(acc) and their sum: with x, 4 MiB or more at once, though the Loop's body alone
    holds 3. Refused under 3.5 MiB; under 8 MiB the value is 4 relu(x)."""
    n = 1 << 18
    xml = save(build_loop_in_if(n), tmp_path)
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    m = irrun.read_model(xml)
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(7 << 19))
    with pytest.raises(irrun.ResourceError, match="live tensors would need"):
        m.infer({"x": x, "c": np.array(True)})
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(8 << 20))
    got = m.infer({"x": x, "c": np.array(True)})[m.outputs[0].name]
    np.testing.assert_allclose(got, 4 * np.maximum(x, 0), rtol=1e-6)


# ---------------------------------------------------------------- iterations a file asks for

def _line_of(xml, needle, nth=0):
    return [i for i, s in enumerate(Path(xml).read_text().splitlines(), 1) if needle in s][nth]


def build_empty_ti(end=None, scans=1):
    """A TensorIterator whose body passes on x (f32[0]) through a back edge, concatenating it
    on axis 0 in `scans` outputs. With `end`, no input is sliced: the count is the output
    port map's |end - start| / part_size (OpenVINO's rule). Without, s (f32[?,0]) is sliced
    on axis 0: as many iterations as s has rows, none holding a byte."""
    x = _f32((0,), "x")
    bx = _f32((0,), "bx")
    r = o8.result(o8.relu(bx))
    params, results, inputs = [bx], [r], [x]
    if end is None:
        s = o8.parameter([-1, 0], np.float32, name="s")
        bs = _f32((1, 0), "bs")
        params.append(bs)
        results.append(o8.result(bs))
        inputs.append(s)
    ti = o8.tensor_iterator()
    ti.set_body(ov.Model(results, params))
    ti.set_merged_input(bx, x.output(0), r.output(0))
    if end is None:
        ti.set_sliced_input(bs, s.output(0), 0, 1, 1, -1, 0)
    outs = [ti.get_concatenated_slices(r.output(0), 0, 1, 1, -1 if end is None else end, 0)
            for _ in range(scans)]
    return ov.Model(outs, inputs)


def build_empty_loop(scans=1, stop_after=None, sliced=False):
    """A Loop of trip count t (an input) whose body passes on x (f32[0]) through a back edge,
    concatenating it on axis 0 in `scans` outputs; its condition is true, or with
    `stop_after`, true while the iteration number is below it. With `sliced`, s (f32[?,0])
    is sliced on axis 0 as well (the Loop stops at its end too)."""
    x = _f32((0,), "x")
    t = o8.parameter([], np.int64, name="t")
    bx = _f32((0,), "bx")
    it = o8.parameter([], np.int64, name="it")
    r = o8.result(o8.relu(bx))
    cond = o8.constant(True) if stop_after is None else \
        o8.less(it, o8.constant(np.int64(stop_after - 1)))
    rc = o8.result(cond)
    params, results, inputs = [bx, it], [r, rc], [x, t]
    if sliced:
        s = o8.parameter([-1, 0], np.float32, name="s")
        bs = _f32((1, 0), "bs")
        params.append(bs)
        inputs.append(s)
    loop = o8.loop(t, o8.constant(True))
    loop.set_function(ov.Model(results, params))
    loop.set_special_body_ports([1, 1])
    loop.set_merged_input(bx, x.output(0), r.output(0))
    if sliced:
        loop.set_sliced_input(bs, s.output(0), 0, 1, 1, -1, 0)
    outs = [loop.get_concatenated_slices(r.output(0), 0, 1, 1, -1, 0) for _ in range(scans)]
    return ov.Model(outs, inputs)


EMPTY = np.zeros(0, np.float32)


def test_a_tensor_iterator_asking_for_2_62_iterations_is_refused_at_its_line(tmp_path):
    """end=2**62 in an output's port map, and parts of no bytes: 2**62 iterations that hold
    nothing (OpenVINO's CPU plugin refuses the file too, at compile time)."""
    xml = save(build_empty_ti(end=2 ** 62), tmp_path)
    errors = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert [(d.line, d.op, d.code) for d in errors] == [
        (_line_of(xml, 'type="TensorIterator"'), "TensorIterator-opset1", "resource")]
    assert errors[0].message.startswith(
        f"the port map of output 0 (start=0, end={2 ** 62}, part_size=1) gives {2 ** 62} "
        "iterations, more than the ")
    assert "body runs a run makes at most: each counts as 4096 bytes against the memory " \
        "limit of" in errors[0].message
    with pytest.raises(irrun.ModelError):
        irrun.read_model(xml)


def test_a_loop_over_parts_of_no_bytes_stops_at_the_runs_limit(tmp_path, monkeypatch):
    """A trip count from the input and a body condition that stays true: each iteration
    holds nothing, but counts. IRRUN_MAX_BYTES=1M allows 1M / 4096 = 256 body runs."""
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1M")
    xml = save(build_empty_loop(), tmp_path)
    m = irrun.read_model(xml)
    assert m.infer({"x": EMPTY, "t": np.int64(256)})[0].shape == (0,)
    with pytest.raises(irrun.ResourceError) as e:
        m.infer({"x": EMPTY, "t": np.int64(100_000)})
    d = e.value.diagnostic
    assert (d.file, d.line, d.op) == (xml, _line_of(xml, 'type="Loop"'), "Loop-opset5")
    assert d.message.startswith("this would be body run 257 of the run (Loop and "
                                "TensorIterator iterations and If branches, nested ones "
                                "included), more than the 256 a run makes at most: each "
                                "counts as 4096 bytes against the memory limit of 1048576")


def test_nested_loops_share_the_runs_limit_of_their_run(tmp_path, monkeypatch):
    """20 iterations of a Loop each running a Loop of 20: 420 body runs, though neither
    Loop asks for more than 20."""
    def inner(x):
        bx = _f32((3,), "bx")
        r, rc = o8.result(o8.add(bx, o8.constant(np.float32(1)))), o8.result(o8.constant(True))
        loop = o8.loop(o8.constant(np.int64(20)), o8.constant(True))
        loop.set_function(ov.Model([r, rc], [bx]))
        loop.set_special_body_ports([-1, 1])
        loop.set_merged_input(bx, x.output(0), r.output(0))
        return loop.get_iter_value(r.output(0), -1)

    x = _f32((3,), "x")
    by = _f32((3,), "by")
    r, rc = o8.result(inner(by)), o8.result(o8.constant(True))
    outer = o8.loop(o8.constant(np.int64(20)), o8.constant(True))
    outer.set_function(ov.Model([r, rc], [by]))
    outer.set_special_body_ports([-1, 1])
    outer.set_merged_input(by, x.output(0), r.output(0))
    xml = save(ov.Model([o8.result(outer.get_iter_value(r.output(0), -1))], [x]), tmp_path)
    m = irrun.read_model(xml)
    monkeypatch.setenv("IRRUN_MAX_BYTES", "2M")          # 512 body runs
    np.testing.assert_array_equal(m.infer({"x": np.zeros(3, np.float32)})[0], [400] * 3)
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1M")          # 256
    with pytest.raises(irrun.ResourceError) as e:
        m.infer({"x": np.zeros(3, np.float32)})
    d = e.value.diagnostic
    assert (d.line, d.op) == (_line_of(xml, 'type="Loop"', 1), "Loop-opset5")    # the inner
    assert "body run 257 of the run" in d.message
    assert d.message.endswith(f"(in the body of layer '{outer.get_friendly_name()}' "
                              "(Loop-opset5))")


def test_a_tensor_iterator_over_a_long_empty_input_is_refused_before_its_first_iteration(
        tmp_path, monkeypatch):
    from irrun.run import bodies

    monkeypatch.setenv("IRRUN_MAX_BYTES", "1M")
    xml = save(build_empty_ti(), tmp_path)
    m = irrun.read_model(xml)
    assert m.infer({"x": EMPTY, "s": np.zeros((256, 0), np.float32)})[0].shape == (0,)
    runs = []
    real = bodies.Body.run
    monkeypatch.setattr(bodies.Body, "run", lambda self, arrays: runs.append(1) or
                        real(self, arrays))
    with pytest.raises(irrun.ResourceError) as e:
        m.infer({"x": EMPTY, "s": np.zeros((1000, 0), np.float32)})
    assert runs == []
    d = e.value.diagnostic
    assert (d.line, d.op) == (_line_of(xml, 'type="TensorIterator"'), "TensorIterator-opset1")
    assert d.message.startswith("the sliced inputs give 1000 iterations, more than the 256 "
                                "body runs a run makes at most")


def test_a_loop_slices_its_input_as_the_iterations_need_the_parts(tmp_path):
    """A Loop over the rows of s f32[1000000, 0] whose body stops it after 2 iterations:
    2 parts are made, not a million (a list of a million views is some 130 MB). Counted
    in bytes by tracemalloc, not timed."""
    import tracemalloc

    xml = save(build_empty_loop(stop_after=2, sliced=True), tmp_path)
    m = irrun.read_model(xml)
    feed = {"x": EMPTY, "t": np.int64(-1), "s": np.zeros((1_000_000, 0), np.float32)}
    assert m.infer(feed)[0].shape == (0,)
    tracemalloc.start()
    try:
        m.infer(feed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("kind", ["Loop", "TensorIterator"])
def test_concatenated_parts_of_no_bytes_count_against_the_budget(tmp_path, monkeypatch, kind):
    """40 outputs concatenating [0]-shaped parts: each part held until the end counts as
    128 bytes (its array), so 200 iterations hold 40 * 200 * 128 = 1 MB: past a 1 MB budget
    (which allows 256 body runs, more than the 200); 100 iterations fit."""
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1000000")
    if kind == "Loop":
        xml = save(build_empty_loop(scans=40), tmp_path)
        feed = lambda n: {"x": EMPTY, "t": np.int64(n)}           # noqa: E731
    else:
        xml = save(build_empty_ti(scans=40), tmp_path)
        feed = lambda n: {"x": EMPTY, "s": np.zeros((n, 0), np.float32)}   # noqa: E731
    m = irrun.read_model(xml)
    assert [v.shape for v in m.infer(feed(100)).values()] == [(0,)] * 40
    with pytest.raises(irrun.ResourceError) as e:
        m.infer(feed(200))
    d = e.value.diagnostic
    assert (d.line, d.op) == (_line_of(xml, f'type="{kind}"'), f"{kind}-opset"
                              + ("5" if kind == "Loop" else "1"))
    assert re.search(r"output \d+: the 7813 parts of the concatenated outputs so far hold "
                     r"1000064 bytes \(each part's bytes and 128 for its array\), more than "
                     r"the limit of 1000000 bytes", d.message), d.message
