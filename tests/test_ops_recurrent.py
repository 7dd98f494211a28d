"""Recurrent ops: LSTMCell-1/4, LSTMSequence-5, GRUCell-3, GRUSequence-5, RNNCell-1,
RNNSequence-5 -- spec XML shapes, shape rules, attribute and length errors, a NumPy
restatement of the formulas, and differential tests against OpenVINO over every direction,
activation, clip, linear_before_reset and random sequence lengths."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun
from irrun.errors import OpError
from irrun.opkit import Dim, OpProblem, TensorSpec
from irrun.ops.recurrent import (
    GRUCell3,
    GRUCellAttrs,
    GRUSequence5,
    GRUSequenceAttrs,
    LSTMCell,
    LSTMCell4Attrs,
    LSTMCellAttrs,
    LSTMSequence5,
    LSTMSequenceAttrs,
    RNNCell1,
    RNNCellAttrs,
    RNNSequence5,
    RNNSequenceAttrs,
)

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1
import openvino.opset3 as o3
import openvino.opset4 as o4
import openvino.opset5 as o5
import openvino.opset8 as o8


def spec(shape, etype="f32"):
    return TensorSpec.make(etype, shape)


def dims(*xs):
    return tuple(Dim.of(x) for x in xs)


# ---------------------------------------------------------------- spec XML examples


def test_lstm_cell_spec_xml_shapes():
    for attrs in (LSTMCellAttrs(128), LSTMCell4Attrs(128)):
        ho, co = LSTMCell.infer(attrs, spec([1, 16]), spec([1, 128]), spec([1, 128]),
                                spec([512, 16]), spec([512, 128]), spec([512]))
        assert ho.shape == co.shape == dims(1, 128)


def test_lstm_sequence_spec_xml_shapes():
    y, ho, co = LSTMSequence5.infer(LSTMSequenceAttrs(128), spec([1, 4, 16]), spec([1, 1, 128]),
                                    spec([1, 1, 128]), spec([1], "i32"), spec([1, 512, 16]),
                                    spec([1, 512, 128]), spec([1, 512]))
    assert y.shape == dims(1, 1, 4, 128) and ho.shape == co.shape == dims(1, 1, 128)


def test_gru_cell_spec_xml_example_has_a_misprinted_bias():
    """The page's example gives B [768] with linear_before_reset=1; its own text (and
    OpenVINO, which refuses the example) says [4 * hidden_size] = [512]."""
    args = (spec([1, 16]), spec([1, 128]), spec([384, 16]), spec([384, 128]))
    with pytest.raises(OpProblem, match=r"B \(input 4\) has shape \[768\].*not 512"):
        GRUCell3.infer(GRUCellAttrs(128, linear_before_reset=True), *args, spec([768]))
    (ho,) = GRUCell3.infer(GRUCellAttrs(128, linear_before_reset=True), *args, spec([512]))
    assert ho.shape == dims(1, 128)


def test_gru_sequence_spec_xml_shapes():
    y, ho = GRUSequence5.infer(GRUSequenceAttrs(128), spec([1, 4, 16]), spec([1, 1, 128]),
                               spec([1], "i64"), spec([1, 384, 16]), spec([1, 384, 128]),
                               spec([1, 384]))
    assert y.shape == dims(1, 1, 4, 128) and ho.shape == dims(1, 1, 128)


def test_rnn_cell_and_sequence_spec_xml_shapes():
    (ho,) = RNNCell1.infer(RNNCellAttrs(128), spec([1, 16]), spec([1, 128]), spec([128, 16]),
                           spec([128, 128]), spec([128]))
    assert ho.shape == dims(1, 128)
    y, ho = RNNSequence5.infer(RNNSequenceAttrs(128), spec([1, 4, 16]), spec([1, 1, 128]),
                               spec([1], "i32"), spec([1, 128, 16]), spec([1, 128, 128]),
                               spec([1, 128]))
    assert y.shape == dims(1, 1, 4, 128) and ho.shape == dims(1, 1, 128)


# ---------------------------------------------------------------- shape rules and errors


def test_sequence_shape_rule_binds_dynamic_dims():
    attrs = LSTMSequenceAttrs(4, direction="bidirectional")
    y, ho, co = LSTMSequence5.infer(attrs, spec([-1, Dim(3, 9), 2]), spec([5, 2, 4]),
                                    spec([-1, 2, 4]), spec([-1], "i32"), spec([2, 16, 2]),
                                    spec([2, 16, 4]), spec([2, 16]))
    assert y.shape == (Dim.of(5), Dim.of(2), Dim(3, 9), Dim.of(4))
    assert ho.shape == co.shape == dims(5, 2, 4)


@pytest.mark.parametrize("change, message", [
    ({"w": [1, 16, 3]}, (r"W \(input 4\) has shape \[1,16,3\]: dim 2 \(input_size\) is 3, "
                         r"but elsewhere I is 2")),
    ({"h": [5, 2, 4]}, (r"initial_hidden_state \(input 1\) has shape \[5,2,4\], expected "
                        r"\[batch_size, num_directions, hidden_size\]: dim 1 "
                        r"\(num_directions\) is 2, not 1")),
    ({"b": [1, 12]}, r"B \(input 6\) .* dim 1 \(bias size\) is 12, not 16"),
    ({"s": [4]}, (r"sequence_lengths \(input 3\) has shape \[4\]: dim 0 \(batch_size\) "
                  r"is 4, but elsewhere N is 5")),
])
def test_sequence_shape_errors(change, message):
    shapes = {"x": [5, 3, 2], "h": [5, 1, 4], "c": [5, 1, 4], "s": [5], "w": [1, 16, 2],
              "r": [1, 16, 4], "b": [1, 16]}
    shapes.update(change)
    args = [spec(shapes[k], "i32" if k == "s" else "f32") for k in "xhcswrb"]
    with pytest.raises(OpProblem, match=message):
        LSTMSequence5.infer(LSTMSequenceAttrs(4), *args)


@pytest.mark.parametrize("change, message", [
    ({"w": [1, 16, 3]}, r"W has shape \[1,16,3\]: dim 2 \(input_size\) is 3, but elsewhere I is 2"),
    ({"h": [5, 2, 4]}, r"initial_hidden_state has shape \[5,2,4\].* dim 1 \(num_directions\) is 2, not 1"),
    ({"b": [1, 12]}, r"B has shape \[1,12\].* dim 1 \(bias size\) is 12, not 16"),
    ({"s": [4]}, r"sequence_lengths has shape \[4\]: dim 0 \(batch_size\) is 4, but elsewhere N is 5"),
    ({"x": [5, 3]}, r"X must be 3-D \[batch_size, seq_length, input_size\], got \[5,3\]"),
])
def test_sequence_shape_errors_at_run_time(change, message):
    """The kernel compares the shapes with those X's implies; what differs gets the
    shape rule's words."""
    shapes = {"x": [5, 3, 2], "h": [5, 1, 4], "c": [5, 1, 4], "s": [5], "w": [1, 16, 2],
              "r": [1, 16, 4], "b": [1, 16]}
    shapes.update(change)
    args = [np.full(shapes[k], 3 if k == "s" else 0.5, np.int32 if k == "s" else np.float32)
            for k in "xhcswrb"]
    with pytest.raises(OpProblem, match=message):
        LSTMSequence5.run(LSTMSequenceAttrs(4), *args)
    (y, ho, co) = LSTMSequence5.run(LSTMSequenceAttrs(4), *(
        np.full(v, 3 if k == "s" else 0.5, np.int32 if k == "s" else np.float32)
        for k, v in {"x": [5, 3, 2], "h": [5, 1, 4], "c": [5, 1, 4], "s": [5],
                     "w": [1, 16, 2], "r": [1, 16, 4], "b": [1, 16]}.items()))
    assert y.shape == (5, 1, 3, 4) and ho.shape == co.shape == (5, 1, 4)


def test_cell_shape_errors_at_run_time():
    z = np.zeros
    with pytest.raises(OpProblem, match=r"R has shape \[16,3\], expected \[4 \* hidden_size, "
                                        r"hidden_size\]: dim 1 \(hidden_size\) is 3, not 4"):
        LSTMCell.run(LSTMCell4Attrs(4), z((2, 3)), z((2, 4)), z((2, 4)), z((16, 3)), z((16, 3)))
    with pytest.raises(OpProblem, match=r"X must be 2-D \[batch_size, input_size\], got \[2\]"):
        GRUCell3.run(GRUCellAttrs(4), z(2), z((2, 4)), z((12, 3)), z((12, 4)))
    with pytest.raises(OpProblem, match=r"H has shape \[3,4\]: dim 0 \(batch_size\) is 3, "
                                        r"but elsewhere N is 2"):
        RNNCell1.run(RNNCellAttrs(4), z((2, 3)), z((3, 4)), z((4, 3)), z((4, 4)), z(4))


def test_attribute_and_type_errors():
    args = (spec([1, 2]), spec([1, 3]), spec([3, 2]), spec([3, 3]))
    with pytest.raises(OpProblem, match="activation 'elu' is not one of sigmoid, tanh, relu"):
        RNNCell1.infer(RNNCellAttrs(3, activations=("elu",)), *args)
    with pytest.raises(OpProblem, match="activations has 1 functions .* this op takes 2"):
        GRUCell3.infer(GRUCellAttrs(1, activations=("tanh",)), *args)
    with pytest.raises(OpProblem, match="hidden_size must be positive, got 0"):
        RNNCell1.infer(RNNCellAttrs(0), *args)
    with pytest.raises(OpProblem, match="X must be of a floating-point type, got i32"):
        RNNCell1.infer(RNNCellAttrs(3), spec([1, 2], "i32"), *args[1:])
    with pytest.raises(OpProblem, match="R has element type f16, X has f32"):
        RNNCell1.infer(RNNCellAttrs(3), *args[:3], spec([3, 3], "f16"))


def test_sequence_length_out_of_range_is_a_located_error(tmp_path):
    ps = [o8.parameter(s, t, name=n) for s, t, n in [
        ([2, 3, 1], ov.Type.f32, "x"), ([2, 1, 2], ov.Type.f32, "h"), ([2], ov.Type.i32, "s"),
        ([1, 2, 1], ov.Type.f32, "w"), ([1, 2, 2], ov.Type.f32, "r"), ([1, 2], ov.Type.f32, "b")]]
    model = ov.Model(o5.rnn_sequence(*ps, 2, "forward").outputs(), ps, "t")
    m = irrun.read_model(oracle.save(model, tmp_path))
    feed = {p.get_friendly_name(): np.ones(list(p.get_output_shape(0)), np.float32) for p in ps}
    feed["s"] = np.array([3, 4], np.int32)
    with pytest.raises(OpError, match=r"RNNSequence.*sequence_lengths\[1\] = 4 is out of range "
                                      r"\[0, 3\] \(X has 3 time steps\)"):
        m.infer(feed)


def test_constant_sequence_lengths_out_of_range_fail_at_load(tmp_path):
    ps = [o8.parameter(s, ov.Type.f32, name=n) for s, n in [
        ([2, 3, 1], "x"), ([2, 1, 2], "h"), ([1, 2, 1], "w"), ([1, 2, 2], "r"), ([1, 2], "b")]]
    lengths = ov.op.Constant(np.array([3, -1], np.int32))
    node = o5.rnn_sequence(ps[0], ps[1], lengths, *ps[2:], 2, "forward")
    xml = oracle.save(ov.Model(node.outputs(), ps, "t"), tmp_path)
    with pytest.raises(irrun.errors.ModelError, match=r"model\.xml:\d+: .*sequence_lengths\[1\] = -1 "
                                                      r"is out of range \[0, 3\]"):
        irrun.read_model(xml)


# ---------------------------------------------------------------- the formulas, restated


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_lstm_cell_matches_the_spec_formula():
    rng = np.random.default_rng(0)
    n, i, h = 2, 3, 4
    x, h0, c0 = rng.standard_normal((n, i)), rng.standard_normal((n, h)), rng.standard_normal((n, h))
    w, r, b = rng.standard_normal((4 * h, i)), rng.standard_normal((4 * h, h)), rng.standard_normal(4 * h)
    g = x @ w.T + h0 @ r.T + b
    f, i_, c_, o = np.split(g, 4, axis=1)
    c1 = sigmoid(f) * c0 + sigmoid(i_) * np.tanh(c_)
    h1 = sigmoid(o) * np.tanh(c1)
    ho, co = LSTMCell.run(LSTMCell4Attrs(h), x, h0, c0, w, r, b)
    np.testing.assert_allclose(ho, h1, rtol=1e-12)
    np.testing.assert_allclose(co, c1, rtol=1e-12)
    assert ho.dtype == np.float64


def test_gru_cell_matches_the_spec_formula_both_reset_modes():
    rng = np.random.default_rng(1)
    n, i, h = 2, 3, 4
    x, h0 = rng.standard_normal((n, i)), rng.standard_normal((n, h))
    w, r = rng.standard_normal((3 * h, i)), rng.standard_normal((3 * h, h))
    wz, wr, wh = np.split(w, 3)
    rz, rr, rh = np.split(r, 3)
    b3, b4 = rng.standard_normal(3 * h), rng.standard_normal(4 * h)
    z = sigmoid(x @ wz.T + h0 @ rz.T + b3[:h])
    rt = sigmoid(x @ wr.T + h0 @ rr.T + b3[h:2 * h])
    ht = np.tanh(x @ wh.T + (rt * h0) @ rh.T + b3[2 * h:])
    want = (1 - z) * ht + z * h0
    np.testing.assert_allclose(GRUCell3.run(GRUCellAttrs(h), x, h0, w, r, b3)[0], want, rtol=1e-12)
    z = sigmoid(x @ wz.T + h0 @ rz.T + b4[:h])
    rt = sigmoid(x @ wr.T + h0 @ rr.T + b4[h:2 * h])
    ht = np.tanh(x @ wh.T + b4[2 * h:3 * h] + rt * (h0 @ rh.T + b4[3 * h:]))
    want = (1 - z) * ht + z * h0
    got = GRUCell3.run(GRUCellAttrs(h, linear_before_reset=True), x, h0, w, r, b4)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_sequence_lengths_zero_outputs_and_last_valid_state():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 1)).astype(np.float32)
    h0 = np.zeros((2, 1, 3), np.float32)
    w, r, b = (rng.standard_normal(s).astype(np.float32) for s in ((1, 3, 1), (1, 3, 3), (1, 3)))
    full_y, _ = RNNSequence5.run(RNNSequenceAttrs(3), x, h0, np.array([4, 4]), w, r, b)
    y, ho = RNNSequence5.run(RNNSequenceAttrs(3), x, h0, np.array([4, 2]), w, r, b)
    np.testing.assert_array_equal(y[1, 0, 2:], 0)
    np.testing.assert_allclose(y[1, 0, :2], full_y[1, 0, :2], rtol=1e-6)
    np.testing.assert_allclose(ho[1, 0], full_y[1, 0, 1], rtol=1e-6)
    # Reverse over a valid length of 2 runs steps 1, 0: the same as a reversed 2-step input.
    y, ho = RNNSequence5.run(RNNSequenceAttrs(3, direction="reverse"), x, h0, np.array([4, 2]),
                             w, r, b)
    y2, _ = RNNSequence5.run(RNNSequenceAttrs(3), x[:, 1::-1], h0, np.array([2, 2]), w, r, b)
    np.testing.assert_allclose(y[1, 0, :2], y2[1, 0, ::-1], rtol=1e-6)
    np.testing.assert_allclose(ho[1, 0], y2[1, 0, 1], rtol=1e-6)
    np.testing.assert_array_equal(y[1, 0, 2:], 0)
    assert y.dtype == np.float32


def test_f16_computes_in_f32_and_rounds_once():
    rng = np.random.default_rng(3)
    x, h0 = rng.standard_normal((2, 3)).astype(np.float16), rng.standard_normal((2, 4)).astype(np.float16)
    w, r, b = (rng.standard_normal(s).astype(np.float16) for s in ((4, 3), (4, 4), (4,)))
    (got,) = RNNCell1.run(RNNCellAttrs(4), x, h0, w, r, b)
    (wide,) = RNNCell1.run(RNNCellAttrs(4), *(a.astype(np.float32) for a in (x, h0, w, r, b)))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, wide.astype(np.float16))


# ---------------------------------------------------------------- OpenVINO differential

ACTS = ["sigmoid", "tanh", "relu"]
DIRECTIONS = ["forward", "reverse", "bidirectional"]


def feed_of(params, rng, scale=1.0):
    return {p.get_friendly_name(): (scale * rng.standard_normal(list(p.get_output_shape(0))))
            .astype(np.float32) for p in params}


def f32(shape, name):
    return o8.parameter(shape, ov.Type.f32, name=name)


def check(tmp_path, model, feed, edit=None):
    """Compare irrun with OpenVINO; `edit` rewrites the IR text first (for attributes the
    Python API cannot set). f32 results within 2e-5 relative (+1e-6 absolute): the CPU
    plugin's exp/tanh and matrix products round differently from NumPy's."""
    xml = oracle.save(model, tmp_path)
    if edit:
        with open(xml) as f:
            text = f.read()
        with open(xml, "w") as f:
            f.write(edit(text))
    expected = oracle.ov_run(xml, feed)
    got = oracle.irrun_run(xml, feed)
    for g, e in zip(got, expected):
        oracle.assert_same(g, e, rtol=2e-5, atol=1e-6)


common = {"n": st.integers(1, 3), "i": st.integers(1, 4), "h": st.integers(1, 5),
          "clip": st.sampled_from([0.0, 0.5, 2.0]), "seed": st.integers(0, 2 ** 16)}


@pytest.mark.oracle
@settings(max_examples=12)
@given(direction=st.sampled_from(DIRECTIONS), t=st.integers(1, 5),
       acts=st.lists(st.sampled_from(ACTS), min_size=3, max_size=3), dynamic=st.booleans(),
       **common)
def test_lstm_sequence_matches_openvino(tmp_path_factory, direction, t, acts, dynamic, n, i, h,
                                        clip, seed):
    d = 2 if direction == "bidirectional" else 1
    bn, bt = (-1, -1) if dynamic else (n, t)     # dynamic batch and time in the IR
    ps = [f32([bn, bt, i], "x"), f32([bn, d, h], "h"), f32([bn, d, h], "c"),
          o8.parameter([bn], ov.Type.i32, name="s"), f32([d, 4 * h, i], "w"),
          f32([d, 4 * h, h], "r"), f32([d, 4 * h], "b")]
    node = o5.lstm_sequence(*ps, h, direction, activations=acts, clip=clip)
    rng = np.random.default_rng(seed)
    shapes = {"x": [n, t, i], "h": [n, d, h], "c": [n, d, h]}
    feed = {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}
    feed.update({k: v for k, v in feed_of(ps[4:], rng).items()})
    feed["s"] = rng.integers(0, t + 1, n).astype(np.int32)
    check(tmp_path_factory.mktemp("ls"), ov.Model(node.outputs(), ps, "t"), feed)


@pytest.mark.oracle
@settings(max_examples=12)
@given(direction=st.sampled_from(DIRECTIONS), t=st.integers(1, 5), lbr=st.booleans(),
       acts=st.lists(st.sampled_from(ACTS), min_size=2, max_size=2),
       lt=st.sampled_from(["i32", "i64"]), **common)
def test_gru_sequence_matches_openvino(tmp_path_factory, direction, t, lbr, acts, lt, n, i, h,
                                       clip, seed):
    d = 2 if direction == "bidirectional" else 1
    ps = [f32([n, t, i], "x"), f32([n, d, h], "h"),
          o8.parameter([n], oracle.OV_TYPE[lt], name="s"), f32([d, 3 * h, i], "w"),
          f32([d, 3 * h, h], "r"), f32([d, (4 if lbr else 3) * h], "b")]
    node = o5.gru_sequence(*ps, h, direction, activations=acts, clip=clip,
                           linear_before_reset=lbr)
    rng = np.random.default_rng(seed)
    feed = feed_of(ps, rng)
    feed["s"] = rng.integers(0, t + 1, n).astype(oracle.NP_TYPE[lt])
    check(tmp_path_factory.mktemp("gs"), ov.Model(node.outputs(), ps, "t"), feed)


@pytest.mark.oracle
@settings(max_examples=10)
@given(direction=st.sampled_from(DIRECTIONS), t=st.integers(1, 5),
       act=st.sampled_from(ACTS), **common)
def test_rnn_sequence_matches_openvino(tmp_path_factory, direction, t, act, n, i, h, clip, seed):
    d = 2 if direction == "bidirectional" else 1
    ps = [f32([n, t, i], "x"), f32([n, d, h], "h"), o8.parameter([n], ov.Type.i32, name="s"),
          f32([d, h, i], "w"), f32([d, h, h], "r"), f32([d, h], "b")]
    node = o5.rnn_sequence(*ps, h, direction, activations=[act], clip=clip)
    rng = np.random.default_rng(seed)
    feed = feed_of(ps, rng)
    feed["s"] = rng.integers(0, t + 1, n).astype(np.int32)
    check(tmp_path_factory.mktemp("rs"), ov.Model(node.outputs(), ps, "t"), feed)


@pytest.mark.oracle
@settings(max_examples=10)
@given(v=st.sampled_from([1, 4]), peepholes=st.booleans(),
       acts=st.lists(st.sampled_from(ACTS), min_size=3, max_size=3), **common)
def test_lstm_cell_matches_openvino(tmp_path_factory, v, peepholes, acts, n, i, h, clip, seed):
    ps = [f32([n, i], "x"), f32([n, h], "h"), f32([n, h], "c"), f32([4 * h, i], "w"),
          f32([4 * h, h], "r"), f32([4 * h], "b")]
    node = (o1 if v == 1 else o4).lstm_cell(*ps, h, activations=acts, clip=clip)
    if v == 1 and peepholes:
        ps.append(f32([3 * h], "p"))
        node.set_arguments([q.output(0) for q in ps])
        node.validate_and_infer_types()
    rng = np.random.default_rng(seed)
    check(tmp_path_factory.mktemp("lc"), ov.Model(node.outputs(), ps, "t"), feed_of(ps, rng))


def test_lstm_cell1_input_forget_couples_the_gates():
    """input_forget=true: i = 1 - f (OpenVINO's reference; its CPU plugin ignores the
    attribute, so this is checked against the formula, not against OpenVINO)."""
    rng = np.random.default_rng(5)
    n, i, h = 2, 3, 4
    x, h0, c0 = (rng.standard_normal(s) for s in ((n, i), (n, h), (n, h)))
    w, r, b, p = (rng.standard_normal(s) for s in ((4 * h, i), (4 * h, h), (4 * h,), (3 * h,)))
    g = x @ w.T + h0 @ r.T + b
    gf, _, gc, go = np.split(g, 4, axis=1)
    f = sigmoid(gf + p[:h] * c0)
    c1 = f * c0 + (1 - f) * np.tanh(gc)
    h1 = sigmoid(go + p[2 * h:] * c1) * np.tanh(c1)
    ho, co = LSTMCell.run(LSTMCellAttrs(h, input_forget=True), x, h0, c0, w, r, b, p)
    np.testing.assert_allclose(co, c1, rtol=1e-12)
    np.testing.assert_allclose(ho, h1, rtol=1e-12)


@pytest.mark.parametrize("fmt", ["icof", "ifoc", "iofc", "ifco"])
def test_lstm_cell1_weights_format_reads_blocks_in_that_order(fmt):
    rng = np.random.default_rng(6)
    x, h0, c0 = (rng.standard_normal(s) for s in ((2, 3), (2, 4), (2, 4)))
    w, r, b = (rng.standard_normal(s) for s in ((16, 3), (16, 4), (16,)))

    def to_fmt(a):
        blocks = dict(zip("fico", np.split(a, 4)))
        return np.concatenate([blocks[g] for g in fmt])
    want = LSTMCell.run(LSTMCellAttrs(4), x, h0, c0, w, r, b)
    got = LSTMCell.run(LSTMCellAttrs(4, weights_format=fmt), x, h0, c0, to_fmt(w), to_fmt(r),
                       to_fmt(b))
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, w_, rtol=1e-12)


def test_lstm_cell1_warns_where_the_cpu_plugin_differs(tmp_path):
    ps = [f32([2, 3], "x"), f32([2, 4], "h"), f32([2, 4], "c"), f32([16, 3], "w"),
          f32([16, 4], "r"), f32([16], "b")]
    xml = oracle.save(ov.Model(o1.lstm_cell(*ps, 4).outputs(), ps, "t"), tmp_path)
    with open(xml) as f:
        text = f.read()
    with open(xml, "w") as f:
        f.write(text.replace('input_forget="false"', 'input_forget="true"')
                    .replace('weights_format="fico"', 'weights_format="icof"'))
    from click.testing import CliRunner

    from irrun.ui.cli import cli
    result = CliRunner().invoke(cli, ["validate", xml])
    assert "input_forget=true" in result.output and "weights_format=icof" in result.output


@pytest.mark.oracle
@settings(max_examples=10)
@given(lbr=st.booleans(), acts=st.lists(st.sampled_from(ACTS), min_size=2, max_size=2),
       rnn_act=st.sampled_from(ACTS), **common)
def test_gru_and_rnn_cells_match_openvino(tmp_path_factory, lbr, acts, rnn_act, n, i, h, clip,
                                          seed):
    ps = [f32([n, i], "x"), f32([n, h], "h"), f32([3 * h, i], "w"), f32([3 * h, h], "r"),
          f32([(4 if lbr else 3) * h], "b")]
    gru = o3.gru_cell(*ps, h, activations=acts, clip=clip, linear_before_reset=lbr)
    qs = [f32([n, i], "x2"), f32([n, h], "h2"), f32([h, i], "w2"), f32([h, h], "r2"),
          f32([h], "b2")]
    rnn = o3.rnn_cell(*qs, h, [rnn_act], [], [], clip=clip)
    rng = np.random.default_rng(seed)
    check(tmp_path_factory.mktemp("gc"), ov.Model([gru.output(0), rnn.output(0)], ps + qs, "t"),
          {**feed_of(ps, rng), **feed_of(qs, rng)})


# ---------------------------------------------------------------- the two time loops
# Sizes up to recurrent.COMPILED_MAX_MACS run the compiled loop (ops/recurrent_loop.py), larger
# ones a NumPy loop; the hypothesis tests above are all small. Here the NumPy loop is forced
# (COMPILED_MAX_MACS = 0) and both are checked against OpenVINO and against each other.

def _sequence_case(family, direction, n, t, i, h, lbr, acts, clip, rng, dtype=np.float32):
    d = 2 if direction == "bidirectional" else 1
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[family]
    nb = (4 if lbr else 3) * h if family == "gru" else gates * h
    x = rng.standard_normal((n, t, i)).astype(dtype)
    states = [rng.standard_normal((n, d, h)).astype(dtype) for _ in range(2 if family == "lstm" else 1)]
    lens = rng.integers(0, t + 1, n).astype(np.int32)
    lens[0] = t                          # one full-length item, and the others at random
    w = (rng.standard_normal((d, gates * h, i)) / np.sqrt(i)).astype(dtype)
    r = (rng.standard_normal((d, gates * h, h)) / np.sqrt(h)).astype(dtype)
    b = rng.standard_normal((d, nb)).astype(dtype)
    if family == "lstm":
        op, attrs = LSTMSequence5, LSTMSequenceAttrs(h, direction=direction, activations=acts, clip=clip)
    elif family == "gru":
        op, attrs = GRUSequence5, GRUSequenceAttrs(h, direction=direction, activations=acts[:2],
                                                   clip=clip, linear_before_reset=lbr)
    else:
        op, attrs = RNNSequence5, RNNSequenceAttrs(h, direction=direction, activations=acts[:1],
                                                   clip=clip)
    return op, attrs, (x, *states, lens, w, r, b)


CASES = [("lstm", "bidirectional", 3, 6, 5, 7, False, ("sigmoid", "tanh", "tanh"), 0.0),
         ("lstm", "reverse", 2, 4, 3, 4, False, ("tanh", "relu", "sigmoid"), 0.7),
         ("gru", "bidirectional", 3, 5, 4, 6, False, ("sigmoid", "tanh"), 0.0),
         ("gru", "forward", 4, 5, 2, 5, True, ("relu", "tanh"), 1.5),
         ("gru", "reverse", 2, 3, 3, 3, True, ("sigmoid", "sigmoid"), 0.0),
         ("rnn", "bidirectional", 3, 6, 2, 5, False, ("relu",), 0.0),
         ("rnn", "forward", 2, 4, 3, 4, False, ("sigmoid",), 0.4)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_compiled_and_numpy_loops_agree(case, monkeypatch):
    import irrun.ops.recurrent as rec
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[case[0]]
    assert case[2] * gates * case[5] ** 2 <= rec.COMPILED_MAX_MACS    # the compiled loop first
    rng = np.random.default_rng(11)
    for dtype, rtol in ((np.float32, 2e-6), (np.float64, 1e-13)):
        op, attrs, args = _sequence_case(*case, rng, dtype)
        compiled = op.run(attrs, *args)
        monkeypatch.setattr(rec, "COMPILED_MAX_MACS", 0)
        looped = op.run(attrs, *args)
        monkeypatch.undo()
        for c, p in zip(compiled, looped):
            assert c.dtype == p.dtype == dtype and c.shape == p.shape
            np.testing.assert_allclose(c, p, rtol=rtol, atol=rtol)
        # Past each item's length: zeros; a length of 0 ends with zero states.
        lens = args[-4]
        for k, ln in enumerate(lens):
            assert not compiled[0][k, :, ln:].any()
            if ln == 0:
                assert all(not s[k].any() for s in compiled[1:])


@pytest.mark.oracle
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
@pytest.mark.parametrize("numpy_loop", [False, True], ids=["compiled", "numpy"])
def test_both_loops_match_openvino(case, numpy_loop, tmp_path, monkeypatch):
    import irrun.ops.recurrent as rec
    if numpy_loop:
        monkeypatch.setattr(rec, "COMPILED_MAX_MACS", 0)
    family, direction, _, _, _, h, lbr, acts, clip = case
    rng = np.random.default_rng(12)
    _, _, args = _sequence_case(*case, rng)
    names = ["x", "h", "c"][:len(args) - 4] + ["s", "w", "r", "b"]
    ps = [o8.parameter(list(a.shape), ov.Type.i32 if nm == "s" else ov.Type.f32, name=nm)
          for nm, a in zip(names, args)]
    if family == "lstm":
        node = o5.lstm_sequence(*ps, h, direction, activations=list(acts), clip=clip)
    elif family == "gru":
        node = o5.gru_sequence(*ps, h, direction, activations=list(acts[:2]), clip=clip,
                               linear_before_reset=lbr)
    else:
        node = o5.rnn_sequence(*ps, h, direction, activations=list(acts[:1]), clip=clip)
    check(tmp_path, ov.Model(node.outputs(), ps, "t"), dict(zip(names, args)))
