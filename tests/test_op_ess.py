"""EmbeddingSegmentsSum-3: the spec example, every rule of semantics.md, shape inference with
OpenVINO's messages, the memory promise, and differential tests against OpenVINO's CPU plugin."""
from __future__ import annotations

import os
import tempfile
import tracemalloc

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import irrun
import irrun.ops.sparse as sparse
from irrun.ops.segment_sum_loop import sum_bags
from irrun.ui.cli import cli
from irrun.errors import OpError, ShapeError, UnsupportedError
from irrun.ir.etypes import element_type
from irrun.opkit.problems import collect_warnings, stop_collecting
from irrun.opkit import balanced_ranges
from irrun.ops.sparse import EmbeddingSegmentsSum3
from irrun.ir.shapes import DYNAMIC, Dim, TensorSpec
from shipped import run_cli

MODEL_DIR = os.path.join(os.path.dirname(__file__), "..", "models", "ess_spec")

SPEC_TABLE = np.array([[-0.2, -0.6], [-0.1, -0.4], [-1.9, -1.8], [-1., 1.5], [0.8, -0.7]], np.float32)
SPEC_EXPECTED = [[-1.05, -1.2], [-0.2, -0.6], [-0.1, 0.4]]

FLOATS = ["f64", "f32", "f16", "bf16"]
INTEGERS = ["i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8"]


def run(table, indices, segment_ids, num_segments, default_index=None, weights=None, itype=None):
    """The kernel on plain arrays; index inputs get `itype` (default: the indices' dtype)."""
    indices = np.asarray(indices, dtype=itype or np.int32)
    it = indices.dtype
    args = [np.asarray(table), indices, np.asarray(segment_ids, dtype=it), np.array(num_segments, dtype=it)]
    if default_index is not None:
        args.append(np.array(default_index, dtype=it))
    if weights is not None:
        args.append(np.asarray(weights, dtype=args[0].dtype))
    (out,) = EmbeddingSegmentsSum3.run(None, *args)
    return out


def reference(table, indices, segment_ids, num_segments, default_index=None, weights=None):
    """Scatter-add one lookup at a time: exact Python integers wrapped to the table's width
    for integer tables, float64 for float tables (the tests compare with a tolerance)."""
    table = np.asarray(table)
    rest = table.shape[1:]
    is_int = table.dtype.kind in "iub"
    acc = np.zeros((num_segments, *rest), dtype=object if is_int else np.float64)
    for i, (k, s) in enumerate(zip(indices, segment_ids)):     # a test oracle, not a kernel
        row = np.asarray(table[k])
        # Python ints for integer tables: exact, wrapped at the end.
        row = np.array(row.tolist(), dtype=object).reshape(row.shape) if is_int else \
            row.astype(np.float64)
        w = 1 if weights is None else weights[i]
        w = int(w) if is_int else float(w)
        acc[s] = acc[s] + row * w
    empty = np.ones(num_segments, dtype=bool)
    empty[np.asarray(segment_ids, dtype=np.int64)] = False
    if default_index is not None:
        acc[empty] = table[default_index].astype(acc.dtype)
    if not is_int:
        return acc
    if table.dtype == np.bool_:
        return (acc != 0).astype(np.bool_)
    bits = table.dtype.itemsize * 8
    flat = [int(v) % (1 << bits) for v in acc.ravel()]
    return np.array(flat, dtype=np.uint64).reshape(acc.shape).astype(table.dtype)


def assert_close(got, expected, etype):
    assert got.dtype == element_type(etype).dtype
    assert got.shape == expected.shape
    if element_type(etype).is_float:
        rtol = {"f16": 2e-3, "bf16": 1.6e-2}.get(etype, 1e-5)
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def spec(etype, shape, value=None):
    return TensorSpec.make(etype, shape, None if value is None else np.asarray(value))


def infer(*specs):
    sink: list = []
    token = collect_warnings(sink)
    try:
        out = EmbeddingSegmentsSum3.infer(None, *specs)
    finally:
        stop_collecting(token)
    return out, [m for _, m in sink]


def spec_inputs(itype="i32", table="f32", num_segments=None):
    return [spec(table, [5, 2]), spec(itype, [4]), spec(itype, [4]),
            spec(itype, [], num_segments)]


# ------------------------------------------------------------------ the spec example, verbatim

def test_spec_example():
    out = run(SPEC_TABLE, [0, 2, 3, 4], [0, 0, 2, 2], 3, 0, [0.5, 0.5, 0.5, 0.5])
    assert out.dtype == np.float32 and out.shape == (3, 2)
    np.testing.assert_allclose(out, SPEC_EXPECTED, rtol=1e-6)


def test_spec_example_shapes():
    (out,), _ = infer(*spec_inputs(num_segments=3), spec("i32", []), spec("f32", [4]))
    assert out.etype.name == "f32" and out.shape == (Dim.of(3), Dim.of(2))


def test_spec_model_runs_through_cli(tmp_path):
    got, expected = run_cli(MODEL_DIR, tmp_path)
    assert sorted(got) == ["out"]
    assert got["out"].dtype == expected["out"].dtype == np.float32
    np.testing.assert_allclose(got["out"], expected["out"], rtol=1e-6)
    np.testing.assert_allclose(got["out"], SPEC_EXPECTED, rtol=1e-6)


def test_spec_model_validates_clean_with_static_output():
    assert irrun.validate(os.path.join(MODEL_DIR, "model.xml")) == []
    m = irrun.read_model(os.path.join(MODEL_DIR, "model.xml"))
    assert m.outputs[0].partial_shape == "[3,2]"


# ------------------------------------------------------------------ rules (semantics.md)

def test_empty_segment_default_row_is_not_weighted():
    out = run(SPEC_TABLE, [1], [1], 3, 4, [10.0])
    np.testing.assert_allclose(out, [SPEC_TABLE[4], 10 * SPEC_TABLE[1], SPEC_TABLE[4]])


def test_empty_segments_are_zero_without_default():
    out = run(SPEC_TABLE, [0, 2, 3, 4], [0, 0, 2, 2], 4)
    np.testing.assert_allclose(out[1], [0, 0])
    np.testing.assert_allclose(out[3], [0, 0])
    np.testing.assert_allclose(out[0], SPEC_TABLE[0] + SPEC_TABLE[2], rtol=1e-6)


def test_weights_default_to_one():
    a = run(SPEC_TABLE, [0, 2, 3, 4], [0, 0, 2, 2], 3, 0)
    b = run(SPEC_TABLE, [0, 2, 3, 4], [0, 0, 2, 2], 3, 0, np.ones(4))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_unsorted_segment_ids_scatter_add(itype):
    rng = np.random.default_rng(7)
    table = rng.standard_normal((6, 3, 2)).astype(np.float32)
    idx = rng.integers(0, 6, 40)
    seg = rng.integers(0, 9, 40)
    w = rng.standard_normal(40).astype(np.float32)
    got = run(table, idx, seg, 9, 5, w, itype=itype)
    np.testing.assert_allclose(got, reference(table, idx, seg, 9, 5, w), rtol=1e-5, atol=1e-5)
    # The same lookups in sorted order give the same sums (up to summation order).
    order = np.argsort(seg, kind="stable")
    np.testing.assert_allclose(got, run(table, idx[order], seg[order], 9, 5, w[order], itype=itype),
                               rtol=1e-6, atol=1e-6)


def test_nan_stays_in_its_segment():
    table = np.array([[1, 2], [np.nan, 3], [4, 5], [np.nan, np.nan]], np.float32)
    out = run(table, [0, 1, 2, 2], [0, 0, 1, 2], 4, 3)
    assert np.isnan(out[0, 0]) and out[0, 1] == 5
    assert out[1].tolist() == [4, 5] and out[2].tolist() == [4, 5]
    assert np.isnan(out[3]).all()                         # the default row itself has NaN
    # NaN in a weight, and 0 * inf, follow IEEE arithmetic.
    out = run(np.array([[1.0], [np.inf]], np.float32), [0, 1, 0], [0, 1, 2], 3, 0,
              [np.nan, 0.0, 2.0])
    assert np.isnan(out[0, 0]) and np.isnan(out[1, 0]) and out[2, 0] == 2


@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_empty_indices(itype):
    out = run(SPEC_TABLE, [], [], 3, 1, [], itype=itype)
    np.testing.assert_array_equal(out, np.repeat(SPEC_TABLE[1:2], 3, axis=0))
    out = run(SPEC_TABLE, [], [], 2, itype=itype)
    np.testing.assert_array_equal(out, np.zeros((2, 2), np.float32))
    assert run(SPEC_TABLE, [], [], 0, 99, itype=itype).shape == (0, 2)


def test_zero_width_table():
    out = run(np.zeros((3, 0), np.float32), [0, 2], [0, 1], 2, 0)
    assert out.shape == (2, 0)


@pytest.mark.parametrize("etype", ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"])
def test_integer_tables_wrap_like_cpp(etype):
    dtype = element_type(etype).dtype
    info = np.iinfo(dtype)
    table = np.array([[info.max, info.min], [3, 1]], dtype=dtype)
    weights = np.array([1, 1, 2, 3], dtype=dtype)
    out = run(table, [0, 0, 1, 0], [0, 0, 0, 1], 2, 0, weights)
    expected = reference(table, [0, 0, 1, 0], [0, 0, 0, 1], 2, 0, weights)
    np.testing.assert_array_equal(out, expected)
    bits = 8 * dtype.itemsize
    # by hand: segment 0 is 2 * max + 6 (mod 2**bits), segment 1 is 3 * max
    assert int(out[0, 0]) % (1 << bits) == (2 * int(info.max) + 6) % (1 << bits)
    assert int(out[1, 0]) % (1 << bits) == (3 * int(info.max)) % (1 << bits)


def test_negative_integer_weights_wrap():
    table = np.array([[100, -7]], np.int8)
    out = run(table, [0, 0], [0, 0], 1, 0, np.array([-3, 1], np.int8))
    np.testing.assert_array_equal(out, reference(table, [0, 0], [0, 0], 1, 0, [-3, 1]))
    assert out.tolist() == [[56, 14]]       # -300 + 100 = -200 wraps to 56; 21 - 7 = 14


def test_boolean_table_sums_are_any():
    table = np.array([[True, False], [False, False], [True, True]])
    out = run(table, [0, 1, 1, 2], [0, 0, 1, 2], 4, 1, np.array([True, True, True, False]))
    assert out.tolist() == [[True, False], [False, False], [False, False], [False, False]]
    # 256 true terms: a count kept in a byte would wrap to 0 (false).
    out = run(table, np.zeros(256 + 512), np.repeat([0, 1], [256, 512]), 2)
    assert out.tolist() == [[True, False], [True, False]]


@pytest.mark.parametrize("etype", ["f16", "bf16"])
def test_half_tables_accumulate_in_f32_and_round_once(etype):
    dtype = element_type(etype).dtype
    big = 2048.0 if etype == "f16" else 256.0
    # Rounding at every step would give `big` (each +1 is half an ulp and rounds to even);
    # summing in f32 gives big + 4, which the type holds exactly.
    table = np.array([[big], [1.0]], dtype=dtype)
    out = run(table, [0, 1, 1, 1, 1], [0, 0, 0, 0, 0], 1)
    assert out.dtype == dtype and float(out[0, 0]) == big + 4
    # Products are formed in f32 too: 0.1 * 3 rounds once.
    w = np.array([3.0], dtype=dtype)
    out = run(np.array([[0.1]], dtype=dtype), [0], [0], 1, 0, w)
    assert out[0, 0] == dtype.type(np.float32(dtype.type(0.1)) * np.float32(3.0))


def test_f64_table_is_computed_in_f64():
    # (The CPU plugin computes f64 in f32, where 1 + 2**-40 is 1.)
    table = np.array([[1.0 + 2.0**-40]], np.float64)
    out = run(table, [0, 0], [0, 0], 1, itype=np.int64)
    assert out[0, 0] == 2.0 + 2.0**-39


def test_extra_table_dims():
    rng = np.random.default_rng(3)
    table = rng.integers(-50, 50, (4, 2, 3, 2)).astype(np.int16)
    out = run(table, [3, 1, 1], [1, 1, 2], 3, 0, np.array([2, -1, 5], np.int16))
    assert out.shape == (3, 2, 3, 2)
    np.testing.assert_array_equal(out, reference(table, [3, 1, 1], [1, 1, 2], 3, 0, [2, -1, 5]))


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("etype", FLOATS + INTEGERS + ["boolean"])
def test_every_table_type(etype, itype):
    """Each kind of table the compiled loop reads (f32/f64 as they are, f16/bf16 as bits,
    integers and booleans as unsigned ints summed in uint64), with both index types, sorted
    and unsorted ids, empty segments at the start, between and at the end, and extremes of
    the integer types."""
    rng = np.random.default_rng(len(etype) * 7 + itemsize_of(etype))
    dtype = element_type(etype).dtype
    if etype == "boolean":
        table, w = rng.integers(0, 2, (6, 3)).astype(bool), rng.integers(0, 2, 40).astype(bool)
    elif etype in FLOATS:
        table = (rng.standard_normal((6, 3)) * 4).astype(dtype)
        w = rng.standard_normal(40).astype(dtype)
    else:
        info = np.iinfo(dtype)
        table = rng.integers(info.min, info.max, (6, 3), endpoint=True, dtype=dtype)
        table[0] = [info.min, info.max, -1 if info.min else info.max]
        w = rng.integers(info.min, info.max, 40, endpoint=True, dtype=dtype)
    idx = rng.integers(0, 6, 40)
    seg = np.sort(rng.integers(2, 7, 40))
    seg[seg == 4] = 5                                  # segments 0, 1, 4 and 7 are empty
    for s in (seg, rng.permutation(seg)):
        for weights in (None, w):
            got = run(table, idx, s, 8, 1, weights, itype=itype)
            assert_close(got, reference(table, idx, s, 8, 1, weights), etype)


def itemsize_of(etype):
    return element_type(etype).dtype.itemsize


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_bits_read_exactly(dtype):
    """The compiled loop reads f16 and bf16 bits as NumPy's and ml_dtypes' float32 for every
    one of the 65536 bit patterns (subnormals, infinities, NaN payloads, -0)."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    out = np.empty((1 << 16, 1), np.float32)
    lookups = np.arange(1 << 16)
    bags = np.arange((1 << 16) + 1)                     # one lookup a bag
    assert sum_bags(np.empty(1, np.float32), out, bits.reshape(-1, 1),
                    dtype == ml_dtypes.bfloat16, lookups, bags, sparse._NO_ORDER,
                    np.ones(1, dtype).view(np.uint16), -1, False, 0, 1 << 16) == 1 << 16
    # The loop computes 0 + 1 * x in f32: so does the expectation (-0 becomes +0, a
    # signalling NaN quiet), so the two agree bit for bit.
    with np.errstate(invalid="ignore"):
        expected = np.float32(0) + np.float32(1) * bits.view(dtype).astype(np.float32)
    np.testing.assert_array_equal(out.ravel().view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_sums_round_to_half_as_numpy_does(dtype):
    """The f32 sums are written as f16 / bf16 bits by the compiled loop: the same bits as
    NumPy's and ml_dtypes' casts, for random float32 patterns (NaN, inf, huge, subnormal
    included) and for every value one ulp around each half-way point between halves."""
    rng = np.random.default_rng(9)
    halves = np.arange(1 << 16, dtype=np.uint16).view(dtype).astype(np.float32)
    halves = halves[np.isfinite(halves)]
    halfway = ((halves[:-1].astype(np.float64) + halves[1:]) / 2).astype(np.float32)
    patterns = np.concatenate([
        rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        halfway, np.nextafter(halfway, np.float32(np.inf)), np.nextafter(halfway, -np.inf),
        np.array([np.inf, -np.inf, 65504, 65519.996, 65520, 3.4e38, 1e-8, -1e-8, 0.0, -0.0],
                 np.float32),
        # signalling NaNs (a sum is quiet), a negative quiet one, the largest payload
        np.array([0x7F800001, 0xFF800100, 0xFFC00000, 0x7FFFFFFF], np.uint32).view(np.float32)])
    n = patterns.size
    out = np.empty((n, 1), np.uint16)
    lookups = np.arange(n)
    assert sum_bags(np.empty(1, np.float32), out, patterns.reshape(-1, 1),
                    dtype == ml_dtypes.bfloat16, lookups, np.arange(n + 1), sparse._NO_ORDER,
                    np.ones(1, np.float32), -1, False, 0, n) == n
    with np.errstate(invalid="ignore", over="ignore"):
        sums = np.float32(0) + np.float32(1) * patterns               # as the loop sums them
        expected = sums.astype(dtype).view(np.uint16)
    np.testing.assert_array_equal(out.ravel(), expected)


def _spans(ids, parts):
    """The lookup ranges the threads get for sorted segment ids (bags = segments)."""
    bounds = np.empty(int(ids[-1]) + 2, np.intp)
    assert sparse._segment_bounds(ids, int(ids[-1]) + 1, bounds) == -1
    return [(int(bounds[a]), int(bounds[b])) for a, b in balanced_ranges(bounds, parts)
            if bounds[b] > bounds[a]]


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
def test_segment_bounds_in_spans_agree_with_searchsorted(monkeypatch, workers):
    monkeypatch.setattr(sparse, "_workers", lambda n: workers)
    rng = np.random.default_rng(workers)
    ids = np.sort(rng.integers(0, 40, 97))
    bounds = np.empty(46, np.intp)
    assert sparse._segment_bounds(ids, 45, bounds) == -1
    np.testing.assert_array_equal(bounds, np.searchsorted(ids, np.arange(46)))
    bad = ids.copy()
    bad[[30, 70]] = [bad[29] - 1, 45]          # unsorted at 30, out of range at 70
    assert sparse._segment_bounds(bad, 45, bounds) == 30
    bad[30] = bad[29]
    assert sparse._segment_bounds(bad, 45, bounds) == 70
    assert sparse._segment_bounds(np.zeros(0, np.int64), 3, bounds) == -1
    assert bounds[:4].tolist() == [0, 0, 0, 0]


def test_spans_cut_at_segment_starts():
    ids = np.array([0, 0, 0, 0, 1, 1, 2, 5, 5, 5, 5, 5])
    assert _spans(ids, 1) == [(0, 12)]
    assert _spans(ids, 3) == [(0, 4), (4, 7), (7, 12)]
    assert _spans(np.zeros(10, np.int32), 4) == [(0, 10)]


@pytest.mark.parametrize("etype", ["f32", "bf16", "i16"])
def test_threads_agree_with_reference(monkeypatch, etype):
    monkeypatch.setattr(sparse, "_workers", lambda n: 3)
    rng = np.random.default_rng(5)
    dtype = element_type(etype).dtype
    table = rng.integers(-20, 20, (9, 2, 3)).astype(dtype)
    idx = rng.integers(0, 9, 60)
    # 3 spans of 20 sorted lookups: segments 1-3 | 8-9 | 10-11. Rows 0, 4-7 (between the
    # first two spans) and 12 have no lookups.
    seg = np.concatenate([rng.integers(1, 4, 20), rng.integers(8, 10, 20),
                          rng.integers(10, 12, 20)])
    seg[[0, 19, 20, 39, 40, 59]] = [1, 3, 8, 9, 10, 11]
    w = rng.integers(-3, 4, 60).astype(dtype)
    assert _spans(np.sort(seg), 3) == [(0, 20), (20, 40), (40, 60)]
    for s in (np.sort(seg), seg):
        assert_close(run(table, idx, s, 13, 4, w), reference(table, idx, s, 13, 4, w), etype)
        # Every output row is written, those without lookups as 0 or the default row,
        # whatever was there.
        for default in (None, 4):
            out = np.full((13, 6), 7, dtype)
            sparse._segment_sum(out, table.reshape(9, 6), idx, s, w,
                                -1 if default is None else default)
            assert_close(out.reshape(13, 2, 3), reference(table, idx, s, 13, default, w), etype)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_threads_work_in_a_forked_child(monkeypatch):
    """The thread pool belongs to the process that made it: a forked child (whose copy of
    the pool has no threads) must make its own instead of waiting forever."""
    import time
    monkeypatch.setattr(sparse, "_workers", lambda n: 2)
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    idx, seg = np.arange(6) % 6, np.array([0, 0, 1, 1, 2, 2])
    expected = reference(table, idx, seg, 3)
    assert_close(run(table, idx, seg, 3), expected, "f32")          # the parent's pool exists
    pid = os.fork()
    if pid == 0:                                                      # the child
        try:
            os._exit(0 if np.array_equal(run(table, idx, seg, 3), expected) else 1)
        except BaseException:
            os._exit(2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung in the kernel")


@pytest.mark.parametrize("etype, itype, width", [
    ("f32", np.int64, 64), ("f16", np.int32, 8), ("bf16", np.int64, 16), ("f64", np.int64, 24),
    ("i8", np.int32, 8), ("u64", np.int64, 32), ("boolean", np.int64, 8)])
def test_register_width_loops_match_the_generic_loop(etype, itype, width):
    """A width of REGISTER_WIDTHS runs a loop compiled for it (its sums in registers): it
    gives the same bits as the loop for any width, which sums in the same order, and the
    reference's values."""
    from irrun.ops import segment_sum_loop
    assert width in segment_sum_loop.REGISTER_WIDTHS
    rng = np.random.default_rng(width)
    dtype = element_type(etype).dtype
    if etype in FLOATS:
        table = rng.standard_normal((30, width)).astype(dtype)
        w = rng.standard_normal(500).astype(dtype)
    else:
        table = (rng.integers(0, 2, (30, width)) * (1 if etype == "boolean" else 77)).astype(dtype)
        w = rng.integers(0, 2 if etype == "boolean" else 9, 500).astype(dtype)
    idx = rng.integers(0, 30, 500).astype(itype)
    seg = np.sort(rng.integers(0, 60, 500)).astype(itype)
    fast = run(table, idx, seg, 61, 3, w)
    assert_close(fast, reference(table, idx, seg, 61, 3, w), etype)

    generic = np.empty_like(fast)
    out = generic.view(np.uint16) if etype in ("f16", "bf16") else generic
    bounds = np.searchsorted(seg, np.arange(62))                        # segment starts
    args = (out, sparse._kernel_view(table), etype == "bf16", idx, bounds, sparse._NO_ORDER,
            sparse._kernel_view(w), 3, False)
    assert segment_sum_loop.loop_for(width) is not sum_bags             # its own loop
    acc = np.empty(width, sparse._accumulator(dtype))
    assert sum_bags(acc, *args, 0, 61) == 500
    np.testing.assert_array_equal(fast.view(np.uint8), generic.view(np.uint8))


_WIDTHS_SCRIPT = """
import sys
import numpy as np
from irrun.ops import sparse
from irrun.ops.segment_sum_loop import loop_for, segments_loop_for
rng = np.random.default_rng(0)
for width in map(int, sys.argv[1:]):
    # f64: the numba loops (f32 rows of 16 floats take the LLVM IR loops instead).
    table = rng.standard_normal((9, width))
    idx, seg = rng.integers(0, 9, 40), np.sort(rng.integers(0, 5, 40))
    (out,) = sparse.EmbeddingSegmentsSum3.run(None, table, idx, seg, np.array(5))
    expected = np.zeros((5, width))
    np.add.at(expected, seg, table[idx])
    assert np.allclose(out, expected, atol=1e-5), width
    (bags,) = sparse.EmbeddingBagPackedSum3.run(None, table, idx.reshape(8, 5))
    assert np.allclose(bags, table[idx].reshape(8, 5, width).sum(axis=1), atol=1e-5), width
    # Both loops of this width (EmbeddingSegmentsSum's and the bags'), from the cache or not.
    print(width, sum(sum(loop.stats.cache_hits.values())
                     for loop in (segments_loop_for(width), loop_for(width))))
"""


def test_cached_loops_keep_their_widths_apart(tmp_path):
    """The loops of REGISTER_WIDTHS are one closure compiled per width: numba's disk cache
    must tell them apart (by the closed-over value), or a later process would load the
    loop of another width and sum the wrong number of columns."""
    import subprocess
    import sys
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def run_widths(*widths):
        done = subprocess.run([sys.executable, "-c", _WIDTHS_SCRIPT, *map(str, widths)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return dict(line.split() for line in done.stdout.splitlines())

    assert run_widths(8, 16) == {"8": "0", "16": "0"}           # compiled, then saved
    assert run_widths(16, 8) == {"16": "2", "8": "2"}           # each loaded, and right


def test_loop_runs_where_numba_cannot_cache(tmp_path):
    """In a read-only container numba has nowhere to cache and refuses cache=True with a
    RuntimeError when the loop is defined: the loop is then compiled without a cache."""
    import subprocess
    import sys
    script = (
        "import numba.core.dispatcher as d\n"
        "def refuse(self):\n"
        "    raise RuntimeError(\"cannot cache function: no locator available\")\n"
        "d.Dispatcher.enable_caching = refuse\n"
        "import numpy as np\n"
        "from irrun.ops import sparse\n"
        "(out,) = sparse.EmbeddingSegmentsSum3.run(None, np.ones((4, 8), np.float32),\n"
        "    np.array([0, 1, 1]), np.array([0, 1, 1]), np.array(3))\n"
        "print(out.sum(axis=1).tolist())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[8.0, 16.0, 0.0]"
    assert not any(tmp_path.iterdir())                       # and nothing was written


@pytest.mark.parametrize("workers", [1, 3])
def test_bad_ids_found_by_the_loop_name_the_first(monkeypatch, workers):
    """The loop checks the ids as it sums; whichever span meets a bad one, the message names
    the first bad id in the order the ids are given (indices before segment_ids)."""
    monkeypatch.setattr(sparse, "_workers", lambda n: workers)
    table = np.ones((5, 8), np.float32)
    idx, seg = np.arange(60) % 5, np.repeat(np.arange(12), 5)
    bad_idx = idx.copy()
    bad_idx[[45, 50]] = [5, -1]
    with pytest.raises(OpError, match=r"indices\[45\] is 5, expected in \[0, 5\)"):
        run(table, bad_idx, seg, 12)
    bad_seg = seg.copy()
    bad_seg[[41, 59]] = [-(10**12), 12]             # far below any row: no write may reach it
    with pytest.raises(OpError, match=r"segment_ids\[41\] is -1000000000000, expected in"):
        run(table, idx, bad_seg, 12, itype=np.int64)
    with pytest.raises(OpError, match=r"segment_ids\[59\] is 12, expected in \[0, 12\)"):
        run(table, idx, seg + (np.arange(60) == 59), 12)
    # Ids sorted within each span but not across them are unsorted: summed as scattered.
    spans_swapped = np.concatenate([seg[20:40], seg[:20], seg[40:]])
    assert_close(run(table, idx, spans_swapped, 12, 0),
                 reference(table, idx, spans_swapped, 12, 0), "f32")


@given(st.data())
def test_random_against_reference(data):
    """Every type, unsorted ids and extra dims against the loop reference."""
    etype = data.draw(st.sampled_from(FLOATS + INTEGERS + ["boolean"]))
    dtype = element_type(etype).dtype
    num_emb = data.draw(st.integers(1, 5))
    rest = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    n = data.draw(st.integers(0, 12))
    segments = data.draw(st.integers(1, 6))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    if etype in FLOATS:
        table = rng.standard_normal((num_emb, *rest)).astype(dtype)
        w = rng.standard_normal(n).astype(dtype)
    elif etype == "boolean":
        table = rng.integers(0, 2, (num_emb, *rest)).astype(bool)
        w = rng.integers(0, 2, n).astype(bool)
    else:
        info = np.iinfo(dtype)
        table = rng.integers(info.min, info.max, (num_emb, *rest), endpoint=True, dtype=dtype)
        w = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
    idx = rng.integers(0, num_emb, n)
    seg = rng.integers(0, segments, n)
    if data.draw(st.booleans()):
        seg = np.sort(seg)
    mode = data.draw(st.sampled_from(["none", "default", "weights"]))
    default = int(rng.integers(0, num_emb)) if mode != "none" else None
    weights = w if mode == "weights" else None
    itype = data.draw(st.sampled_from([np.int32, np.int64]))
    got = run(table, idx, seg, segments, default, weights, itype=itype)
    assert_close(got, reference(table, idx, seg, segments, default, weights), etype)


# ------------------------------------------------------------------ errors at run time

def test_segment_id_out_of_range():
    with pytest.raises(OpError, match=r"segment_ids\[3\] is 3, expected in \[0, 3\)"):
        run(SPEC_TABLE, [0, 2, 3, 4], [0, 0, 2, 3], 3, 0)
    with pytest.raises(OpError, match=r"segment_ids\[1\] is -1, expected in \[0, 3\)"):
        run(SPEC_TABLE, [0, 2, 3, 4], [0, -1, 2, 2], 3)


def test_index_out_of_range():
    with pytest.raises(OpError, match=r"indices\[2\] is 5, expected in \[0, 5\)"):
        run(SPEC_TABLE, [0, 2, 5, 4], [0, 0, 2, 2], 3, 0, itype=np.int64)
    with pytest.raises(OpError, match=r"indices\[0\] is -2, expected in \[0, 5\)"):
        run(SPEC_TABLE, [-2, 2, 3, 4], [0, 0, 2, 2], 3)


def test_direct_call_with_mismatched_lengths_is_refused():
    """The loop reads ids and weights without bounds checks: a caller that skips the shape
    rule (the executor never does) gets an OpError, not a read past the end."""
    with pytest.raises(OpError, match=r"segment_ids has shape \[3\], expected \[4\]"):
        run(SPEC_TABLE, [0, 2, 3, 4], [0, 0, 2], 3)
    with pytest.raises(OpError, match=r"per_sample_weights has shape \[2\], expected \[4\]"):
        run(SPEC_TABLE, [0, 2, 3, 4], [0, 0, 2, 2], 3, 0, [1.0, 2.0])


def test_used_default_index_out_of_range():
    with pytest.raises(OpError, match=r"default_index is 5, expected in \[0, 5\).*empty segment 1"):
        run(SPEC_TABLE, [0, 2, 3, 4], [0, 0, 2, 2], 3, 5)
    with pytest.raises(OpError, match=r"default_index is -1"):
        run(SPEC_TABLE, [], [], 1, -1)


def test_unused_bad_default_index_is_accepted():
    out = run(SPEC_TABLE, [0, 2, 3, 4], [0, 1, 2, 2], 3, 99, [0.5] * 4)
    np.testing.assert_allclose(out, reference(SPEC_TABLE, [0, 2, 3, 4], [0, 1, 2, 2], 3, None,
                                              [0.5] * 4), rtol=1e-6)


def test_negative_num_segments():
    with pytest.raises(OpError, match=r"num_segments is -1, expected >= 0"):
        run(SPEC_TABLE, [0], [0], -1)


# ------------------------------------------------------------------ shape and type inference

def test_output_dims_from_constant_num_segments():
    (out,), warnings = infer(spec("f16", [7, 2, 3]), spec("i64", [DYNAMIC]), spec("i64", [DYNAMIC]),
                             spec("i64", [], 11))
    assert out.etype.name == "f16" and out.shape == (Dim.of(11), Dim.of(2), Dim.of(3))
    assert warnings == []


def test_output_dim0_dynamic_without_constant():
    (out,), _ = infer(*spec_inputs())
    assert out.shape == (DYNAMIC, Dim.of(2))
    (out,), _ = infer(spec("f32", [DYNAMIC, Dim(1, 4)]), spec("i32", [4]), spec("i32", [DYNAMIC]),
                      spec("i32", None))
    assert out.shape == (DYNAMIC, Dim(1, 4))


def test_dynamic_rank_table():
    (out,), _ = infer(spec("bf16", None), spec("i32", None), spec("i32", None), spec("i32", None, 3))
    assert out.etype.name == "bf16" and out.shape is None


@pytest.mark.parametrize("inputs, message", [
    ([("f32", [5, 2]), ("i32", [4]), ("i16", [4]), ("i16", [])],
     "SEGMENT_IDS type must be i32 or i64, got i16"),
    ([("f32", [5, 2]), ("f32", [4]), ("i32", [4]), ("i32", [])],
     "INDICES type must be i32 or i64, got f32"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [4]), ("u8", [])],
     "NUM_SEGMENTS type must be i32 or i64, got u8"),
    ([("f32", [5, 2]), ("i32", [4]), ("i64", [4]), ("i64", [])],
     r"Segment_ids element type \(i64\) must match indices element type \(i32\)"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [4]), ("i64", [])],
     r"Num_segments element type \(i64\) must match Segment_ids element type \(i32\)"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [4]), ("i32", []), ("f32", [])],
     "DEFAULT_INDEX type must be i32 or i64, got f32"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [4]), ("i32", []), ("i64", [])],
     r"Default_index element type \(i64\) must match indices element type \(i32\)"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [4]), ("i32", []), ("i32", []), ("f16", [4])],
     r"Per sample weight element type \(f16\) must match embedding table element type \(f32\)"),
    ([("f32", [5, 2]), ("i32", [4, 1]), ("i32", [4]), ("i32", [])],
     r"INDICES must be 1D, got rank 2 \(\[4,1\]\)"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", []), ("i32", [])],
     r"SEGMENT_IDS must be 1D, got rank 0"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [3]), ("i32", [])],
     r"INDICES and SEGMENT_IDS shape must be same, got \[4\] and \[3\]"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [4]), ("i32", [1])],
     r"NUM_SEGMENTS must be a scalar, got rank 1 \(\[1\]\)"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [4]), ("i32", []), ("i32", [1])],
     r"DEFAULT_INDEX must be a scalar, got rank 1"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [4]), ("i32", []), ("i32", []), ("f32", [4, 1])],
     r"PER_SAMPLE_WEIGHTS must be 1D, got rank 2"),
    ([("f32", [5, 2]), ("i32", [4]), ("i32", [4]), ("i32", []), ("i32", []), ("f32", [3])],
     r"INDICES and PER_SAMPLE_WEIGHTS shape must be same, got \[4\] and \[3\]"),
    ([("f32", []), ("i32", [4]), ("i32", [4]), ("i32", [])],
     "EMB_TABLE can't be a scalar"),
])
def test_shape_and_type_messages(inputs, message):
    with pytest.raises(ShapeError, match=message):
        infer(*[spec(t, s) for t, s in inputs])


def test_dynamic_dims_pass_the_checks():
    # Compatibility, not equality: OpenVINO accepts these, so irrun does.
    (out,), _ = infer(spec("f32", [5, 2]), spec("i64", [Dim(2, 6)]), spec("i64", [4]),
                      spec("i64", [], 2), spec("i64", None), spec("f32", [DYNAMIC]))
    assert out.shape == (Dim.of(2), Dim.of(2))


def test_sub_byte_tables_are_unsupported():
    with pytest.raises(UnsupportedError, match="u4 emb_table"):
        infer(spec("u4", [5, 2]), spec("i32", [4]), spec("i32", [4]), spec("i32", []))


def test_constant_default_index_out_of_range_warns():
    _, warnings = infer(*spec_inputs(num_segments=3), spec("i32", [], 5))
    assert len(warnings) == 1 and "default_index 5 is outside [0, 5)" in warnings[0]
    _, warnings = infer(*spec_inputs(num_segments=3), spec("i32", [], -1))
    assert len(warnings) == 1 and "default_index -1" in warnings[0]
    _, warnings = infer(*spec_inputs(num_segments=3), spec("i32", [], 4))
    assert warnings == []


def test_constant_negative_num_segments_warns():
    (out,), warnings = infer(*spec_inputs(num_segments=-2))
    assert out.shape == (DYNAMIC, Dim.of(2))
    assert len(warnings) == 1 and "num_segments is -2" in warnings[0]


@given(st.data())
def test_infer_agrees_with_run(data):
    etype = data.draw(st.sampled_from(FLOATS + INTEGERS))
    itype = data.draw(st.sampled_from(["i32", "i64"]))
    shape = [data.draw(st.integers(1, 4))] + data.draw(st.lists(st.integers(0, 3), max_size=2))
    n = data.draw(st.integers(0, 5))
    segments = data.draw(st.integers(0, 4))
    const = data.draw(st.booleans())
    table = np.zeros(shape, element_type(etype).dtype)
    idx = np.zeros(n, element_type(itype).dtype)
    seg = np.zeros(n, idx.dtype) if segments else idx[:0]
    idx = idx[:seg.size]
    (out_spec,), _ = infer(spec(etype, shape), spec(itype, [DYNAMIC]), spec(itype, [DYNAMIC]),
                           spec(itype, [], segments if const else None))
    (out,) = EmbeddingSegmentsSum3.run(None, table, idx, seg, np.array(segments, idx.dtype))
    assert out.dtype == out_spec.etype.dtype
    assert len(out_spec.shape) == out.ndim
    assert all(d.contains(v) for d, v in zip(out_spec.shape, out.shape))
    assert out_spec.shape[0].is_static == const


# ------------------------------------------------------------------ memory: no n x d intermediate

@pytest.mark.parametrize("etype, sort, num_emb", [
    ("f32", True, 1000), ("f16", True, 1000), ("i8", False, 1000), ("f64", False, 1000),
    ("f16", True, 300_000),     # a 38 MB table, read as it is (no f32 copy of it)
])
def test_peak_memory_stays_in_budget(etype, sort, num_emb):
    """Peak extra memory < output + 24 bytes per lookup + 64 MiB, while the gathered
    [n, d] intermediate would be far bigger than that."""
    dtype = element_type(etype).dtype
    rng = np.random.default_rng(0)
    n, d, segments = 400_000, 64, 2000
    table = rng.integers(-5, 5, (num_emb, d)).astype(dtype)
    idx = rng.integers(0, num_emb, n).astype(np.int64)
    seg = rng.integers(0, segments, n).astype(np.int64)
    if sort:
        seg.sort()
    w = rng.integers(-3, 3, n).astype(dtype)
    out_bytes = segments * d * dtype.itemsize
    budget = out_bytes + 24 * n + (64 << 20)
    assert n * d * max(dtype.itemsize, 4) > budget          # the test can fail
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        out = run(table, idx, seg, segments, 0, w, itype=np.int64)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert out.nbytes == out_bytes
    assert peak < budget, f"peak {peak / 2**20:.1f} MiB, budget {budget / 2**20:.1f} MiB"


# ------------------------------------------------------------------ whole models through irrun

def _model_with(tmp_path, default_value=None, num_segments_const=None):
    ov = pytest.importorskip("openvino")
    o3 = pytest.importorskip("openvino.opset3")
    params = [o3.parameter([5, 2], ov.Type.f32, name="emb_table"),
              o3.parameter([-1], ov.Type.i32, name="indices"),
              o3.parameter([-1], ov.Type.i32, name="segment_ids")]
    if num_segments_const is None:
        params.append(o3.parameter([], ov.Type.i32, name="num_segments"))
        ns = params[-1]
    else:
        ns = o3.constant(np.int32(num_segments_const), name="num_segments")
    args = params[:3] + [ns]
    if default_value is not None:
        args.append(o3.constant(np.int32(default_value), name="default_index"))
    node = o3.embedding_segments_sum(*args, name="ess")
    xml = str(tmp_path / "ess.xml")
    ov.save_model(ov.Model([node.output(0)], params, "ess"), xml)
    return xml


def test_dynamic_num_segments_through_a_model(tmp_path):
    xml = _model_with(tmp_path)
    m = irrun.read_model(xml)
    assert m.outputs[0].partial_shape == "[?,2]"
    feed = {"emb_table": SPEC_TABLE, "indices": np.array([0, 4], np.int32),
            "segment_ids": np.array([1, 3], np.int32), "num_segments": np.array(5, np.int32)}
    out = list(m.infer(feed).values())[0]
    np.testing.assert_allclose(out, reference(SPEC_TABLE, [0, 4], [1, 3], 5))


def test_validate_warns_about_a_constant_bad_default(tmp_path):
    xml = _model_with(tmp_path, default_value=7, num_segments_const=2)
    diags = irrun.validate(xml)
    assert [d.severity for d in diags] == ["warning"]
    assert "default_index 7 is outside [0, 5)" in diags[0].message and diags[0].layer_name == "ess"
    m = irrun.read_model(xml)
    feed = {"emb_table": SPEC_TABLE, "indices": np.array([0, 4], np.int32)}
    full = m.infer({**feed, "segment_ids": np.array([0, 1], np.int32)})
    np.testing.assert_allclose(list(full.values())[0], SPEC_TABLE[[0, 4]])
    with pytest.raises(OpError) as e:
        m.infer({**feed, "segment_ids": np.array([1, 1], np.int32)})
    text = str(e.value)
    assert "ess.xml:" in text and "layer 'ess'" in text and "default_index is 7" in text


def test_run_error_names_layer_and_position(tmp_path):
    xml = _model_with(tmp_path, num_segments_const=2)
    result = CliRunner().invoke(cli, [xml, "--inputs", _npz(tmp_path, {
        "emb_table": SPEC_TABLE, "indices": np.array([0, 9], np.int32),
        "segment_ids": np.array([0, 1], np.int32)})])
    assert result.exit_code == 1
    assert "ess.xml:" in result.output and "layer 'ess'" in result.output
    assert "indices[1] is 9, expected in [0, 5)" in result.output


def _npz(tmp_path, arrays):
    path = str(tmp_path / "inputs.npz")
    np.savez(path, **arrays)
    return path


# ------------------------------------------------------------------ OpenVINO's CPU plugin

# What the CPU plugin computes (found by running it): every numeric table type and boolean,
# with f16/bf16 accumulated in f32. It runs i64 (indices and tables) as i32 and f64 as f32,
# so i64/u64/u32 table values and their sums stay within i32 and f64 values are f32-exact;
# i8/u8/i16/u16 tables wrap natively, so the oracle draws them over their full range. It
# gives wrong sums for unsorted segment ids, so the oracle draws sorted ids only. Floats are
# drawn as multiples of 1/8 in [-4, 4] times small weights: the f32 sums are then exact
# and the only difference left is the one final rounding to f16/bf16.
ORACLE_TYPES = FLOATS + INTEGERS + ["boolean"]


def _ov_tensor(ov, value):
    if value.dtype == ml_dtypes.bfloat16:
        # The Python API shows bf16 tensors as float16 views: copy the bits.
        t = ov.Tensor(ov.Type.bf16, list(value.shape))
        np.copyto(t.data.view(np.uint16), value.view(np.uint16))
        return t
    return ov.Tensor(np.array(value, order="C", copy=True))


@pytest.mark.oracle
@given(st.data())
def test_oracle_cpu_plugin(data):
    oracle = pytest.importorskip("oracle")
    ov = oracle.ov
    import openvino.opset3 as o3

    etype = data.draw(st.sampled_from(ORACLE_TYPES), label="table type")
    itype = data.draw(st.sampled_from(["i32", "i64"]), label="index type")
    dtype, idt = element_type(etype).dtype, element_type(itype).dtype
    num_emb = data.draw(st.integers(1, 6))
    rest = data.draw(st.lists(st.integers(1, 3), max_size=2))
    n = data.draw(st.integers(1, 10))
    segments = data.draw(st.integers(1, 6))
    mode = data.draw(st.sampled_from(["none", "default", "weights"]))
    const_segments = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))

    shape = (num_emb, *rest)
    if etype in FLOATS:
        table = (rng.integers(-32, 33, shape) / 8).astype(dtype)
        w = rng.integers(-4, 5, n).astype(dtype)
    elif etype == "boolean":
        table, w = rng.integers(0, 2, shape).astype(bool), rng.integers(0, 2, n).astype(bool)
    elif dtype.itemsize <= 2:
        info = np.iinfo(dtype)
        table = rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)
        w = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
    else:   # the plugin computes these in i32: keep every sum inside it
        lo = 0 if etype[0] == "u" else -10_000
        table = rng.integers(lo, 10_000, shape).astype(dtype)
        w = rng.integers(max(lo, -100), 100, n).astype(dtype)
    idx = rng.integers(0, num_emb, n).astype(idt)
    seg = np.sort(rng.integers(0, segments, n)).astype(idt)

    ov_type, it = getattr(ov.Type, etype), getattr(ov.Type, itype)
    params = [o3.parameter(list(shape), ov_type, name="emb_table"),
              o3.parameter([n], it, name="indices"),
              o3.parameter([n], it, name="segment_ids")]
    feed = {"emb_table": table, "indices": idx, "segment_ids": seg}
    if const_segments:
        ns = o3.constant(np.array(segments, idt), name="num_segments")
    else:
        ns = o3.parameter([], it, name="num_segments")
        params.append(ns)
        feed["num_segments"] = np.array(segments, idt)
    args = params[:3] + [ns]
    if mode != "none":
        args.append(o3.constant(np.array(rng.integers(0, num_emb), idt), name="default_index"))
    if mode == "weights":
        weights = o3.parameter([n], ov_type, name="per_sample_weights")
        params.append(weights)
        args.append(weights)
        feed["per_sample_weights"] = w
    for p in params:
        p.output(0).get_tensor().set_names({p.get_friendly_name()})
    node = o3.embedding_segments_sum(*args, name="ess")
    model = ov.Model([node.output(0)], params, "ess")

    with tempfile.TemporaryDirectory() as d:
        xml = oracle.save(model, d)
        compiled = oracle.core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        result = compiled.create_infer_request().infer(
            {name: _ov_tensor(ov, v) for name, v in feed.items()})
        expected = np.array(result[compiled.outputs[0]])
        if etype == "bf16":
            expected = expected.view(np.uint16).view(ml_dtypes.bfloat16)
        (got,) = oracle.irrun_run(xml, feed)
    assert got.dtype == dtype and expected.dtype == dtype
    assert got.shape == expected.shape
    if etype in FLOATS:
        # The f32 sums are exact, so both round the same value once: bit-exact.
        np.testing.assert_array_equal(got.astype(np.float64), expected.astype(np.float64))
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("etype", ["f32", "f16", "bf16", "f64", "i8", "u64", "boolean"])
def test_sorted_ids_take_the_one_pass_loop_and_match_the_checking_path(monkeypatch, workers,
                                                                      etype):
    """Sorted ids in range (the spec's promise) are summed by the loop that finds each
    segment as it goes, with no pass of its own over the ids: the same sums, bit for bit,
    as the checking path (segment bounds first, then the bag loop), empty segments and
    spans cut at segment starts included."""
    monkeypatch.setattr(sparse, "_workers", lambda n: workers)
    dtype = element_type(etype).dtype
    rng = np.random.default_rng(workers)
    n, segments, num_emb = 300, 40, 7
    table = (rng.standard_normal((num_emb, 16)) * 4).astype(dtype)
    weights = (rng.standard_normal(n) * 2).astype(dtype)
    idx = rng.integers(0, num_emb, n)
    seg = np.sort(rng.integers(0, segments, n))
    seg[seg == 5] = 6                                  # an empty segment inside
    seg[:10] = 0
    seg[-30:] = segments - 1                           # a long last one (cuts move past it)
    for default, w in ((None, None), (3, None), (2, weights)):
        with monkeypatch.context() as m:
            m.setattr(sparse, "_sorted_segment_sum", lambda *a: False)
            want = run(table, idx, seg, segments, default, w)
        with monkeypatch.context() as m:
            def refuse(*a):
                raise AssertionError("sorted ids went through the bounds pass")
            m.setattr(sparse, "_segment_bounds", refuse)
            got = run(table, idx, seg, segments, default, w)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("workers", [2, 3])
def test_ids_that_break_the_promise_at_a_cut_fall_back_to_the_checking_path(monkeypatch,
                                                                            workers):
    """A decrease exactly where the one-pass loop cuts its spans, an id past the segments in
    the last span, a bad index in a later span: the one-pass loop gives up (its output is
    recomputed) and the checking path sums the scattered ids or names the first bad one."""
    monkeypatch.setattr(sparse, "_workers", lambda n: workers)
    table = np.arange(40, dtype=np.float32).reshape(5, 8)
    idx = np.arange(60) % 5
    seg = np.repeat(np.arange(12), 5)
    cut = 60 // workers                                # where the first span ends
    swapped = np.concatenate([seg[cut:], seg[:cut]])   # sorted within each span only
    assert_close(run(table, idx, swapped, 12), reference(table, idx, swapped, 12), "f32")
    with pytest.raises(OpError, match=r"segment_ids\[59\] is 12, expected in \[0, 12\)"):
        run(table, idx, seg + (np.arange(60) == 59), 12)
    bad = idx.copy()
    bad[55] = 9
    with pytest.raises(OpError, match=r"indices\[55\] is 9, expected in \[0, 5\)"):
        run(table, bad, seg, 12)
