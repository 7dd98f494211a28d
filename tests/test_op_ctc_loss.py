"""CTCGreedyDecoder-1 and CTCLoss-4: the spec's examples, a brute-force reference over every
path, shape rules, errors, and differential tests against OpenVINO's CPU plugin."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irrun.errors import OpError, ShapeError
from irrun.ops import sequence
from irrun.ops.sequence import CTCGreedyDecoder1, CTCGreedyDecoderAttrs, CTCLoss4, CTCLossAttrs
from irrun.ir.shapes import DYNAMIC, Dim, TensorSpec

MERGE, NO_MERGE = CTCGreedyDecoderAttrs(True), CTCGreedyDecoderAttrs(False)


# ------------------------------------------------------------------ CTCGreedyDecoder-1

def decode(data, mask, merge=True):
    return CTCGreedyDecoder1.run(MERGE if merge else NO_MERGE, np.asarray(data, np.float32),
                                 np.asarray(mask, np.float32))[0]


def one_hot_steps(classes_per_step, c):
    """[T, 1, C] data whose argmax at step t is classes_per_step[t]."""
    data = np.zeros((len(classes_per_step), 1, c), np.float32)
    data[np.arange(len(classes_per_step)), 0, classes_per_step] = 1
    return data


def test_spec_example_shapes():
    (out,) = CTCGreedyDecoder1.infer(MERGE, TensorSpec.make("f32", [20, 8, 128]),
                                     TensorSpec.make("f32", [20, 8]))
    assert out.etype.name == "f32" and out.shape == tuple(map(Dim.of, (8, 20, 1, 1)))


def test_blank_is_the_last_class_and_repeats_merge():
    data = one_hot_steps([0, 0, 3, 1, 1, 3, 1, 2], 4)          # 3 is the blank (C - 1)
    out = decode(data, np.ones((8, 1)))
    assert out.shape == (1, 8, 1, 1) and out.dtype == np.float32
    assert out.ravel().tolist() == [0, 1, 1, 2, -1, -1, -1, -1]
    out = decode(data, np.ones((8, 1)), merge=False)
    assert out.ravel().tolist() == [0, 0, 1, 1, 1, 2, -1, -1]


def test_mask_ends_a_sequence_at_its_first_zero():
    data = one_hot_steps([0, 1, 2, 0, 1], 4)
    assert decode(data, [[1], [1], [0], [1], [1]]).ravel().tolist() == [0, 1, -1, -1, -1]
    assert decode(data, np.zeros((5, 1))).ravel().tolist() == [-1] * 5


def test_batch_layout():
    rng = np.random.default_rng(4)
    data = rng.standard_normal((6, 3, 5)).astype(np.float32)
    mask = (np.arange(6)[:, None] < np.array([6, 2, 0])).astype(np.float32)
    out = decode(data, mask)
    for b, length in enumerate([6, 2, 0]):
        best = data[:length, b].argmax(axis=1)
        kept = [int(k) for i, k in enumerate(best) if k != 4 and (i == 0 or k != best[i - 1])]
        assert out[b].ravel().tolist() == kept + [-1] * (6 - len(kept))


def test_greedy_decoder_errors_and_shapes():
    spec = TensorSpec.make
    (out,) = CTCGreedyDecoder1.infer(MERGE, spec("f16", [None, 4, 9]), spec("f16", [7, None]))
    assert out.shape == (Dim.of(4), Dim.of(7), Dim.of(1), Dim.of(1)) and out.etype.name == "f16"
    (out,) = CTCGreedyDecoder1.infer(MERGE, spec("f32", None), spec("f32", None))
    assert out.shape == (DYNAMIC, DYNAMIC, Dim.of(1), Dim.of(1))
    with pytest.raises(ShapeError, match="data must be 3-D"):
        CTCGreedyDecoder1.infer(MERGE, spec("f32", [2, 3]), spec("f32", [2, 3]))
    with pytest.raises(ShapeError, match=r"sequence_mask \[3,3\] must be \[T, N\] = \[2,3\]"):
        CTCGreedyDecoder1.infer(MERGE, spec("f32", [2, 3, 4]), spec("f32", [3, 3]))
    with pytest.raises(ShapeError, match="sequence_mask must be of a floating-point type"):
        CTCGreedyDecoder1.infer(MERGE, spec("f32", [2, 3, 4]), spec("i32", [2, 3]))
    with pytest.raises(OpError, match=r"sequence_mask has shape \[3, 3\], expected \[2, 3\]"):
        decode(np.zeros((2, 3, 4)), np.ones((3, 3)))


# ------------------------------------------------------------------ CTCLoss-4

def loss(logits, logit_len, labels, label_len, blank=None, collapse=False, merge=True,
         unique=False, dtype=np.float64):
    args = [np.asarray(logits, dtype), np.asarray(logit_len, np.int32),
            np.asarray(labels, np.int32), np.asarray(label_len, np.int32)]
    if blank is not None:
        args.append(np.array(blank, np.int32))
    return CTCLoss4.run(CTCLossAttrs(collapse, merge, unique), *args)[0]


def brute_force(logits, logit_len, labels, label_len, blank, collapse, merge, unique):
    """-ln of the sum of p(S) over every path S of each row that decodes to the decoded
    target, by enumeration (C ** T paths: small inputs only)."""
    n, _, c = logits.shape
    out = []
    for b in range(n):
        target = list(labels[b, :label_len[b]])
        if unique:
            target = list(dict.fromkeys(target))
        elif collapse:
            target = [v for i, v in enumerate(target) if i == 0 or v != target[i - 1]]
        x = logits[b, :logit_len[b]].astype(np.float64)
        logp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
        total = 0.0
        for path in itertools.product(range(c), repeat=int(logit_len[b])):
            decoded = [k for i, k in enumerate(path)
                       if not (merge and i > 0 and k == path[i - 1])]
            decoded = [k for k in decoded if k != blank]
            if decoded == target:
                total += np.exp(sum(logp[i, k] for i, k in enumerate(path)))
        out.append(-np.log(total) if total > 0 else np.inf)
    return np.array(out)


def test_spec_example_alignment_counts():
    """The spec's example: G = (0,3,2,2,2,2,2,4,3) of length 4 is (0,3,2,2), C = 5 (blank
    4); the paths (0,0,4,3,2,2,4,2,4) and (0,4,3,3,2,4,2,2,2) of length 9 are aligned with
    it. With logits that favour only those two paths' classes, the loss is -ln of the sum
    of all aligned paths' probabilities: check it against the enumeration."""
    labels = np.array([[0, 3, 2, 2, 2, 2, 2, 4, 3]])
    paths = [(0, 0, 4, 3, 2, 2, 4, 2, 4), (0, 4, 3, 3, 2, 4, 2, 2, 2)]
    logits = np.zeros((1, 9, 5))
    for p in paths:
        logits[0, np.arange(9), p] += 3.0
    got = loss(logits, [9], labels, [4])
    # The two paths alone give at most the whole probability: the loss is below -ln p(S1).
    logp = logits[0] - np.log(np.exp(logits[0]).sum(axis=1, keepdims=True))
    one_path = -sum(logp[i, k] for i, k in enumerate(paths[0]))
    assert 0 < got[0] < one_path
    # The enumeration over 5**9 paths is slow; the recursion agrees with it on a prefix.
    prefix, short = logits[:, :6], labels[:, :6]
    np.testing.assert_allclose(loss(prefix, [6], short, [3]),
                               brute_force(prefix, [6], short, [3], 4, False, True, False),
                               rtol=1e-12)


def test_spec_unique_example():
    labels = np.array([[0, 1, 1, 0, 1, 3, 3, 2, 2, 3]])
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((1, 10, 5))
    # unique: (0, 1, 3, 2); the same loss as that target given directly.
    np.testing.assert_allclose(loss(logits, [10], labels, [10], unique=True),
                               loss(logits, [10], [[0, 1, 3, 2, 0, 0, 0, 0, 0, 0]], [4]),
                               rtol=1e-12)


@settings(max_examples=25)
@given(st.data())
def test_matches_brute_force(data):
    n = data.draw(st.integers(1, 3), label="N")
    t = data.draw(st.integers(1, 5), label="T")
    c = data.draw(st.integers(2, 3), label="C")
    blank = data.draw(st.integers(0, c - 1), label="blank")
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    logits = rng.standard_normal((n, t, c)) * 2
    logit_len = np.array(data.draw(st.lists(st.integers(0, t), min_size=n, max_size=n)))
    label_len = np.array([data.draw(st.integers(0, int(k))) for k in logit_len])
    others = [k for k in range(c) if k != blank]
    labels = np.array(data.draw(st.lists(st.sampled_from(others), min_size=n * t,
                                         max_size=n * t))).reshape(n, t)
    collapse, merge, unique = (data.draw(st.booleans()) for _ in range(3))
    got = loss(logits, logit_len, labels, label_len, blank, collapse, merge, unique)
    np.testing.assert_allclose(got, brute_force(logits, logit_len, labels, label_len, blank,
                                                collapse, merge, unique), rtol=1e-10)
    got32 = loss(logits, logit_len, labels, label_len, blank, collapse, merge, unique,
                 dtype=np.float32)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, got, rtol=1e-5)


def test_long_sequences_do_not_underflow():
    """T = 2000 steps of near-uniform logits over 50 classes: every path's probability is
    about 50 ** -2000 (far below the smallest f64), the loss about 2000 ln 50."""
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((2, 2000, 50)) * 0.01
    labels = rng.integers(0, 49, (2, 2000))
    for dtype in (np.float32, np.float64):
        got = loss(logits, [2000, 1500], labels, [300, 40], dtype=dtype)
        assert np.all(np.isfinite(got)) and np.all(got > 1000) and np.all(got < 2000 * np.log(50))


def _targets(labels, label_len):
    labels, label_len = np.asarray(labels, np.int64), np.asarray(label_len, np.int64)
    used = np.arange(labels.shape[1]) < label_len[:, None]
    return sequence._decoded_targets(labels, used, CTCLossAttrs())


@settings(max_examples=60)
@given(st.data())
def test_compiled_recursion_matches_log_space(data):
    """The op's compiled recursion (mantissa and exponent per state) against the log-space
    one, on logits of every scale: at 300 and 1e4 most probabilities are below 2**-100 and
    are recomputed from their logarithms; -inf logits are probability 0."""
    n, t, c = data.draw(st.integers(1, 4)), data.draw(st.integers(0, 60)), data.draw(st.integers(2, 7))
    rng = np.random.default_rng(data.draw(st.integers(0, 10**6)))
    scale = data.draw(st.sampled_from([0.01, 1.0, 30.0, 300.0, 1e4]), label="scale")
    logits = rng.standard_normal((n, t, c)) * scale
    if data.draw(st.booleans(), label="-inf logits"):
        logits[rng.random(logits.shape) < 0.2] = -np.inf
    blank = data.draw(st.integers(0, c - 1), label="blank")
    logit_len = rng.integers(0, t + 1, n)
    label_len = np.minimum(rng.integers(0, t + 1, n), logit_len)
    others = np.array([k for k in range(c) if k != blank])
    labels = others[rng.integers(0, others.size, (n, t))]
    merge = data.draw(st.booleans(), label="merge_repeated")
    targets = _targets(labels, label_len)
    want = sequence.ctc_loss(logits, logit_len, targets, blank, merge)
    got = sequence.compiled_ctc_loss(logits, logit_len, targets, blank, merge)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_compiled_recursion_leaves_extreme_rows_to_log_space():
    """Log-probabilities below -2**30 (f64 logits of 1e10) are beyond the compiled loop's
    exponents: those rows, and only those, take the log-space recursion."""
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((3, 6, 4))
    logits[1] *= 1e10
    targets = _targets([[0, 1, 2, 0, 0, 0]] * 3, [3, 3, 3])
    calls = []
    real = sequence.ctc_loss

    def spy(x, *args):
        calls.append(x.shape[0])
        return real(x, *args)

    import unittest.mock
    with unittest.mock.patch.object(sequence, "ctc_loss", spy):
        got = sequence.compiled_ctc_loss(logits, np.array([6, 6, 6]), targets, 3, True)
    assert calls == [1]
    np.testing.assert_allclose(got, real(logits, np.array([6, 6, 6]), targets, 3, True),
                               rtol=1e-12)
    assert got[1] > 1e9


def test_nan_logits_give_nan_where_a_row_reads_them():
    logits = np.zeros((2, 4, 3))
    logits[0, 2, 1] = np.nan
    logits[1, 3, 0] = np.nan           # past row 1's logit_length: never read
    got = loss(logits, [4, 3], [[0, 1, 0, 0]] * 2, [2, 2])
    assert np.isnan(got[0]) and np.isfinite(got[1])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_rows_split_over_threads_give_the_same_loss(monkeypatch, threads):
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((7, 300, 20)).astype(np.float32)
    logit_len = rng.integers(0, 301, 7)
    label_len = np.minimum(rng.integers(0, 60, 7), logit_len)
    targets = _targets(rng.integers(0, 19, (7, 300)), label_len)
    one = sequence.compiled_ctc_loss(logits, logit_len, targets, 19, True)
    monkeypatch.setattr(sequence, "workers", lambda items, least: threads)
    np.testing.assert_array_equal(
        sequence.compiled_ctc_loss(logits, logit_len, targets, 19, True), one)


def test_impossible_alignment_is_infinite():
    # (1, 1) with merge_repeated needs a blank between: 3 steps; with 2 there is no path.
    got = loss(np.zeros((1, 2, 3)), [2], [[1, 1]], [2])
    assert got[0] == np.inf
    assert np.isfinite(loss(np.zeros((1, 2, 3)), [2], [[1, 1]], [2], merge=False)[0])


def test_zero_lengths():
    assert loss(np.zeros((1, 3, 3)), [0], [[0, 0, 0]], [0]).tolist() == [0.0]
    got = loss(np.zeros((1, 3, 3)), [3], [[0, 0, 0]], [0])       # blanks only: (1/3) ** 3
    np.testing.assert_allclose(got, [3 * np.log(3)])


@pytest.mark.parametrize("args, message", [
    ({"logit_len": [4, 5]}, r"logit_length\[1\] is 5, expected in \[0, 4\] \(T\)"),
    ({"label_len": [3, 3], "logit_len": [4, 2]}, r"label_length\[1\] is 3, expected in \[0, 2\]"),
    ({"labels": [[0, 1, 9, 0], [0, 0, 0, 0]]}, r"labels\[0, 2\] is 9, expected in \[0, 5\)"),
    ({"labels": [[0, 4, 1, 0], [0, 0, 0, 0]]}, r"labels\[0, 1\] is 4, .*not the blank_index 4"),
    ({"blank": 5}, r"blank_index is 5, expected in \[0, 5\)"),
])
def test_loss_errors(args, message):
    kw = {"logits": np.zeros((2, 4, 5)), "logit_len": [4, 4], "labels": np.zeros((2, 4)),
          "label_len": [3, 2], **args}
    with pytest.raises(OpError, match=message):
        loss(**kw)


def test_loss_shape_rules():
    spec = TensorSpec.make
    (out,) = CTCLoss4.infer(CTCLossAttrs(), spec("f32", [None, 20, 128]), spec("i32", [8]),
                            spec("i64", [8, 20]), spec("i32", [8]), spec("i64", []))
    assert out.shape == (Dim.of(8),) and out.etype.name == "f32"
    (out,) = CTCLoss4.infer(CTCLossAttrs(), spec("f64", None), spec("i32", None),
                            spec("i32", None), spec("i32", None))
    assert out.shape == (DYNAMIC,) and out.etype.name == "f64"
    with pytest.raises(ShapeError, match=r"labels has 21 where 20 is expected"):
        CTCLoss4.infer(CTCLossAttrs(), spec("f32", [8, 20, 5]), spec("i32", [8]),
                       spec("i32", [8, 21]), spec("i32", [8]))
    with pytest.raises(ShapeError, match="logits must be of a floating-point type"):
        CTCLoss4.infer(CTCLossAttrs(), spec("i32", [8, 20, 5]), spec("i32", [8]),
                       spec("i32", [8, 20]), spec("i32", [8]))
    with pytest.raises(ShapeError, match="blank_index must be a scalar"):
        CTCLoss4.infer(CTCLossAttrs(), spec("f32", [8, 20, 5]), spec("i32", [8]),
                       spec("i32", [8, 20]), spec("i32", [8]), spec("i32", [1]))


# ------------------------------------------------------------------ OpenVINO CPU plugin

ov = pytest.importorskip("openvino")
oracle = pytest.importorskip("oracle")
import openvino.opset1 as o1
import openvino.opset4 as o4


@pytest.mark.oracle
@settings(max_examples=15)
@given(st.data())
def test_oracle_greedy_decoder(data):
    t, n, c = (data.draw(st.integers(1, 6)) for _ in range(3))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    # Distinct values per step, so the argmax has no ties to break.
    x = np.argsort(rng.random((t, n, c)), axis=2).astype(np.float32)
    lengths = data.draw(st.lists(st.integers(0, t), min_size=n, max_size=n))
    mask = (np.arange(t)[:, None] < np.array(lengths)).astype(np.float32)
    merge = data.draw(st.booleans())
    params = [oracle.param([t, n, c], "f32", "data"), oracle.param([t, n], "f32", "mask")]
    node = o1.ctc_greedy_decoder(*params, merge_repeated=merge)
    oracle.compare(ov.Model([node], params, "greedy"), {"data": x, "mask": mask})


@pytest.mark.oracle
@settings(max_examples=20)
@given(st.data())
def test_oracle_ctc_loss(data):
    # The plugin's region: lengths >= 1 (with 0 it reads before its arrays), labels not
    # the blank, logits small (its log-softmax does not subtract the maximum).
    n, t, c = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 8)), data.draw(st.integers(2, 6))
    ltype = data.draw(st.sampled_from(["i32", "i64"]), label="length type")
    with_blank = data.draw(st.booleans(), label="blank input")
    blank = data.draw(st.integers(0, c - 1)) if with_blank else c - 1
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    logits = (rng.standard_normal((n, t, c)) * 2).astype(np.float32)
    logit_len = np.array(data.draw(st.lists(st.integers(1, t), min_size=n, max_size=n)))
    label_len = np.array([data.draw(st.integers(1, int(k))) for k in logit_len])
    others = [k for k in range(c) if k != blank]
    labels = np.array(data.draw(st.lists(st.sampled_from(others), min_size=n * t,
                                         max_size=n * t))).reshape(n, t)
    collapse, merge, unique = (data.draw(st.booleans()) for _ in range(3))
    np_l = oracle.NP_TYPE[ltype]
    params = [oracle.param([n, t, c], "f32", "logits"), oracle.param([n], ltype, "logit_len"),
              oracle.param([n, t], ltype, "labels"), oracle.param([n], ltype, "label_len")]
    feed = {"logits": logits, "logit_len": logit_len.astype(np_l), "labels": labels.astype(np_l),
            "label_len": label_len.astype(np_l)}
    args = list(params)
    if with_blank:
        args.append(ov.op.Constant(np.array(blank, np_l)))
    node = o4.ctc_loss(*args, preprocess_collapse_repeated=collapse, ctc_merge_repeated=merge,
                       unique=unique)
    # Both sum in f32 in a different order (the plugin backward, irrun forward): a few ulp
    # per step of up to 8 steps.
    oracle.compare(ov.Model([node], params, "ctc"), feed, rtol=1e-5, atol=1e-5)
