"""Shape ops: ShapeOf-1/3, Reshape-1, Squeeze-1, Unsqueeze-1, Range-4, Broadcast-1/3, Tile-1,
ConvertLike-1 -- differential tests against OpenVINO, partial-value inference, error rules."""
import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import irrun
from irrun.errors import IrrunError, ModelError, OpError, ResourceError
from irrun.ir.shapes import DYNAMIC, Dim, TensorSpec, shape_of
from irrun.ops.shape import Reshape1, Squeeze1, reshape_dims

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset1 as o1  # noqa: E402
import openvino.opset3 as o3  # noqa: E402
from openvino.opset4.ops import range as range4  # noqa: E402  (opset4.range is Range-1)
import openvino.opset8 as o8  # noqa: E402

from oracle import NP_TYPE, OV_TYPE, i64, param, sample  # noqa: E402

DTYPES = ["f32", "f16", "i32", "i64", "u8", "boolean"]

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)


def check(tmp_path, results, params, feed):
    model = ov.Model(results, params, "t")
    return oracle.compare(model, feed, tmpdir=tmp_path)


def patch_const(xml, old, new):
    """Rewrite an i64 Const's bytes in the .bin: OpenVINO refuses to build invalid models."""
    bin_path = xml[:-4] + ".bin"
    data = open(bin_path, "rb").read()
    old, new = np.array(old, np.int64).tobytes(), np.array(new, np.int64).tobytes()
    assert data.count(old) == 1
    open(bin_path, "wb").write(data.replace(old, new))


def read(tmp_path, results, params):
    xml = oracle.save(ov.Model(results, params, "t"), tmp_path)
    return xml, irrun.read_model(xml)


# ---------------------------------------------------------------- ShapeOf


@pytest.mark.oracle
@given(shape=shapes, dtype=st.sampled_from(DTYPES), version=st.sampled_from(["1", "i32", "i64"]),
       dynamic=st.booleans())
def test_shapeof_matches_openvino(tmp_path_factory, shape, dtype, version, dynamic):
    p = param(shape, dtype, dynamic=dynamic)
    node = o1.shape_of(p) if version == "1" else o3.shape_of(p, version)
    check(tmp_path_factory.mktemp("s"), [node], [p], {"x": sample(shape, dtype, 0)})


# ---------------------------------------------------------------- Reshape


@st.composite
def reshape_cases(draw):
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    total = math.prod(shape)
    factors = []
    n, f = total, 2
    while n > 1:
        while n % f == 0:
            factors.append(f)
            n //= f
        f += 1
    rank = draw(st.integers(1, 4))
    target = [1] * rank
    for f in factors:
        target[draw(st.integers(0, rank - 1))] *= f
    special_zero = draw(st.booleans())
    pattern = list(target)
    if special_zero:
        for i in range(min(len(shape), rank)):
            if shape[i] == target[i] and draw(st.booleans()):
                pattern[i] = 0
    if draw(st.booleans()):
        pattern[draw(st.integers(0, rank - 1))] = -1
    return tuple(shape), pattern, special_zero


@pytest.mark.oracle
@given(case=reshape_cases(), dtype=st.sampled_from(DTYPES), dynamic=st.booleans())
def test_reshape_matches_openvino(tmp_path_factory, case, dtype, dynamic):
    shape, pattern, special_zero = case
    p = param(shape, dtype, dynamic=dynamic)
    node = o1.reshape(p, i64(pattern), special_zero)
    check(tmp_path_factory.mktemp("r"), [node], [p], {"x": sample(shape, dtype, 1)})


def test_reshape_bad_target_names_both_shapes(tmp_path):
    p = param((2, 3), "f32")
    xml = oracle.save(ov.Model([o1.reshape(p, i64([3, 2]), False)], [p]), tmp_path)
    patch_const(xml, [3, 2], [4, 2])
    with pytest.raises(ModelError) as e:
        irrun.read_model(xml)
    assert "[2, 3]" in str(e.value) or "[2,3]" in str(e.value)
    assert "[4, 2]" in str(e.value) or "[4,2]" in str(e.value)


def test_reshape_bad_target_at_run_time_names_both_shapes(tmp_path):
    p = param((2, 3), "f32", dynamic=True)
    _, m = read(tmp_path, [o1.reshape(p, i64([4, -1]), False)], [p])
    with pytest.raises(IrrunError) as e:
        m.infer({"x": np.zeros((5, 3), np.float32)})
    assert "[5, 3]" in str(e.value) and "[4, -1]" in str(e.value)


def test_reshape_pattern_errors():
    x = TensorSpec.make("f32", [2, 3])
    for pattern, words in (([-1, -1], "more than one -1"), ([2, -2], "-2"),
                           ([0, 0, 0], "rank 2")):
        with pytest.raises(irrun.errors.ShapeError, match=words):
            Reshape1.infer(type("A", (), {"special_zero": True}),
                           x, TensorSpec.of_value(np.array(pattern), "i64"))


def test_reshape_dims_with_dynamic_input():
    d = shape_of
    assert reshape_dims(d([None, 3, 4]), (Dim.of(0), Dim(-1, -1)), True) == d([None, 12])
    assert reshape_dims(d([None, 3, 4]), (Dim(-1, -1), Dim.of(12)), False) == d([None, 12])
    assert reshape_dims((Dim(2, 5), Dim.of(3), Dim.of(4)), (Dim(-1, -1), Dim.of(12)), False) \
        == (Dim(2, 5), Dim.of(12))
    assert reshape_dims((Dim(2, 5), Dim.of(3), Dim.of(4)), (Dim(-1, -1),), False) == (Dim(24, 60),)
    # -1 divided by a dynamic dim: unknown, never a wrong static value.
    assert reshape_dims(d([None, 3, 4]), (DYNAMIC, Dim(-1, -1)), False) == d([None, None])
    # The copied dim cancels, so the rest must divide exactly even with a dynamic batch.
    assert reshape_dims(d([None, 3, 4]), (Dim.of(0), Dim.of(6), Dim(-1, -1)), True) == \
        d([None, 6, 2])
    with pytest.raises(irrun.errors.ShapeError, match="do not divide"):
        reshape_dims(d([None, 3, 4]), (Dim.of(0), Dim.of(5), Dim(-1, -1)), True)
    # Without special_zero, 0 is a real zero.
    assert reshape_dims(d([0, 3]), d([0, 5]), False) == d([0, 5])


# ---------------------------------------------------------------- value propagation


def test_shapeof_gather_concat_reshape_chain_with_dynamic_batch(tmp_path):
    x = param((2, 3, 4), "f32", dynamic=False)
    x = o8.parameter([-1, 3, 4], ov.Type.f32, name="x")
    shape = o3.shape_of(x)
    tail = o8.gather(shape, i64([1, 2]), i64(0))
    batch = o8.gather(shape, i64(0), i64(0))                       # a scalar
    flat = o1.reshape(x, o8.concat([o8.unsqueeze(batch, i64(0)), i64([-1])], 0), False)
    same = o1.reshape(x, o8.concat([i64([-1]), tail], 0), False)
    # Convert + StridedSlice + Squeeze on the shape, then Reshape [3*?, 4].
    sliced = o8.strided_slice(o8.convert(shape, "i32"), i64([2]), i64([3]), i64([1]), [0], [0])
    last = o8.squeeze(sliced, i64([0]))
    rows = o1.reshape(x, o8.concat([o8.unsqueeze(o8.convert(last, "i64"), i64(0)), i64([-1])], 0),
                      False)
    sl = o8.slice(shape, i64([1]), i64([3]), i64([1]))
    back = o1.reshape(x, o8.concat([i64([-1]), sl], 0), False)
    xml, m = read(tmp_path, [flat, same, rows, back], [x])
    # [batch, -1]: -1 is 12, or 0 when the batch is 0 (then the pattern's other dims hold
    # no elements), so 0..12; x.shape[2] = 4 and the other dims are exact.
    assert [o.shape for o in m.outputs] == [(DYNAMIC, Dim(0, 12)), shape_of([None, 3, 4]),
                                            shape_of([4, None]), shape_of([None, 3, 4])]
    feed = {"x": sample((5, 3, 4), "f32", 3)}
    for got, want in zip(oracle.irrun_run(xml, feed), oracle.ov_run(xml, feed)):
        oracle.assert_same(got, want)
    # A zero batch runs and agrees with what inference promised.
    shapes = [a.shape for a in oracle.irrun_run(xml, {"x": np.zeros((0, 3, 4), np.float32)})]
    assert shapes == [(0, 0), (0, 3, 4), (4, 0), (0, 3, 4)]


def test_reshape_special_zero_cancels_copied_dims_like_openvino(tmp_path):
    # OpenVINO: [0, -1] with special_zero on [0, 3, 4] gives [0, 12] (the copied 0 is not
    # part of the division); inference says [?, 12] and the run agrees.
    x = o8.parameter([-1, 3, 4], ov.Type.f32, name="x")
    q = o8.parameter([2], ov.Type.i64, name="p")
    xml, m = read(tmp_path, [o1.reshape(x, i64([0, -1]), True), o1.reshape(x, q, True)], [x, q])
    assert m.outputs[0].shape == shape_of([None, 12])
    feed = {"x": np.zeros((0, 3, 4), np.float32), "p": np.array([0, -1])}
    for got, want in zip(oracle.irrun_run(xml, feed), oracle.ov_run(xml, feed)):
        oracle.assert_same(got, want)


def test_partial_values_reach_broadcast_tile_range(tmp_path):
    x = o8.parameter([-1, 3], ov.Type.f32, name="x")
    shape = o3.shape_of(x)
    three = o8.gather(shape, i64([1]), i64(0))
    b = o3.broadcast(o8.constant(np.float32(1.0)), o8.concat([three, i64([2])], 0))
    t = o1.tile(o8.constant(np.zeros((1, 1), np.float32)), o8.concat([three, shape], 0))
    r = range4(i64(0), o8.gather(shape, i64(0), i64(0)), i64(1), "i64")
    _, m = read(tmp_path, [b, t, r], [x])
    assert [o.shape for o in m.outputs] == [shape_of([3, 2]), shape_of([3, None, 3]),
                                            shape_of([None])]


# ---------------------------------------------------------------- Squeeze / Unsqueeze


@st.composite
def squeeze_cases(draw):
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=5))
    ones = [i for i, d in enumerate(shape) if d == 1]
    chosen = draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    axes = [a - len(shape) if draw(st.booleans()) else a for a in chosen]
    return tuple(shape), axes


@pytest.mark.oracle
@given(case=squeeze_cases(), dtype=st.sampled_from(DTYPES))
def test_squeeze_matches_openvino(tmp_path_factory, case, dtype):
    shape, axes = case
    p = param(shape, dtype)
    node = o1.squeeze(p, i64(axes))     # empty axes squeeze every 1
    check(tmp_path_factory.mktemp("q"), [node], [p], {"x": sample(shape, dtype, 2)})


def test_unsqueeze_repeats_like_openvino():
    from irrun.ops.shape import Unsqueeze1
    x = np.zeros((2, 3))
    for axes, shape in (([0, 0], (1, 2, 3)), ([-1, 3], (2, 3, 1)), ([-1, 0], (1, 2, 3, 1))):
        assert Unsqueeze1.run(None, x, np.array(axes))[0].shape == shape
        spec = Unsqueeze1.infer(None, TensorSpec.make("f32", [2, 3]), TensorSpec.of_value(
            np.array(axes), "i64"))[0]
        assert spec.shape == shape_of(shape)


def test_squeeze_rules():
    x = TensorSpec.make("f32", [1, 3, None])
    # Without axes a dynamic dim that may be 1 makes the rank dynamic (spec note).
    assert Squeeze1.infer(None, x)[0].shape is None
    assert Squeeze1.infer(None, TensorSpec.make("f32", [1, 3, Dim(2, 4)]))[0].shape == \
        (Dim.of(3), Dim(2, 4))
    axes = TensorSpec.of_value(np.array([0, 2]), "i64")
    assert Squeeze1.infer(None, x, axes)[0].shape == shape_of([3])
    # A named non-1 dim is kept (spec since 2024.3), like OpenVINO does.
    assert Squeeze1.run(None, np.zeros((1, 3)), np.array([1]))[0].shape == (1, 3)
    assert Squeeze1.run(None, np.zeros((1, 3, 1)))[0].shape == (3,)
    with pytest.raises(OpError, match="out of range"):
        Squeeze1.run(None, np.zeros((1, 3)), np.array([2]))


def test_squeeze_of_a_static_non_1_dim_is_kept_with_a_warning(tmp_path):
    p = param((2, 3, 1), "f32")
    xml, m = read(tmp_path, [o1.squeeze(p, i64([1, 2]))], [p])
    assert m.outputs[0].shape == shape_of([2, 3])
    warnings = [d for d in irrun.validate(xml) if d.severity == "warning"]
    assert any("axis 1 names dim 1 = 3, which is not 1" in d.message for d in warnings)
    check(tmp_path, [o1.squeeze(p, i64([1, 2]))], [p], {"x": sample((2, 3, 1), "f32", 9)})


def test_squeeze_of_a_dynamic_dim_that_is_not_1_fails_at_run_time(tmp_path):
    p = o8.parameter([-1, 3], ov.Type.f32, name="x")
    _, m = read(tmp_path, [o1.squeeze(p, i64([0]))], [p])
    assert m.outputs[0].shape == shape_of([3])
    assert m.infer({"x": np.ones((1, 3), np.float32)})[m.outputs[0].name].shape == (3,)
    with pytest.raises(OpError, match=r"\[2, 3\]"):
        m.infer({"x": np.ones((2, 3), np.float32)})


@st.composite
def unsqueeze_cases(draw):
    shape = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    k = draw(st.integers(1, 3))
    out_rank = len(shape) + k
    axes = draw(st.lists(st.integers(0, out_rank - 1), min_size=k, max_size=k, unique=True))
    axes = [a - out_rank if draw(st.booleans()) else a for a in axes]
    if draw(st.booleans()):
        axes.append(axes[0])        # a repeated axis counts once
    return tuple(shape), axes


@pytest.mark.oracle
@given(case=unsqueeze_cases(), dtype=st.sampled_from(DTYPES), dynamic=st.booleans())
def test_unsqueeze_matches_openvino(tmp_path_factory, case, dtype, dynamic):
    shape, axes = case
    p = param(shape, dtype, dynamic=dynamic)
    check(tmp_path_factory.mktemp("u"), [o1.unsqueeze(p, i64(axes))], [p],
          {"x": sample(shape, dtype, 3)})


# ---------------------------------------------------------------- Range


@pytest.mark.oracle
@given(start=st.integers(-20, 20), stop=st.integers(-20, 20), step=st.integers(-5, 5).filter(bool),
       in_type=st.sampled_from(["i32", "i64"]), out_type=st.sampled_from(["i32", "i64", "f32"]))
def test_range_integer_matches_openvino(tmp_path_factory, start, stop, step, in_type, out_type):
    # OpenVINO's CPU plugin counts |stop - start| / |step| elements when step points away
    # from stop (0..-5 step 1 gives [0..4]); the spec and OpenVINO's shape inference say
    # empty. Compare inside the agreed region; test_range_spec_examples covers the rest.
    assume((stop - start) * step >= 0)
    names = ("start", "stop", "step")
    ps = [o8.parameter([], OV_TYPE[in_type], name=n) for n in names]
    feed = {n: np.array(v, NP_TYPE[in_type]) for n, v in zip(names, (start, stop, step))}
    check(tmp_path_factory.mktemp("g"), [range4(*ps, out_type)], ps, feed)


@pytest.mark.oracle
@given(start=st.floats(-10, 10, width=32), length=st.floats(-10, 10, width=32),
       step=st.sampled_from([0.25, 0.5, 1.5, -0.5, -1.25, 3.0]))
def test_range_float_matches_openvino(tmp_path_factory, start, length, step):
    names = ("start", "stop", "step")
    ps = [o8.parameter([], ov.Type.f32, name=n) for n in names]
    stop = np.float32(start + length)
    assume(length * step >= 0)     # see test_range_integer_matches_openvino
    # Stay off the boundary where (stop - start) / step is an integer up to rounding.
    n = (float(stop) - float(np.float32(start))) / step
    assume(abs(n - round(n)) > 1e-3)
    feed = {"start": np.array(start, np.float32), "stop": np.array(stop, np.float32),
            "step": np.array(step, np.float32)}
    check(tmp_path_factory.mktemp("g"), [range4(*ps, "f32")], ps, feed)


@pytest.mark.oracle
@given(start=st.integers(-20, 20), stop=st.integers(-20, 20), step=st.integers(-5, 5).filter(bool),
       dtype=st.sampled_from(["i32", "i64", "f32"]))
def test_range1_matches_openvino(tmp_path_factory, start, stop, step, dtype):
    # openvino.opset4.range (without .ops) builds Range-1: the output takes the inputs' type.
    assume((stop - start) * step >= 0)     # see test_range_integer_matches_openvino
    names = ("start", "stop", "step")
    ps = [o8.parameter([], OV_TYPE[dtype], name=n) for n in names]
    r = ov.opset4.range(*ps)
    assert r.get_type_info().version_id == "opset1"
    feed = {n: np.array(v, NP_TYPE[dtype]) for n, v in zip(names, (start, stop, step))}
    check(tmp_path_factory.mktemp("g"), [r], ps, feed)


def test_range1_needs_one_element_type(tmp_path):
    r = ov.opset4.range(o8.constant(np.int32(0)), o8.constant(np.int32(4)), o8.constant(np.int32(1)))
    xml, m = read(tmp_path, [r], [])
    np.testing.assert_array_equal(list(m.infer({}).values())[0], [0, 1, 2, 3])
    text = open(xml).read()
    assert 'type="Range" version="opset1"' in text
    from irrun.ops.shape import Range1
    from irrun.ir.shapes import TensorSpec
    with pytest.raises(irrun.errors.ShapeError, match="same element type, got i32, i64 and i32"):
        Range1.infer(None, TensorSpec.make("i32", []), TensorSpec.make("i64", []),
                     TensorSpec.make("i32", []))


def test_range_spec_examples(tmp_path):
    r = range4(i64(2), i64(23), i64(3), "i32")
    r2 = range4(i64(23), i64(2), i64(-3), "i32")
    r3 = range4(o8.constant(np.float32(1)), o8.constant(np.float32(2.5)),
                  o8.constant(np.float32(0.5)), "f32")
    xml, m = read(tmp_path, [r, r2, r3], [])
    out = oracle.irrun_run(xml, {})
    assert out[0].tolist() == [2, 5, 8, 11, 14, 17, 20]
    assert out[1].tolist() == [23, 20, 17, 14, 11, 8, 5]
    assert out[2].tolist() == [1.0, 1.5, 2.0] and out[2].dtype == np.float32
    # A step pointing away from stop gives an empty range: max(ceil((stop-start)/step), 0).
    xml, m = read(tmp_path, [range4(i64(0), i64(-5), i64(1), "i32")], [])
    assert m.outputs[0].shape == shape_of([0])
    assert oracle.irrun_run(xml, {})[0].shape == (0,)


def test_range_refuses_an_absurd_output_before_allocating(tmp_path):
    ps = [o8.parameter([], ov.Type.i64, name=n) for n in ("start", "stop", "step")]
    _, m = read(tmp_path, [range4(*ps, "i64")], ps)
    feed = {"start": np.array(0), "stop": np.array(2 ** 62), "step": np.array(1)}
    with pytest.raises(ResourceError, match="bytes"):
        m.infer(feed)
    with pytest.raises(OpError, match="step"):
        m.infer({"start": np.array(0), "stop": np.array(5), "step": np.array(0)})


def test_range_absurd_constant_is_a_load_error(tmp_path):
    with pytest.raises(ModelError, match="bytes"):
        read(tmp_path, [range4(i64(0), i64(2 ** 62), i64(1), "i64")], [])


# ---------------------------------------------------------------- Broadcast


@st.composite
def broadcast_cases(draw):
    mode = draw(st.sampled_from(["numpy", "explicit", "bidirectional"]))
    shape = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    extra = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    if mode == "numpy":
        target = extra + [d if d != 1 else draw(st.integers(1, 3)) for d in shape]
        return mode, tuple(shape), target, None
    if mode == "bidirectional":
        # Either side may have the larger rank and either side may hold the 1s.
        full = extra + [d for d in shape]
        target = [draw(st.sampled_from([1, d])) if d != 1 else draw(st.integers(1, 3))
                  for d in full]
        target = target[draw(st.integers(0, len(extra))):]
        return mode, tuple(shape), target, None
    rank = len(shape) + len(extra)
    axes = sorted(draw(st.lists(st.integers(0, max(rank - 1, 0)), min_size=len(shape),
                                max_size=len(shape), unique=True))) if rank else []
    target = [draw(st.integers(1, 3)) for _ in range(rank)]
    for a, d in zip(axes, shape):
        if d != 1:
            target[a] = d
    return mode, tuple(shape), target, axes


@pytest.mark.oracle
@given(case=broadcast_cases(), dtype=st.sampled_from(DTYPES), v1=st.booleans())
def test_broadcast_matches_openvino(tmp_path_factory, case, dtype, v1):
    mode, shape, target, axes = case
    assume(target)      # OpenVINO's CPU plugin crashes (SIGSEGV) broadcasting to shape []
    if v1 and mode == "bidirectional":
        v1 = False
    p = param(shape, dtype)
    mapping = None if axes is None else i64(axes)
    if v1:
        node = o1.broadcast(p, i64(target), mapping, mode.upper())
    else:
        node = o3.broadcast(p, i64(target), mapping, mode.upper())
    check(tmp_path_factory.mktemp("b"), [node], [p], {"x": sample(shape, dtype, 4)})


def test_broadcast_errors(tmp_path):
    # OpenVINO refuses to build [3] -> [2, 1], so write [2, 3] and rewrite the Const's bytes.
    p = param((3,), "f32")
    xml = oracle.save(ov.Model([o3.broadcast(p, i64([2, 3]))], [p]), tmp_path)
    patch_const(xml, [2, 3], [2, 1])
    with pytest.raises(ModelError, match="cannot be broadcast"):
        irrun.read_model(xml)
    q = o8.parameter([-1], ov.Type.f32, name="x")
    _, m = read(tmp_path, [o3.broadcast(q, i64([2, 4]))], [q])
    with pytest.raises(IrrunError, match=r"\[3\].*\[2, ?4\]"):
        m.infer({"x": np.zeros(3, np.float32)})


# ---------------------------------------------------------------- Tile


@pytest.mark.oracle
@given(shape=shapes, reps=st.lists(st.integers(0, 3), min_size=1, max_size=5),
       dtype=st.sampled_from(DTYPES), dynamic=st.booleans())
def test_tile_matches_openvino(tmp_path_factory, shape, reps, dtype, dynamic):
    p = param(shape, dtype, dynamic=dynamic)
    feed = {"x": sample(shape, dtype, 5)}
    if len(reps) != len(shape):
        # OpenVINO's CPU plugin tiles wrongly when the repeats' length differs from the rank
        # and three or more axes repeat ([2,2,2,2] by [2,2,2]). The spec pads the shorter
        # of the two with leading 1s: compare irrun on the short form with OpenVINO on the
        # padded one.
        rank = max(len(reps), len(shape))
        full = (1,) * (rank - len(shape)) + shape
        padded = [1] * (rank - len(reps)) + reps
        q = param(full, dtype, dynamic=dynamic)
        d = tmp_path_factory.mktemp("t")
        mine = oracle.save(ov.Model([o1.tile(p, i64(reps))], [p]), d, name="short")
        theirs = oracle.save(ov.Model([o1.tile(q, i64(padded))], [q]), d, name="padded")
        oracle.assert_same(oracle.irrun_run(mine, feed)[0],
                           oracle.ov_run(theirs, {"x": feed["x"].reshape(full)})[0])
        return
    check(tmp_path_factory.mktemp("t"), [o1.tile(p, i64(reps))], [p], feed)


def test_tile_negative_repeats_fail(tmp_path):
    p = param((2,), "f32")
    q = o8.parameter([1], ov.Type.i64, name="r")
    _, m = read(tmp_path, [o1.tile(p, q)], [p, q])
    with pytest.raises(IrrunError, match="repeats"):
        m.infer({"x": np.zeros(2, np.float32), "r": np.array([-1])})


# ---------------------------------------------------------------- ConvertLike


@pytest.mark.oracle
@given(shape=shapes, src=st.sampled_from(DTYPES), dst=st.sampled_from(DTYPES))
def test_convertlike_matches_openvino(tmp_path_factory, shape, src, dst):
    p = param(shape, src)
    like = param((2,), dst, name="like")
    x = sample(shape, src, 6)
    if src in ("f32", "f16") and dst in ("u8", "i32", "i64"):
        x = np.abs(x) * 50      # inside the destination's range: no saturation question
    if src in ("i32", "i64") and dst == "u8":
        x = np.abs(x) % 256
    check(tmp_path_factory.mktemp("c"), [o1.convert_like(p, like)], [p, like],
          {"x": x.astype(NP_TYPE[src]), "like": sample((2,), dst, 7)})


@st.composite
def shape_chains(draw):
    """x with some dynamic dims -> ShapeOf -> Gather(some dims) -> Concat with constants ->
    Reshape: the pattern flatten/view code converters emit."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    dynamic = [draw(st.booleans()) for _ in shape]
    keep = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape),
                         unique=True))
    rest = math.prod(shape) // math.prod(shape[i] for i in keep)
    tail = draw(st.sampled_from([[-1], [rest]] if rest > 1 else [[-1], []]))
    head = draw(st.booleans())
    return tuple(shape), dynamic, keep, tail, head


def assert_within_openvino(got, expected) -> None:
    """Every dim OpenVINO knows, irrun knows; irrun may know more (an interval, or a dim
    OpenVINO's symbols miss), but never something outside OpenVINO's interval."""
    assert got is not None and len(got) == len(expected), f"irrun {got} vs OpenVINO {expected}"
    for g, e in zip(got, expected):
        lo, hi = e.get_min_length(), e.get_max_length()
        assert g.lo >= lo and (hi == -1 or (g.hi is not None and g.hi <= hi)), \
            f"irrun {got} vs OpenVINO {expected}"


@pytest.mark.oracle
@given(case=shape_chains())
def test_partial_value_inference_agrees_with_openvino(tmp_path_factory, case):
    shape, dynamic, keep, tail, head = case
    x = o8.parameter([-1 if d else n for n, d in zip(shape, dynamic)], ov.Type.f32, name="x")
    parts = [o8.gather(o3.shape_of(x), i64(keep), i64(0))]
    if tail:
        parts = [i64(tail)] + parts if head else parts + [i64(tail)]
    node = o1.reshape(x, o8.concat(parts, 0) if len(parts) > 1 else parts[0], False)
    expected = node.get_output_partial_shape(0)
    xml, m = read(tmp_path_factory.mktemp("p"), [node], [x])
    assert_within_openvino(m.outputs[0].shape, expected)
    feed = {"x": sample(shape, "f32", 8)}
    for g, e in zip(oracle.irrun_run(xml, feed), oracle.ov_run(xml, feed)):
        oracle.assert_same(g, e)


@st.composite
def value_chains(draw):
    """ShapeOf(x) -> a random pick of its elements (Gather, Slice, StridedSlice, Squeeze/
    Unsqueeze, Convert, Concat with constants) -> a consumer that turns values into a shape."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    dynamic = [draw(st.booleans()) for _ in shape]
    steps = draw(st.lists(st.sampled_from(["gather", "slice", "strided", "squeeze", "convert",
                                           "concat"]), max_size=4))
    picks = [draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=3))
             for _ in steps]
    consumer = draw(st.sampled_from(["broadcast", "tile", "range"]))
    return tuple(shape), dynamic, list(zip(steps, picks)), consumer, draw(st.booleans())


def _apply_step(node, n, step, pick):
    """node holds n elements; return (new node, new count)."""
    if step == "gather":
        idx = [p % n for p in pick]
        return o8.gather(node, i64(idx), i64(0)), len(idx)
    if step == "slice":
        start, stop = sorted(p % n for p in pick[:2]) if len(pick) > 1 else (0, n)
        stop = max(stop, start + 1)
        return o8.slice(node, i64([start]), i64([stop]), i64([1])), stop - start
    if step == "strided":
        start = pick[0] % n
        return o8.strided_slice(node, i64([start]), i64([0]), i64([1]), [0], [1]), n - start
    if step == "squeeze":
        single = o8.gather(node, i64(pick[0] % n), i64(0))       # a scalar
        return o8.unsqueeze(o8.squeeze(o8.unsqueeze(single, i64([0])), i64([0])), i64([0])), 1
    if step == "convert":
        return o8.convert(o8.convert(node, "i32"), "i64"), n
    return o8.concat([node, i64([abs(p) % 3 + 1 for p in pick])], 0), n + len(pick)


@pytest.mark.oracle
@given(case=value_chains())
def test_partial_values_through_chains_agree_with_openvino(tmp_path_factory, case):
    shape, dynamic, steps, consumer, v3 = case
    x = o8.parameter([-1 if d else n for n, d in zip(shape, dynamic)], ov.Type.f32, name="x")
    node, n = (o3.shape_of(x, "i64") if v3 else o1.shape_of(x)), len(shape)
    for step, pick in steps:
        node, n = _apply_step(node, n, step, pick)
    if consumer == "broadcast":
        out = o3.broadcast(o8.constant(np.float32(1.5)), node)
    elif consumer == "tile":
        out = o1.tile(o8.constant(np.ones([1] * n, np.float32)), node)
    else:
        out = range4(i64(0), o8.gather(node, i64(0), i64(0)), i64(1), "i64")
    expected = out.get_output_partial_shape(0)
    xml, m = read(tmp_path_factory.mktemp("v"), [out], [x])
    got = m.outputs[0].shape
    assert_within_openvino(got, expected)
    for g, e in zip(got, expected):
        if e.is_static:
            assert g.is_static
    feed = {"x": sample(shape, "f32", 10)}
    for g, e in zip(oracle.irrun_run(xml, feed), oracle.ov_run(xml, feed)):
        oracle.assert_same(g, e)


def _const(values):
    return TensorSpec.of_value(np.array(values, np.int64), "i64")


@pytest.mark.parametrize("mode,data,target,axes,expected", [
    ("numpy", [16, 1, 1], [1, 16, 50, 50], None, [1, 16, 50, 50]),
    ("explicit", [16], [1, 16, 50, 50], [1], [1, 16, 50, 50]),
    ("explicit", [50, 50], [1, 50, 50, 16], [1, 2], [1, 50, 50, 16]),
    ("bidirectional", [16, 1, 1], [1, 1, 50, 50], None, [1, 16, 50, 50]),
])
def test_broadcast3_spec_examples(mode, data, target, axes, expected):
    from irrun.ops.shape import Broadcast, Broadcast3Attrs
    attrs = Broadcast3Attrs(mode)
    mapping = None if axes is None else _const(axes)
    (spec,) = Broadcast.infer(attrs, TensorSpec.make("f32", data), _const(target), mapping)
    assert spec.shape == shape_of(expected)
    x = np.arange(math.prod(data), dtype=np.float32).reshape(data)
    (out,) = Broadcast.run(attrs, x, np.array(target), None if axes is None else np.array(axes))
    assert out.shape == tuple(expected)


@pytest.mark.parametrize("data,axes,expected", [([1, 3, 1, 2], [0, 2], [3, 2]), ([1], [0], [])])
def test_squeeze_spec_examples(data, axes, expected):
    (spec,) = Squeeze1.infer(None, TensorSpec.make("f32", data), _const(axes))
    assert spec.shape == shape_of(expected)
    assert Squeeze1.run(None, np.zeros(data), np.array(axes))[0].shape == tuple(expected)

