"""ReadValue-3/6 and Assign-3/6: sessions that keep variables across runs, against
OpenVINO's infer request; the 20-step stateful model; the CLI's --steps; the validator."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun
from irrun.ui.cli import cli
from irrun.opkit import TensorSpec, element_type, parse_partial_shape
from irrun.ops.control import Assign, ReadValue, ReadValueAttrsV6

MODEL = Path(__file__).resolve().parent.parent / "models" / "stateful_accumulator"


def _steps_expected():
    with np.load(MODEL / "expected_steps.npz") as z:
        return {k: z[k] for k in z.files}


def _sequence():
    with np.load(MODEL / "sequence.npz") as z:
        return z["x"]


# ---------------------------------------------------------------- the 20-step model

def test_session_gives_openvinos_20_steps():
    m = irrun.read_model(MODEL / "model.xml")
    assert sorted(v.name for v in m.variables) == ["h_inh_out", "total"]
    session = m.create_session()
    expected = _steps_expected()
    seq = _sequence()
    assert seq.shape[0] == 20
    for k in range(20):
        got = session.infer({"x": seq[k]})
        for name, e in expected.items():
            np.testing.assert_allclose(got[name], e[k], rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {k}: {name}")
    assert set(session.state) == {"h_inh_out", "total"}
    np.testing.assert_allclose(session.state["total"], seq.sum(axis=0), rtol=1e-5)


def test_reset_and_plain_infer_start_from_the_initial_state():
    m = irrun.read_model(MODEL / "model.xml")
    expected = _steps_expected()
    seq = _sequence()
    session = m.create_session()
    for k in range(3):
        session.infer({"x": seq[k]})
    # Model.infer never sees a session's variables: each call is a first step.
    for _ in range(2):
        np.testing.assert_allclose(m.infer({"x": seq[0]})["y"], expected["y"][0], rtol=1e-5)
    session.reset_state()
    assert session.state == {}
    np.testing.assert_allclose(session.infer({"x": seq[0]})["y"], expected["y"][0], rtol=1e-5)
    np.testing.assert_allclose(session.infer({"x": seq[1]})["y"], expected["y"][1], rtol=1e-5)


def test_a_failed_run_keeps_the_state():
    m = irrun.read_model(MODEL / "model.xml")
    session = m.create_session()
    seq = _sequence()
    session.infer({"x": seq[0]})
    before = session.state
    with pytest.raises(irrun.FeedError):
        session.infer({"x": np.zeros((2, 4), np.float32)})
    assert session.state.keys() == before.keys()
    for k in before:
        np.testing.assert_array_equal(session.state[k], before[k])
    np.testing.assert_allclose(session.infer({"x": seq[1]})["y"], _steps_expected()["y"][1],
                               rtol=1e-5)


def test_cli_steps_writes_every_step(tmp_path):
    out = tmp_path / "steps.npz"
    r = CliRunner().invoke(cli, [str(MODEL / "model.xml"), "--inputs",
                                 str(MODEL / "sequence.npz"), "--steps", "20", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "2 outputs of 20 steps" in r.output
    with np.load(out) as z:
        for name, e in _steps_expected().items():
            assert z[name].shape == e.shape
            np.testing.assert_allclose(z[name], e, rtol=1e-5, atol=1e-6)
    r = CliRunner().invoke(cli, [str(MODEL / "model.xml"), "--inputs",
                                 str(MODEL / "sequence.npz"), "--steps", "3"])
    assert r.exit_code == 0, r.output
    assert [line for line in r.output.splitlines() if line.startswith("step ")] == \
        ["step 0:", "step 1:", "step 2:"]


def test_cli_steps_refuses_a_short_sequence(tmp_path):
    r = CliRunner().invoke(cli, [str(MODEL / "model.xml"), "--inputs",
                                 str(MODEL / "sequence.npz"), "--steps", "21"])
    assert r.exit_code == 1
    assert "sequence of 20 steps" in r.output and "fewer than the 21 steps" in r.output


# ---------------------------------------------------------------- models built here

ov = pytest.importorskip("openvino")
o8 = pytest.importorskip("openvino.opset8")
o6 = pytest.importorskip("openvino.opset6")
o3 = pytest.importorskip("openvino.opset3")


def _variable(vid, shape, etype):
    from openvino.op.util import Variable, VariableInfo

    info = VariableInfo()
    info.data_shape = ov.PartialShape(list(shape))
    info.data_type = etype
    info.variable_id = vid
    return Variable(info)


def build_counter(shape, version, with_init, scale):
    """state' = state * scale + x; output state'. ReadValue-3 takes the init value x*2;
    ReadValue-6 takes it or starts from zeros."""
    x = o8.parameter(list(shape), np.float32, name="x")
    var = _variable("acc", shape, ov.Type.f32)
    if version == 3:
        rv = o3.read_value(o8.multiply(x, o8.constant(np.float32(2))), "acc")
    elif with_init:
        rv = o6.read_value(o8.multiply(x, o8.constant(np.float32(2))), var)
    else:
        rv = o6.read_value(var)
    new = o8.add(o8.multiply(rv, o8.constant(np.float32(scale))), x)
    assign = o3.assign(new, "acc") if version == 3 else o6.assign(new, var)
    return ov.Model([o8.result(new)], [assign], [x])


@pytest.mark.oracle
@given(version=st.sampled_from([3, 6]), with_init=st.booleans(), steps=st.integers(1, 5),
       rank=st.integers(0, 3), scale=st.sampled_from([0.5, 1.0, -1.0]), seed=st.integers(0, 999))
@settings(max_examples=8)
def test_session_matches_openvino_infer_request(tmp_path_factory, version, with_init, steps,
                                                rank, scale, seed):
    shape = [2, 3, 1][:rank]
    model = build_counter(shape, version, with_init, scale)
    xml = str(tmp_path_factory.mktemp("state") / "model.xml")
    ov.save_model(model, xml)
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(steps)]
    compiled = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    session = irrun.read_model(xml).create_session()
    for k in range(steps):
        expected = np.array(request.infer({0: xs[k]})[compiled.outputs[0]])
        got = next(iter(session.infer({"x": xs[k]}).values()))
        np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=f"step {k}")
    request.reset_state()
    session.reset_state()
    expected = np.array(request.infer({0: xs[0]})[compiled.outputs[0]])
    np.testing.assert_allclose(next(iter(session.infer({"x": xs[0]}).values())), expected, rtol=1e-6)


def test_loop_back_feeds_an_output_to_the_next_step(tmp_path):
    x = o8.parameter([2], np.float32, name="x")
    y = o8.add(x, o8.constant(np.array([1, 10], np.float32)))
    y.output(0).get_tensor().set_names({"y"})
    xml = str(tmp_path / "m.xml")
    ov.save_model(ov.Model([y], [x]), xml)
    np.savez(tmp_path / "in.npz", x=np.zeros(2, np.float32))
    out = tmp_path / "out.npz"
    r = CliRunner().invoke(cli, [xml, "-i", str(tmp_path / "in.npz"), "--steps", "4",
                                 "--loop-back", "y=x", "-o", str(out)])
    assert r.exit_code == 0, r.output
    with np.load(out) as z:
        np.testing.assert_array_equal(z["y"], [[1, 10], [2, 20], [3, 30], [4, 40]])
    r = CliRunner().invoke(cli, [xml, "-i", str(tmp_path / "in.npz"), "--loop-back", "y=x"])
    assert r.exit_code == 2 and "--loop-back needs --steps" in r.output


# ---------------------------------------------------------------- shape rules and the validator

def test_read_value_6_spec_example_shape():
    # The spec's example: variable_shape 1,3,224,224 with an init value of that shape.
    attrs = ReadValueAttrsV6("lstm_state_1", "f32", "1,3,224,224")
    init = TensorSpec(element_type("f32"), parse_partial_shape("1,3,224,224"))
    (out,) = ReadValue.infer(attrs, init)
    assert str(out) == "f32[1,3,224,224]"
    (out,) = Assign.infer(type("A", (), {"variable_id": "lstm_state_1"})(), init)
    assert str(out) == "f32[1,3,224,224]"


def test_read_value_6_refuses_an_init_value_the_variable_does_not_cover():
    with pytest.raises(irrun.ShapeError, match="init value is i32 but variable_type is f32"):
        ReadValue.infer(ReadValueAttrsV6("v", "f32", "2"),
                        TensorSpec(element_type("i32"), parse_partial_shape("2")))
    with pytest.raises(irrun.ShapeError, match=r"shape \[3\] does not fit variable_shape \[2\]"):
        ReadValue.infer(ReadValueAttrsV6("v", "f32", "2"),
                        TensorSpec(element_type("f32"), parse_partial_shape("3")))
    # A dynamic variable covers anything.
    (out,) = ReadValue.infer(ReadValueAttrsV6("v", "dynamic", "?"),
                             TensorSpec(element_type("i32"), parse_partial_shape("3")))
    assert str(out) == "i32[?]"


def test_validator_checks_variable_pairs(tmp_path):
    ov.save_model(build_counter([2], 6, True, 1.0), str(tmp_path / "m.xml"))
    text = (tmp_path / "m.xml").read_text()
    # The Assign writes a variable no ReadValue reads.
    bad = text.replace('<data variable_id="acc" />', '<data variable_id="other" />', 1)
    assert bad != text
    (tmp_path / "bad.xml").write_text(bad)
    (tmp_path / "bad.bin").write_bytes((tmp_path / "m.bin").read_bytes())
    line = next(i for i, s in enumerate(bad.splitlines(), 1) if 'type="Assign"' in s)
    errors = [d for d in irrun.validate(tmp_path / "bad.xml") if d.severity == "error"]
    assert [(d.line, d.message) for d in errors] == [
        (line, "no ReadValue reads variable 'other' that this Assign writes")]


@pytest.mark.oracle
def test_growing_kv_cache_matches_openvino(tmp_path):
    """An LLM-style cache: a variable of shape [1,?,4] that each step extends by a row
    (Concat then Assign), starting from an empty init subgraph (Broadcast to [1,0,4])."""
    x = o8.parameter([1, 1, 4], np.float32, name="x")
    var = _variable("kv", [1, -1, 4], ov.Type.f32)
    init = o8.broadcast(o8.constant(np.float32(0)), o8.constant(np.array([1, 0, 4], np.int64)))
    rv = o6.read_value(init, var)
    cache = o8.concat([rv, x], 1)
    assign = o6.assign(cache, var)
    scores = o8.softmax(o8.reduce_sum(o8.multiply(cache, x), [2], False), 1)
    model = ov.Model([o8.result(scores), o8.result(o8.shape_of(cache))], [assign], [x])
    xml = str(tmp_path / "kv.xml")
    ov.save_model(model, xml)
    m = irrun.read_model(xml)
    assert m.variables[0].partial_shape == "[1,?,4]"
    request = ov.Core().compile_model(xml, "CPU").create_infer_request()
    session = m.create_session()
    rng = np.random.default_rng(0)
    for k in range(6):
        xv = rng.standard_normal((1, 1, 4)).astype(np.float32)
        expected = list(request.infer({0: xv}).values())
        got = list(session.infer({"x": xv}).values())
        assert got[0].shape == expected[0].shape == (1, k + 1)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
        np.testing.assert_array_equal(got[1], expected[1])
    assert session.state["kv"].shape == (1, 6, 4)


def _body_state_models():
    """(model, feed) pairs whose variable lives inside a body: an If's then_body, and a
    Loop's body, where each iteration reads what the one before wrote."""
    x = o8.parameter([2], np.float32, name="x")
    c = o8.parameter([], bool, name="c")
    var = _variable("v", [2], ov.Type.f32)
    tp = o8.parameter([2], np.float32, name="tp")
    s = o8.add(o6.read_value(tp, var), tp)
    then = ov.Model([o8.result(s)], [o6.assign(s, var)], [tp], "then")
    ep = o8.parameter([2], np.float32, name="ep")
    node = o8.if_op(c.output(0))
    node.set_then_body(then)
    node.set_else_body(ov.Model([o8.result(ep)], [ep], "else"))
    node.set_input(x.output(0), tp, ep)
    out = node.set_output(then.get_results()[0], node.get_else_body().get_results()[0])
    yield ov.Model([out], [x, c]), {"x": np.ones(2, np.float32), "c": np.array(True)}

    x = o8.parameter([2], np.float32, name="x")
    var = _variable("w", [2], ov.Type.f32)
    bx = o8.parameter([2], np.float32, name="bx")
    s = o8.add(o6.read_value(bx, var), bx)
    r = o8.result(s)
    loop = o8.loop(o8.constant(np.int64(3)), o8.constant(True))
    loop.set_function(ov.Model([r, o8.result(o8.constant(True))], [o6.assign(s, var)], [bx]))
    loop.set_special_body_ports([-1, 1])
    loop.set_invariant_input(bx, x.output(0))
    yield ov.Model([loop.get_iter_value(r.output(0), -1)], [x]), {"x": np.ones(2, np.float32)}


@pytest.mark.oracle
def test_variables_inside_bodies_match_openvino(tmp_path):
    for k, (model, feed) in enumerate(_body_state_models()):
        xml = str(tmp_path / f"m{k}.xml")
        ov.save_model(model, xml)
        m = irrun.read_model(xml)
        assert len(m.variables) == 1
        request = ov.Core().compile_model(xml, "CPU").create_infer_request()
        session = m.create_session()
        for step in range(3):
            expected = list(request.infer(list(feed.values())).values())[0]
            got = list(session.infer(feed).values())[0]
            np.testing.assert_array_equal(got, expected, err_msg=f"model {k}, step {step}")


def test_a_string_variable_without_init_starts_as_empty_strings(tmp_path):
    ov = pytest.importorskip("openvino")
    import openvino.opset6 as o6
    from openvino.op.util import Variable, VariableInfo

    info = VariableInfo()
    info.data_shape, info.data_type, info.variable_id = ov.PartialShape([2]), ov.Type.string, "s"
    var = Variable(info)
    rv = o6.read_value(var)
    m = ov.Model([ov.opset1.result(rv)], [o6.assign(rv, var)], [], "strings")
    xml = tmp_path / "s.xml"
    ov.save_model(m, xml)
    got = irrun.read_model(xml).infer({})[0]
    assert got.dtype == object and got.tolist() == ["", ""]


# ---------------------------------------------------------------- writes the declaration refuses

def build_narrow_write(tmp_path):
    """An Assign of x (f32[?]) to a variable that ReadValue declares f32[2]; the output adds
    the variable to [1, 10]. Loading accepts it ([?] may be [2]); a write of [1] does not
    fit, and reading it back would broadcast [1] to [2]."""
    x = o8.parameter([-1], np.float32, name="x")
    var = _variable("v", [2], ov.Type.f32)
    y = o8.add(o6.read_value(var), o8.constant(np.array([1, 10], np.float32)))
    xml = tmp_path / "narrow.xml"
    ov.save_model(ov.Model([o8.result(y)], [o6.assign(x, var)], [x]), str(xml))
    lines = xml.read_text().splitlines()
    assign = next(i for i, s in enumerate(lines, 1) if 'type="Assign"' in s)
    read = next(i for i, s in enumerate(lines, 1) if 'type="ReadValue"' in s)
    return xml, assign, (read, lines[read - 1].split('name="')[1].split('"')[0])


def test_an_assign_of_a_shape_the_variable_does_not_declare_is_refused_at_the_assign(tmp_path):
    xml, assign, read = build_narrow_write(tmp_path)
    session = irrun.read_model(xml).create_session()
    with pytest.raises(irrun.OpError) as e:
        session.infer({"x": np.array([5.0], np.float32)})
    d = e.value.diagnostic
    assert (d.file, d.line, d.op) == (str(xml), assign, "Assign-opset6")
    line, name = read
    assert d.message == (f"writes shape [1] to variable 'v', which ReadValue '{name}' "
                         f"(line {line}) declares [2]")
    assert session.state == {}          # the failed run wrote nothing
    # A write of the declared shape is read back by the next step.
    session.infer({"x": np.array([5.0, 6.0], np.float32)})
    np.testing.assert_array_equal(session.infer({"x": np.zeros(2, np.float32)})[0], [6, 16])


@pytest.mark.oracle
def test_openvino_refuses_the_write_too(tmp_path):
    xml, _, _ = build_narrow_write(tmp_path)
    request = ov.Core().compile_model(str(xml), "CPU").create_infer_request()
    with pytest.raises(RuntimeError, match="incompatible"):
        request.infer({0: np.array([5.0], np.float32)})


def test_cli_steps_refuses_the_write_at_the_assigns_line(tmp_path):
    xml, assign, _ = build_narrow_write(tmp_path)
    np.savez(tmp_path / "in.npz", x=np.array([[5.0], [6.0], [7.0]], np.float32))
    r = CliRunner().invoke(cli, [str(xml), "-i", str(tmp_path / "in.npz"), "--steps", "3"])
    assert r.exit_code == 1
    assert f"{xml}:{assign}: error: layer 'Assign_" in r.output
    assert "(Assign-opset6): writes shape [1] to variable 'v'" in r.output
    assert "Traceback" not in r.output
