"""The LLVM IR loops of the sparse ops (ops/segment_sum_ir_loop.py) give the numba loops'
sums bit for bit, and the same errors and fallbacks, wherever they take over: f32 and f16
tables with rows of 16..256 elements, i32 and i64 ids, with and without weights, sum and
mean, empty bags with and without a default, cached and streaming stores, on one thread
and on two."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import irrun
from irrun.ops import segment_sum_ir_loop as ir_loop
from irrun.ops import sparse
from irrun.ops.sparse import (EmbeddingBagAttrs, EmbeddingBagOffsets15, EmbeddingBagPacked15,
                              EmbeddingSegmentsSum3)

if ir_loop.loops_for(64, np.dtype(np.int32)) is None:
    pytest.skip("the LLVM IR loops cannot be built here (no llvmlite?): the numba loops run",
                allow_module_level=True)

LOOKUPS = 2 * sparse.PARALLEL_MIN_LOOKUPS + 1000     # enough for two threads' spans


@pytest.fixture
def numba_only(monkeypatch):
    """Run a callable with the IR loops turned off (the numba loops then run)."""
    def run(fn):
        with monkeypatch.context() as m:
            m.setattr(sparse, "_ir_operands", lambda *a: None)
            return fn()
    return run


@pytest.fixture
def ir_calls(monkeypatch):
    """Each time the kernels asked for the IR loops: whether they got them (and, in
    `streamed`, whether those were the streaming-store ones)."""
    calls = []
    real = ir_loop.loops_for

    def counted(width, dtype, streaming=False, table_dtype=np.dtype(np.float32),
                group="segments", table_bytes=None):
        loops = real(width, dtype, streaming, table_dtype, group, table_bytes)
        calls.append(loops is not None)
        calls.streamed.append(streaming)
        calls.far.append(ir_loop.far_stage(table_bytes))
        return loops
    calls = _Calls()
    monkeypatch.setattr(ir_loop, "loops_for", counted)
    return calls


class _Calls(list):
    def __init__(self):
        super().__init__()
        self.streamed = []
        self.far = []


@pytest.fixture(params=["cached stores", "streaming stores"])
def stores(request, monkeypatch):
    """Both store kinds of the IR loops, whatever the outputs' sizes."""
    streaming = request.param == "streaming stores"
    monkeypatch.setattr(sparse, "STREAM_MIN_BYTES", 0 if streaming else 1 << 62)
    return streaming


@pytest.fixture(params=["near prefetch", "near and far prefetch"])
def stages(request, monkeypatch):
    """Both prefetch plans of the IR loops (the far stage or not), whatever the tables'
    sizes. The prefetches change no sum, so these must agree with the numba loop too."""
    far = request.param == "near and far prefetch"
    monkeypatch.setattr(ir_loop, "FAR_TABLE_BYTES", -1 if far else 1 << 62)
    return far


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint16)


def _case(rng, width, index_type, n=LOOKUPS, num_emb=5000, bags=3000, table_type=np.float32):
    table = rng.standard_normal((num_emb, width)).astype(table_type)
    indices = rng.integers(0, num_emb, n).astype(index_type)
    offsets = np.sort(rng.integers(0, n, bags)).astype(index_type)
    offsets[0] = 0
    offsets[bags // 2:bags // 2 + 5] = offsets[bags // 2]       # empty bags in the middle
    weights = rng.random(n).astype(table_type)
    return table, indices, offsets, weights


TABLES = [np.float32, pytest.param(np.float16, marks=pytest.mark.skipif(
    ir_loop.loops_for(64, np.dtype(np.int32), False, np.dtype(np.float16)) is None,
    reason="no F16C: f16 tables keep the numba loop"))]


@pytest.mark.parametrize("table_type", TABLES)
@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("width", [1, 3, 8, 12, 16, 24, 48, 64, 100, 256])
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_bags_match_the_numba_loop_bit_for_bit(monkeypatch, numba_only, ir_calls, stores,
                                               stages, threads, width, index_type,
                                               table_type):
    monkeypatch.setenv("IRRUN_THREADS", threads)
    rng = np.random.default_rng(width + len(threads))
    table, indices, offsets, weights = _case(rng, width, index_type, table_type=table_type)
    default = np.array(7, index_type)
    cases = [
        (EmbeddingBagAttrs("sum"), (table, indices, offsets, default, weights)),
        (EmbeddingBagAttrs("sum"), (table, indices, offsets, None, weights)),
        (EmbeddingBagAttrs("sum"), (table, indices, offsets, default)),
        (EmbeddingBagAttrs("mean"), (table, indices, offsets, default)),
        (EmbeddingBagAttrs("mean"), (table, indices, offsets)),
    ]
    for attrs, args in cases:
        (fast,) = EmbeddingBagOffsets15.run(attrs, *args)
        (slow,) = numba_only(lambda: EmbeddingBagOffsets15.run(attrs, *args))
        assert np.array_equal(_bits(fast), _bits(slow)), (attrs, len(args))
        assert fast.ctypes.data % 64 == 0
    packed = indices[:LOOKUPS // 4 * 4].reshape(-1, 4)
    for attrs in (EmbeddingBagAttrs("sum"), EmbeddingBagAttrs("mean")):
        (fast,) = EmbeddingBagPacked15.run(attrs, table, packed)
        (slow,) = numba_only(lambda: EmbeddingBagPacked15.run(attrs, table, packed))
        assert np.array_equal(_bits(fast), _bits(slow))
    assert ir_calls and all(ir_calls) and set(ir_calls.streamed) == {stores}
    assert set(ir_calls.far) == {stages}


@pytest.mark.parametrize("table_type", TABLES)
@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("width", [2, 8, 24, 64, 100, 256])
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_segments_match_the_numba_loop_bit_for_bit(monkeypatch, numba_only, ir_calls,
                                                   stores, stages, threads, width,
                                                   index_type, table_type):
    monkeypatch.setenv("IRRUN_THREADS", threads)
    rng = np.random.default_rng(width * 3 + len(threads))
    table, indices, _, weights = _case(rng, width, index_type, table_type=table_type)
    segments = 4000
    ids = np.sort(rng.integers(0, segments - 10, LOOKUPS)).astype(index_type)  # empty at the end
    ids[ids == 100] = 101                                                   # and one inside
    for args in ((table, indices, ids, np.array(segments), np.array(3), weights),
                 (table, indices, ids, np.array(segments))):
        (fast,) = EmbeddingSegmentsSum3.run(None, *args)
        (slow,) = numba_only(lambda: EmbeddingSegmentsSum3.run(None, *args))
        assert np.array_equal(_bits(fast), _bits(slow))
    assert ir_calls and all(ir_calls) and set(ir_calls.streamed) == {stores}
    assert set(ir_calls.far) == {stages}
    # A default of -1 with empty segments: the same located error either way.
    args = (table, indices, ids, np.array(segments), np.array(-1), weights)
    with pytest.raises(irrun.IrrunError) as fast_error:
        EmbeddingSegmentsSum3.run(None, *args)
    with pytest.raises(irrun.IrrunError) as slow_error:
        numba_only(lambda: EmbeddingSegmentsSum3.run(None, *args))
    assert str(fast_error.value) == str(slow_error.value)


@pytest.mark.parametrize("bad", [5000, -1, 2**31 - 1])
def test_a_bad_index_is_the_same_error(numba_only, bad):
    rng = np.random.default_rng(1)
    table, indices, offsets, weights = _case(rng, 64, np.int32)
    indices[LOOKUPS - 3] = bad
    for run in (lambda: EmbeddingBagOffsets15.run(EmbeddingBagAttrs("sum"), table, indices,
                                                  offsets, None, weights),
                lambda: EmbeddingSegmentsSum3.run(None, table, indices,
                                                  np.arange(LOOKUPS, dtype=np.int32) // 10,
                                                  np.array(LOOKUPS // 10 + 1))):
        with pytest.raises(irrun.IrrunError) as fast:
            run()
        with pytest.raises(irrun.IrrunError) as slow:
            numba_only(run)
        assert str(fast.value) == str(slow.value) and str(bad) in str(fast.value)


def test_unsorted_and_bad_segment_ids_take_the_checking_path(numba_only):
    rng = np.random.default_rng(2)
    table, indices, _, weights = _case(rng, 32, np.int64)
    ids = np.sort(rng.integers(0, 1000, LOOKUPS))
    shuffled = ids.copy()
    shuffled[[10, LOOKUPS - 10]] = shuffled[[LOOKUPS - 10, 10]]
    (fast,) = EmbeddingSegmentsSum3.run(None, table, indices, shuffled, np.array(1000),
                                        None, weights)
    (slow,) = numba_only(lambda: EmbeddingSegmentsSum3.run(None, table, indices, shuffled,
                                                           np.array(1000), None, weights))
    assert np.array_equal(_bits(fast), _bits(slow))
    for bad in (-5, 1000):
        broken = ids.copy()
        broken[LOOKUPS // 2] = bad
        with pytest.raises(irrun.IrrunError) as fast_error:
            EmbeddingSegmentsSum3.run(None, table, indices, broken, np.array(1000))
        with pytest.raises(irrun.IrrunError) as slow_error:
            numba_only(lambda: EmbeddingSegmentsSum3.run(None, table, indices, broken,
                                                         np.array(1000)))
        assert str(fast_error.value) == str(slow_error.value)


def test_other_tables_keep_the_numba_loop(ir_calls):
    rng = np.random.default_rng(3)
    for table, ids_type in ((rng.standard_normal((50, 257)).astype(np.float32), np.int64),
                            (rng.standard_normal((50, 64)).astype(ml_dtypes.bfloat16), np.int64),
                            (rng.standard_normal((50, 64)).astype(np.float32), np.int32)):
        indices = rng.integers(0, 50, 100)       # int64: ids of another type are numba's
        ids = np.sort(rng.integers(0, 10, 100)).astype(ids_type)
        (out,) = EmbeddingSegmentsSum3.run(None, table, indices, ids, np.array(10))
        expected = np.zeros((10, table.shape[1]), np.float64)
        np.add.at(expected, ids, table[indices].astype(np.float64))
        assert np.allclose(out, expected, rtol=1e-2, atol=1e-2)
    assert not any(ir_calls)


@given(st.data())
def test_claimed_chunks_and_segment_ends_match_the_numba_loop(data):
    """The IR loops' threads claim chunks whose ends they find themselves (binary searches
    of the bounds or the ids), and find each segment's end as they go: drawn segment
    lengths (0 to 40: empty ones, and more than the sixteen ids the loop once compared at
    a time), chunk and thread counts (more chunks than bags or segments included), and ids
    or offsets broken at a drawn position (a decrease, an id past the segments, an offset
    past n or below 0) give the numba loop's sums bit for bit, or its error; packed bags of
    a drawn size too."""
    threads = data.draw(st.integers(1, 3), label="threads")
    chunks = data.draw(st.integers(1, 40), label="chunks per thread")
    index_type = data.draw(st.sampled_from([np.int32, np.int64]), label="ids")
    width = data.draw(st.sampled_from([8, 16, 24, 64]), label="width")
    lengths = data.draw(st.lists(st.integers(0, 40), min_size=1, max_size=60), label="lengths")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    for group in ("segments", "bags", "offsets", "packed"):      # else numba against numba
        assert ir_loop.loops_for(width, np.dtype(index_type), group=group) is not None
    segments = len(lengths)
    ids = np.repeat(np.arange(segments), lengths).astype(index_type)
    n = ids.shape[0]
    break_at = data.draw(st.none() | st.integers(0, max(0, n - 1)), label="broken at")
    if break_at is not None and n:
        ids[break_at] = data.draw(st.sampled_from([-1, segments, max(0, ids[break_at] - 1)]),
                                  label="broken id")
    table = rng.standard_normal((50, width)).astype(np.float32)
    indices = rng.integers(0, 50, n).astype(index_type)
    weights = rng.random(n).astype(np.float32)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(index_type)

    def refuse(*a):
        raise AssertionError("good ids or offsets went through the checking path")

    def both(run, checking_path: str, good: bool):
        """(IR result, numba result): each an array or the error's text. Good inputs must
        not reach `checking_path` in the IR run (the chunks' cuts must hold for them)."""
        answers = []
        for ir in (True, False):
            with pytest.MonkeyPatch.context() as m:
                m.setattr(sparse, "_workers", lambda n: threads)
                m.setattr(sparse, "CHUNKS_PER_THREAD", chunks)
                if not ir:
                    m.setattr(sparse, "_ir_operands", lambda *a: None)
                elif good and n:
                    m.setattr(sparse, checking_path, refuse)
                try:
                    answers.append(_bits(run()[0]))
                except irrun.IrrunError as e:
                    answers.append(str(e))
        return answers

    fast, slow = both(lambda: EmbeddingSegmentsSum3.run(
        None, table, indices, ids, np.array(segments), np.array(3), weights),
        "_segment_bounds", break_at is None)
    assert type(fast) is type(slow)
    assert (fast == slow if isinstance(fast, str) else np.array_equal(fast, slow))
    # The bag ops read the offsets themselves (@offset_bags): broken ones at a drawn bag
    # (a decrease, one past n, a negative one) give the checking path's error.
    broken_bag = data.draw(st.none() | st.integers(0, segments - 1), label="broken bag")
    if broken_bag is not None:
        offsets[broken_bag] = data.draw(st.sampled_from(
            [n + 1, -1, max(0, offsets[broken_bag - 1] - 1) if broken_bag else -2]),
            label="broken offset")
    reduction = data.draw(st.sampled_from(["sum", "mean"]), label="reduction")
    default = data.draw(st.sampled_from([None, np.array(2, index_type)]), label="default")
    fast, slow = both(lambda: EmbeddingBagOffsets15.run(
        EmbeddingBagAttrs(reduction), table, indices, offsets, default,
        weights if reduction == "sum" else None), "_bags_out", broken_bag is None)
    assert type(fast) is type(slow)
    assert (fast == slow if isinstance(fast, str) else np.array_equal(fast, slow))
    # Packed bags of a drawn size (@packed_bags): every bag of the same size.
    per_bag = data.draw(st.integers(1, 20), label="per bag")
    packed = indices[:n - n % per_bag].reshape(-1, per_bag)
    packed_weights = weights[:packed.size].reshape(packed.shape)
    fast, slow = both(lambda: EmbeddingBagPacked15.run(
        EmbeddingBagAttrs(reduction), table, packed, packed_weights if reduction == "sum"
        else None), "_bags_out", packed.size > 0)
    assert np.array_equal(fast, slow)


def test_rows_are_asked_for_into_l2_before_l1():
    """The loops over a large table ask for each row twice (see the comment above
    NEAR_BYTES in segment_sum_ir_loop): into L2 far ahead, then into L1 nearer, for every
    row size they take (a far stage no farther than the near one would only add
    instructions); over a small table (FAR_TABLE_BYTES) into L1 only."""
    for width in ir_loop.WIDTHS:
        for row_bytes in (2 * width, 4 * width):
            near, far = ir_loop.prefetch_ahead(row_bytes)
            assert ir_loop.NEAR_LOOKUPS[0] <= near <= ir_loop.NEAR_LOOKUPS[1]
            assert ir_loop.FAR_LOOKUPS[0] <= far <= ir_loop.FAR_LOOKUPS[1]
            assert near < far, (row_bytes, near, far)
    both, near_only = ir_loop._ir(64, 32, far=True), ir_loop._ir(64, 32, far=False)
    assert "i32 0, i32 3, i32 1)" in both and "i32 0, i32 2, i32 1)" in both
    assert "i32 0, i32 3, i32 1)" in near_only and "i32 0, i32 2, i32 1)" not in near_only
