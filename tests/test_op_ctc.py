"""CTCGreedyDecoderSeqLen-6: the spec example, every rule of semantics.md, and differential
tests against OpenVINO's CPU plugin over every type combination it accepts."""
from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import irrun
from irrun.ui.cli import cli
from irrun.errors import IrrunError, OpError, ShapeError
from irrun.ir.etypes import element_type
from irrun.ops.sequence import CTCGreedyDecoderSeqLen6, CTCGreedyDecoderSeqLenAttrs
from irrun.ir.registry import parse_attrs
from irrun.ir.shapes import Dim, TensorSpec
from shipped import run_cli

MODEL_DIR = os.path.join(os.path.dirname(__file__), "..", "models", "ctc_spec")
FLOATS = ["f16", "bf16", "f32", "f64"]
INTEGERS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]


def run(data, lengths, blank=None, merge_repeated=True, classes="i32", lengths_type="i32"):
    attrs = CTCGreedyDecoderSeqLenAttrs(merge_repeated, classes, lengths_type)
    args = [np.asarray(data), np.asarray(lengths)]
    if blank is not None:
        args.append(np.asarray(blank))
    return CTCGreedyDecoderSeqLen6.run(attrs, *args)


def infer(data, lengths, blank=None, **attrs):
    args = [data, lengths] + ([blank] if blank is not None else [])
    return CTCGreedyDecoderSeqLen6.infer(CTCGreedyDecoderSeqLenAttrs(**attrs), *args)


def reference(data, lengths, blank, merge_repeated):
    """The spec's two steps, one time step at a time (std::max_element's argmax)."""
    data = np.asarray(data).astype(np.float64)
    n, t, c = data.shape
    out = np.full((n, t), -1, np.int64)
    counts = np.zeros(n, np.int64)
    for b in range(n):
        previous = -1
        for s in range(int(lengths[b])):
            row = data[b, s]
            best = 0
            for k in range(1, c):
                if row[k] > row[best]:      # False for NaN on either side
                    best = k
            if best != blank and not (merge_repeated and best == previous):
                out[b, counts[b]] = best
                counts[b] += 1
            previous = best
    return out, counts


def onehot(path, c, scale=1.0):
    """Logits [1, len(path), c] whose argmax is `path`."""
    x = np.zeros((1, len(path), c), np.float32)
    x[0, np.arange(len(path)), path] = scale
    return x


# ------------------------------------------------------------------ spec example

def test_spec_example_shapes():
    """The spec's layer: [8,20,128] logits, [8] lengths, scalar blank 120, i64 outputs."""
    classes, lengths = infer(TensorSpec.make("f32", [8, 20, 128]), TensorSpec.make("i32", [8]),
                             TensorSpec.make("i64", []), merge_repeated=True,
                             classes_index_type="i64", sequence_length_type="i64")
    assert (classes.etype.name, classes.shape) == ("i64", (Dim.of(8), Dim.of(20)))
    assert (lengths.etype.name, lengths.shape) == ("i64", (Dim.of(8),))


def test_spec_model_shapes():
    m = irrun.read_model(os.path.join(MODEL_DIR, "model.xml"))
    assert [(o.name, o.element_type, o.partial_shape) for o in m.outputs] == [
        ("decoded_classes", "i64", "[8,20]"), ("decoded_lengths", "i64", "[8]")]
    assert irrun.validate(os.path.join(MODEL_DIR, "model.xml")) == []


def test_spec_model_runs_through_cli(tmp_path):
    got, expected = run_cli(MODEL_DIR, tmp_path)
    assert sorted(got) == ["decoded_classes", "decoded_lengths"]
    for k in expected:
        assert got[k].dtype == expected[k].dtype == np.int64
        np.testing.assert_array_equal(got[k], expected[k])
    inputs = np.load(os.path.join(MODEL_DIR, "inputs.npz"))
    want = reference(inputs["data"], inputs["sequence_length"], 120, True)
    np.testing.assert_array_equal(got["decoded_classes"], want[0])
    np.testing.assert_array_equal(got["decoded_lengths"], want[1])


# ------------------------------------------------------------------ rules (semantics.md)

def test_spec_merge_repeated_description():
    # ABB*B*B with '*' the blank: ABBBB without merging, ABBB with it.
    a, b, blank = 0, 1, 2
    x = onehot([a, b, b, blank, b, blank, b], 3)
    assert run(x, [7], merge_repeated=False)[0].tolist() == [[0, 1, 1, 1, 1, -1, -1]]
    assert run(x, [7], merge_repeated=True)[0].tolist() == [[0, 1, 1, 1, -1, -1, -1]]


def test_previous_updates_on_blanks():
    # A A -> A, but A blank A -> A A: `previous` is the blank in between.
    x = onehot([1, 1, 0, 1, 1], 3)
    classes, lengths = run(x, [5], blank=[0])
    assert classes.tolist() == [[1, 1, -1, -1, -1]] and lengths.tolist() == [2]


def test_default_blank_is_last_class():
    x = onehot([3, 0, 3, 2, 2], 4)
    classes, lengths = run(x, [5])
    assert classes.tolist() == [[0, 2, -1, -1, -1]] and lengths.tolist() == [2]


def test_ties_first_max_wins():
    x = np.array([[[1, 5, 5, 2], [7, 7, 7, 7], [0, 0, 3, 3]]], np.float32)
    assert run(x, [3], blank=-5, merge_repeated=False)[0].tolist() == [[1, 0, 2]]


@pytest.mark.parametrize("dt", FLOATS)
def test_nan(dt):
    nan = np.nan
    x = np.array([[[nan, 9, 1],      # NaN at class 0: class 0
                   [1, nan, 0],      # NaN elsewhere is skipped: class 0
                   [0, nan, 2],      # class 2
                   [nan, nan, nan],  # class 0
                   [-np.inf, nan, -np.inf]]],  # class 0: nothing is greater than -inf
                 np.float64).astype(element_type(dt).dtype)
    classes, lengths = run(x, [5], blank=7, merge_repeated=False)
    assert classes.tolist() == [[0, 0, 2, 0, 0]]


@pytest.mark.parametrize("blank,dtype", [(-1, np.int32), (3, np.int64), (2**40, np.int64),
                                         (2**64 - 1, np.uint64), (-(2**63), np.int64)])
def test_blank_outside_classes_matches_nothing(blank, dtype):
    x = onehot([2, 2, 0, 1], 3)
    classes, lengths = run(x, [4], blank=np.array(blank, dtype))
    assert classes.tolist() == [[2, 0, 1, -1]] and lengths.tolist() == [3]


@pytest.mark.parametrize("shape", [(), (1,)])
def test_blank_scalar_or_one_element(shape):
    x = onehot([1, 0, 1], 2)
    classes, _ = run(x, [3], blank=np.zeros(shape, np.int64))
    assert classes.tolist() == [[1, 1, -1]]


def test_seq_len_zero_and_full():
    x = np.concatenate([onehot([0, 1, 2, 1], 3), onehot([1, 1, 0, 0], 3)])
    classes, lengths = run(x, [0, 4], blank=2, classes="i64", lengths_type="i64")
    assert classes.dtype == lengths.dtype == np.int64
    assert classes.tolist() == [[-1, -1, -1, -1], [1, 0, -1, -1]]
    assert lengths.tolist() == [0, 2]


def test_steps_past_the_length_are_ignored():
    x = onehot([1, 0, 0, 1], 2)
    assert run(x, [2], blank=5)[0].tolist() == [[1, 0, -1, -1]]


def test_empty_batch_and_time():
    classes, lengths = run(np.zeros((0, 3, 2), np.float32), np.zeros(0, np.int32))
    assert classes.shape == (0, 3) and lengths.shape == (0,)
    classes, lengths = run(np.zeros((2, 0, 2), np.float32), [0, 0])
    assert classes.shape == (2, 0) and lengths.tolist() == [0, 0]


def test_no_classes():
    classes, lengths = run(np.zeros((2, 3, 0), np.float32), [0, 0])
    assert classes.tolist() == [[-1] * 3] * 2 and lengths.tolist() == [0, 0]
    with pytest.raises(OpError, match=r"C = 0.*sequence_length\[1\] = 2"):
        run(np.zeros((2, 3, 0), np.float32), [0, 2])


@pytest.mark.parametrize("lengths,pos,value", [([1, -1], 1, -1), ([4, 2], 0, 4),
                                               ([0, 2**40], 1, 2**40)])
def test_sequence_length_out_of_range(lengths, pos, value):
    with pytest.raises(OpError, match=rf"sequence_length\[{pos}\] = {value} is outside \[0, 3\]"):
        run(np.zeros((2, 3, 2), np.float32), np.array(lengths, np.int64))


def test_blank_of_wrong_size_at_run_time():
    with pytest.raises(OpError, match=r"blank_index must be a scalar or a 1-element"):
        run(np.zeros((1, 2, 2), np.float32), [2], blank=np.array([0, 1]))


# ------------------------------------------------------------------ shape and type inference

def _s(t, shape):
    return TensorSpec.make(t, shape)


@pytest.mark.parametrize("data,lengths,blank,message", [
    (_s("f32", [2, 3]), _s("i32", [2]), None, "data must be 3-D"),
    (_s("f32", [2, 3, 4, 1]), _s("i32", [2]), None, "data must be 3-D"),
    (_s("f32", [2, 3, 4]), _s("i32", [2, 1]), None, "sequence_length must be 1-D"),
    (_s("f32", [2, 3, 4]), _s("i32", []), None, "sequence_length must be 1-D"),
    (_s("f32", [8, 3, 4]), _s("i32", [7]), None, r"dim 0 \(N = 8\).*\(7\) must match"),
    (_s("f32", [Dim(1, 4), 3, 4]), _s("i32", [Dim(5, 9)]), None, "must match"),
    (_s("f32", [2, 3, 4]), _s("i32", [2]), _s("i32", [2]), "blank_index must be a scalar"),
    (_s("f32", [2, 3, 4]), _s("i32", [2]), _s("i32", [1, 1]), "blank_index must be a scalar"),
    (_s("f32", [2, 3, 4]), _s("i32", [2]), _s("f32", []), "blank_index must be of an integer type"),
    (_s("f32", [2, 3, 4]), _s("i32", [2]), _s("boolean", []), "integer type; got boolean"),
    (_s("i32", [2, 3, 4]), _s("i32", [2]), None, "data must be of a floating-point type"),
    (_s("f32", [2, 3, 4]), _s("f32", [2]), None, "sequence_length must be i32 or i64"),
    (_s("f32", [2, 3, 4]), _s("u8", [2]), None, "sequence_length must be i32 or i64; got u8"),
])
def test_inference_errors(data, lengths, blank, message):
    with pytest.raises(ShapeError, match=message):
        infer(data, lengths, blank)


def test_inference_dynamic():
    c, n = infer(_s("f32", [None, None, 3]), _s("i64", [7]))
    assert c.shape == (Dim.of(7), Dim(0, None)) and n.shape == (Dim.of(7),)
    c, n = infer(_s("bf16", [Dim(2, 9), None, 3]), _s("i32", [Dim(5, 20)]), _s("u8", [None]))
    assert c.shape == (Dim(5, 9), Dim(0, None)) and n.shape == (Dim(5, 9),)
    c, n = infer(_s("f16", None), _s("i32", None), classes_index_type="i64")
    assert c.shape == (Dim(0, None), Dim(0, None)) and n.shape == (Dim(0, None),)
    assert (c.etype.name, n.etype.name) == ("i64", "i32")


def test_attributes():
    attrs, problems, _ = parse_attrs(CTCGreedyDecoderSeqLenAttrs, {})
    assert attrs == CTCGreedyDecoderSeqLenAttrs(True, "i32", "i32")
    attrs, problems, _ = parse_attrs(CTCGreedyDecoderSeqLenAttrs, {"classes_index_type": "f32"})
    assert attrs is None and "classes_index_type='f32'" in problems[0][1]


def test_infer_agrees_with_run():
    rng = np.random.default_rng(3)
    for dt in FLOATS:
        for ct in ("i32", "i64"):
            for lt in ("i32", "i64"):
                x = rng.normal(size=(3, 4, 5)).astype(element_type(dt).dtype)
                specs = infer(TensorSpec.make(dt, [3, 4, 5]), TensorSpec.make("i64", [3]),
                              classes_index_type=ct, sequence_length_type=lt)
                outs = run(x, np.array([4, 0, 2]), classes=ct, lengths_type=lt)
                for spec, out in zip(specs, outs):
                    assert out.dtype == spec.etype.dtype
                    assert tuple(d.value for d in spec.shape) == out.shape


# ------------------------------------------------------------------ rule reference, any values

@given(st.data())
def test_rules_against_reference(data):
    """NaN, infinities, ties and blanks anywhere (outside OpenVINO's region too)."""
    n = data.draw(st.integers(0, 3), label="N")
    t = data.draw(st.integers(0, 6), label="T")
    c = data.draw(st.integers(1, 5), label="C")
    dt = data.draw(st.sampled_from(FLOATS), label="data type")
    pool = st.sampled_from([0.0, 1.0, -1.0, 2.0, np.nan, np.inf, -np.inf])
    x = np.array(data.draw(st.lists(pool, min_size=n * t * c, max_size=n * t * c)),
                 np.float64).reshape(n, t, c).astype(element_type(dt).dtype)
    lengths = np.array(data.draw(st.lists(st.integers(0, t), min_size=n, max_size=n)), np.int64)
    blank = data.draw(st.integers(-2, c + 1), label="blank")
    merge = data.draw(st.booleans(), label="merge_repeated")
    classes, counts = run(x, lengths, blank=np.int64(blank), merge_repeated=merge)
    want = reference(x, lengths, blank, merge)
    np.testing.assert_array_equal(classes, want[0])
    np.testing.assert_array_equal(counts, want[1])


# ------------------------------------------------------------------ errors located, end to end

ov = pytest.importorskip("openvino")
import openvino.opset3 as o3  # noqa: E402
import openvino.opset6 as o6  # noqa: E402


def _model(shape, dt="f32", lt="i32", blank=None, merge=True, ct="i32", st_="i32"):
    """blank: None (absent), ("param", type, shape) or ("const", array)."""
    x = o3.parameter(shape, getattr(ov.Type, dt), name="data")
    s = o3.parameter([shape[0]], getattr(ov.Type, lt), name="sequence_length")
    params = [x, s]
    if blank is None:
        node = o6.ctc_greedy_decoder_seq_len(x, s, None, merge, ct, st_, name="ctc")
    else:
        if blank[0] == "param":
            b = o3.parameter(blank[2], getattr(ov.Type, blank[1]), name="blank_index")
            params.append(b)
        else:
            b = o3.constant(blank[1], name="blank_index")
        node = o6.ctc_greedy_decoder_seq_len(x, s, b, merge, ct, st_, name="ctc")
    return ov.Model(node.outputs(), params, "ctc")


def test_sequence_length_error_is_located(tmp_path):
    xml = str(tmp_path / "m.xml")
    ov.save_model(_model([2, 3, 4]), xml)
    m = irrun.read_model(xml)
    with pytest.raises(IrrunError) as e:
        m.infer({"data": np.zeros((2, 3, 4), np.float32),
                 "sequence_length": np.array([3, 5], np.int32)})
    text = str(e.value)
    assert "layer 'ctc'" in text and "CTCGreedyDecoderSeqLen" in text
    assert "sequence_length[1] = 5 is outside [0, 3]" in text
    with pytest.raises(IrrunError, match=r"sequence_length\[0\] = -2"):
        m.infer({"data": np.zeros((2, 3, 4), np.float32),
                 "sequence_length": np.array([-2, 0], np.int32)})


def test_bad_blank_shape_in_xml_is_reported(tmp_path):
    xml = str(tmp_path / "m.xml")
    ov.save_model(_model([2, 3, 4], blank=("param", "i32", [1])), xml)
    text = open(xml).read()
    # Give the blank_index Parameter (and the port it feeds) a second element.
    text = text.replace('shape="1" element_type="i32"', 'shape="2" element_type="i32"')
    text = text.replace("<dim>1</dim>", "<dim>2</dim>")
    open(xml, "w").write(text)
    result = CliRunner().invoke(cli, ["validate", xml])
    assert result.exit_code == 1
    assert "blank_index must be a scalar or a 1-element 1-D tensor; got shape [2]" in result.output
    assert "layer 'ctc'" in result.output


# ------------------------------------------------------------------ OpenVINO CPU plugin

oracle = pytest.importorskip("oracle")


def _compare(model, feed):
    """irrun against the CPU plugin (bf16 inputs go in bit for bit): oracle.compare."""
    got, _ = oracle.compare(model, feed)
    assert len(got) == 2
    return got


@pytest.mark.oracle
@pytest.mark.parametrize("dt", FLOATS)
def test_oracle_every_type_combination(dt):
    """Every data type x lengths type x output types x blank (absent, scalar, [1]) type."""
    rng = np.random.default_rng(11)
    blanks = [None] + [("param", bt, shape) for bt in INTEGERS for shape in ([], [1])]
    for k, blank in enumerate(blanks):
        lt = ("i32", "i64")[k % 2]
        ct, st_ = [("i32", "i32"), ("i64", "i32"), ("i32", "i64"), ("i64", "i64")][k % 4]
        merge = bool((k // 2) % 2)
        x = (rng.integers(-2, 3, (3, 6, 4)) / 2).astype(element_type(dt).dtype)
        feed = {"data": x, "sequence_length": np.array([6, 0, 4]).astype(element_type(lt).dtype)}
        if blank is not None:
            feed["blank_index"] = np.full(blank[2], k % 4, element_type(blank[1]).dtype)
        _compare(_model([3, 6, 4], dt, lt, blank, merge, ct, st_), feed)


@pytest.mark.oracle
@given(st.data())
def test_oracle_random(data):
    dt = data.draw(st.sampled_from(FLOATS), label="data type")
    lt = data.draw(st.sampled_from(["i32", "i64"]), label="sequence_length type")
    ct = data.draw(st.sampled_from(["i32", "i64"]), label="classes_index_type")
    st_ = data.draw(st.sampled_from(["i32", "i64"]), label="sequence_length_type")
    merge = data.draw(st.booleans(), label="merge_repeated")
    n = data.draw(st.integers(1, 4), label="N")
    # T = 0: the CPU plugin skips the layer and leaves the lengths uninitialised.
    t = data.draw(st.integers(1, 7), label="T")
    c = data.draw(st.integers(1, 6), label="C")
    # Multiples of 1/2 in [-2, 2]: exact in every float type, and full of ties.
    x = np.array(data.draw(st.lists(st.integers(-4, 4), min_size=n * t * c, max_size=n * t * c)),
                 np.float64).reshape(n, t, c) / 2
    x = x.astype(element_type(dt).dtype)
    lengths = np.array(data.draw(st.lists(st.integers(0, t), min_size=n, max_size=n)),
                       element_type(lt).dtype)
    kind = data.draw(st.sampled_from(["none", "param", "const"]), label="blank")
    feed = {"data": x, "sequence_length": lengths}
    blank = None
    if kind != "none":
        bt = data.draw(st.sampled_from(INTEGERS), label="blank type")
        lo = -2 if bt.startswith("i") else 0      # -1 and C+1 match nothing in both
        value = np.full(data.draw(st.sampled_from([(), (1,)]), label="blank shape"),
                        data.draw(st.integers(lo, c + 1), label="blank value"),
                        element_type(bt).dtype)
        if kind == "param":
            blank = ("param", bt, list(value.shape))
            feed["blank_index"] = value
        else:
            blank = ("const", value)
    got = _compare(_model([n, t, c], dt, lt, blank, merge, ct, st_), feed)
    bvalue = c - 1 if blank is None else int((feed.get("blank_index", value)).reshape(-1)[0])
    want = reference(x, lengths, bvalue, merge)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
