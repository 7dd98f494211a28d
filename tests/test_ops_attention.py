"""ScaledDotProductAttention-13: differential tests against OpenVINO's CPU plugin, the
spec's shape examples, shape-rule errors, and the memory-bounded kernel."""
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irrun.errors import OpProblem, ShapeError
from irrun.ir.shapes import Dim, TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset13 as o13
from test_ops_elementwise import DTYPES, infer, model, param, run_op

from irrun.ops.attention import attention


def S(etype, shape):
    return TensorSpec.make(etype, shape)


def reference(q, k, v, mask=None, scale=None, causal=False):
    """The spec's pseudo-code in f64 (numpy broadcasting of the batch dims)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    L, S_ = q.shape[-2], k.shape[-2]
    sc = 1 / np.sqrt(q.shape[-1]) if scale is None else float(scale)
    bias = np.zeros((L, S_))
    if causal:
        bias = np.triu(np.full((L, S_), -np.inf), 1)
    elif mask is not None:
        bias = np.where(mask, 0, -np.inf) if mask.dtype == bool else bias + mask.astype(np.float64)
    s = (q * sc) @ np.swapaxes(k, -1, -2) + bias
    with np.errstate(invalid="ignore"):
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        return (s / s.sum(axis=-1, keepdims=True)) @ v


# ------------------------------------------------------------------ OpenVINO differential

@st.composite
def sdpa_case(draw):
    nbatch = draw(st.integers(1, 2))
    batch = draw(st.lists(st.integers(1, 3), min_size=nbatch, max_size=nbatch))

    def some_ones(dims):
        return [1 if draw(st.booleans()) else d for d in dims]

    L, S_ = draw(st.integers(1, 6)), draw(st.integers(1, 7))
    E, Ev = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    q_b, k_b = batch, some_ones(batch)            # key/value heads may broadcast (MQA)
    v_b = k_b if draw(st.booleans()) else some_ones(batch)
    mask_kind = draw(st.sampled_from(["none", "bool", "float", "zero"]))
    mask_shape = None
    if mask_kind in ("bool", "float"):
        mrank = draw(st.integers(2, 2 + nbatch))
        mb = some_ones(batch[len(batch) - (mrank - 2):]) if mrank > 2 else []
        mask_shape = mb + [L if draw(st.booleans()) else 1, S_ if draw(st.booleans()) else 1]
    return {"q": q_b + [L, E], "k": k_b + [S_, E], "v": v_b + [S_, Ev], "mask_kind": mask_kind,
            "mask_shape": mask_shape, "causal": draw(st.booleans()),
            "scale": draw(st.sampled_from([None, 0.25, 1.5])),
            "etype": draw(st.sampled_from(["f32", "f32", "f16"]))}


@pytest.mark.oracle
@settings(max_examples=20)
@given(case=sdpa_case(), seed=st.integers(0, 2**32 - 1))
def test_sdpa_matches_openvino(tmp_path_factory, case, seed):
    rng = np.random.default_rng(seed)
    et = case["etype"]
    feed = {n: (rng.standard_normal(case[n]) * 2).astype(DTYPES[et]) for n in ("q", "k", "v")}
    pq, pk, pv = (param(n, case[n], et) for n in ("q", "k", "v"))
    params, args = [pq, pk, pv], [pq, pk, pv]
    if case["mask_kind"] == "bool":
        # At least one key per row stays visible, so no row is all NaN (tested below).
        m = rng.random(case["mask_shape"]) < 0.7
        m[..., 0] = True
        pm = param("m", m.shape, ov.Type.boolean)
        feed["m"] = m
        params.append(pm)
        args.append(pm)
    elif case["mask_kind"] == "float":
        m = (rng.standard_normal(case["mask_shape"]) * 3).astype(DTYPES[et])
        pm = param("m", m.shape, et)
        feed["m"] = m
        params.append(pm)
        args.append(pm)
    elif case["mask_kind"] == "zero" or case["scale"] is not None:
        args.append(o13.constant(np.array(0, DTYPES[et])))
    if case["scale"] is not None:
        args.append(o13.constant(np.array(case["scale"], DTYPES[et])))
    node = o13.scaled_dot_product_attention(*args, causal=case["causal"])
    # f32: both compute in f32, with different summation orders (ratios of sums of a few
    # exps, ~1e-6); f16: one f16 rounding of the output (2**-11 relative).
    tol = 2e-3 if et == "f16" else 2e-5
    oracle.compare(model([node], params), feed, rtol=tol, atol=tol,
                   tmpdir=tmp_path_factory.getbasetemp())
    # And irrun agrees with the spec's pseudo-code computed in f64.
    mask = feed.get("m")
    got = attention(feed["q"], feed["k"], feed["v"], None if case["causal"] else mask,
                    None if case["scale"] is None else np.array(case["scale"], DTYPES[et]),
                    case["causal"])
    scale = None if case["scale"] is None else float(np.array(case["scale"], DTYPES[et]))
    np.testing.assert_allclose(got.astype(np.float64),
                               reference(feed["q"], feed["k"], feed["v"], mask, scale, case["causal"]),
                               rtol=tol, atol=tol)


@pytest.mark.oracle
@pytest.mark.parametrize("what", ["masked_row", "l0", "e0"])
def test_sdpa_edge_cases_match_openvino(tmp_path, what):
    """A fully masked row gives NaN, L = 0 an empty result, E = 0 the mean of the values
    (the scale multiplies the query first). S = 0: see the next test."""
    shapes = {"masked_row": ([1, 3, 2], [1, 4, 2], [1, 4, 2]), "s0": ([2, 3, 2], [2, 0, 2], [2, 0, 3]),
              "l0": ([1, 0, 2], [1, 3, 2], [1, 3, 2]), "e0": ([1, 3, 0], [1, 4, 0], [1, 4, 2])}[what]
    rng = np.random.default_rng(1)
    feed = {n: rng.standard_normal(s).astype(np.float32) for n, s in zip("qkv", shapes)}
    params = [param(n, s, "f32") for n, s in zip("qkv", shapes)]
    args = list(params)
    if what == "masked_row":
        m = np.ones((1, 3, 4), bool)
        m[0, 1] = False
        feed["m"] = m
        params.append(param("m", m.shape, ov.Type.boolean))
        args.append(params[-1])
    node = o13.scaled_dot_product_attention(*args, causal=False)
    got, _ = oracle.compare(model([node], params), feed, tmpdir=tmp_path)
    if what == "masked_row":
        assert np.isnan(got[0][0, 1]).all() and np.isfinite(got[0][0, [0, 2]]).all()
    if what == "e0":
        np.testing.assert_allclose(got[0][0], np.broadcast_to(feed["v"][0].mean(0), (3, 2)), rtol=1e-6)


def test_empty_source_gives_zeros():
    """S = 0: each output row is a weighted sum over no values, 0. (OpenVINO's CPU plugin
    returns uninitialised memory here, so there is nothing to compare with.)"""
    q = np.ones((2, 3, 2), np.float32)
    k = np.ones((2, 0, 2), np.float32)
    v = np.ones((2, 0, 3), np.float32)
    (y,) = run_op("ScaledDotProductAttention", {"causal": "true"}, q, k, v, opset=13)
    assert y.shape == (2, 3, 3) and y.dtype == np.float32 and not y.any()


# ------------------------------------------------------------------ spec examples (shapes)

def _xml_example(q, k, v, m, out):
    (spec,) = infer("ScaledDotProductAttention", {"causal": "false"},
                    S("f32", q), S("f32", k), S("f32", v), S("f32", m), opset=13)
    assert format_shape(spec.shape) == out


def test_spec_example_1_dynamic_dims():
    _xml_example([1, None, 80], [1, None, 80], [1, None, 80], [1, None, None], "[1,?,80]")


def test_spec_example_2_multiple_batch_dims():
    _xml_example([1, 2, 3, None, 80], [1, 2, 3, None, 80], [1, 2, 3, None, 80],
                 [1, 2, 3, None, None], "[1,2,3,?,80]")


def test_spec_example_3_batch_broadcasting():
    _xml_example([4, 6, 10, None, 80], [1, 6, 10, None, 80], [1, 1, 1, None, 80],
                 [1, 1, 1, None, None], "[4,6,10,?,80]")


def test_spec_example_5_mask_broadcasting():
    _xml_example([2, 16, 80], [2, 32, 80], [2, 32, 80], [2, 1, 1], "[2,16,80]")


def test_shape_rule_dynamic_rank_and_value_dim():
    (spec,) = infer("ScaledDotProductAttention", {"causal": "true"},
                    S("f16", None), S("f16", [2, 5, 4]), S("f16", [2, 5, 7]), opset=13)
    assert spec.shape is None and spec.etype.name == "f16"
    (spec,) = infer("ScaledDotProductAttention", {"causal": "true"},
                    S("f32", [Dim(2, 4), 3, 4]), S("f32", [None, 5, 4]), S("f32", [1, 5, 7]), opset=13)
    assert format_shape(spec.shape) == "[2..4,3,7]"


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("shapes, message", [
    (([1, 8, 3, 4], [1, 2, 5, 4], [1, 2, 5, 4]), r"do not broadcast .*query batch dims \[1,8\] and key batch dims \[1,2\]"),  # GQA
    (([1, 3, 4], [1, 5, 3], [1, 5, 4]), r"differ in the embedding dim E \(4 vs 3\)"),
    (([1, 3, 4], [1, 5, 4], [1, 6, 4]), r"differ in the source length S \(5 vs 6\)"),
    (([3, 4], [1, 5, 4], [1, 5, 4]), r"query \(input 0\) must have rank 3 or more"),
])
def test_shape_rule_errors(shapes, message):
    with pytest.raises(ShapeError, match=message):
        infer("ScaledDotProductAttention", {"causal": "false"}, *(S("f32", s) for s in shapes), opset=13)


def test_type_and_mask_errors():
    q, k, v = S("f32", [1, 3, 4]), S("f32", [1, 5, 4]), S("f32", [1, 5, 2])
    with pytest.raises(ShapeError, match="must be floating-point, got i32"):
        infer("ScaledDotProductAttention", {"causal": "false"}, S("i32", [1, 3, 4]), k, v, opset=13)
    with pytest.raises(ShapeError, match=r"value \(input 2\) must have the query's type f32, got f16"):
        infer("ScaledDotProductAttention", {"causal": "false"}, q, k, S("f16", [1, 5, 2]), opset=13)
    with pytest.raises(ShapeError, match="attention_mask .* must be boolean or of the query's type"):
        infer("ScaledDotProductAttention", {"causal": "false"}, q, k, v, S("i64", [3, 5]), opset=13)
    with pytest.raises(ShapeError, match="must be a scalar or have rank 2 or more"):
        infer("ScaledDotProductAttention", {"causal": "false"}, q, k, v, S("f32", [5]), opset=13)
    with pytest.raises(ShapeError, match=r"its L dim is 2, the inputs' is 3"):
        infer("ScaledDotProductAttention", {"causal": "false"}, q, k, v, S("boolean", [2, 5]), opset=13)
    with pytest.raises(ShapeError, match=r"scale \(input 4\) must be a scalar or hold one element"):
        infer("ScaledDotProductAttention", {"causal": "false"}, q, k, v, S("f32", []), S("f32", [2]),
              opset=13)
    # causal=true ignores the mask's shape, as OpenVINO does
    (spec,) = infer("ScaledDotProductAttention", {"causal": "true"}, q, k, v, S("f32", [2, 7]), opset=13)
    assert format_shape(spec.shape) == "[1,3,2]"
    import irrun.ir.registry as R
    from irrun.ir.registry import lookup
    _, problems, _ = R.parse_attrs(lookup("ScaledDotProductAttention", "opset13").attrs, {})
    assert any("causal" in p[0] for p in problems)       # causal is required


def test_kernel_refuses_a_mask_that_does_not_fit():
    q = np.zeros((1, 3, 4), np.float32)
    k = np.zeros((1, 5, 4), np.float32)
    with pytest.raises(OpProblem, match=r"attention_mask \[2, 5\] does not broadcast to \[..., 3, 5\]"):
        attention(q, k, k, np.zeros((2, 5), np.float32), None, False)
    with pytest.raises(OpProblem, match=r"batch dims do not broadcast .*query \[2\] and key \[3\]"):
        attention(np.zeros((2, 3, 4)), np.zeros((3, 5, 4)), np.zeros((3, 5, 4)), None, None, False)


# ------------------------------------------------------------------ memory-bounded kernel

@given(L=st.integers(1, 40), S_=st.integers(1, 40), heads=st.integers(1, 5),
       budget=st.sampled_from([1, 7, 64, 500, 1 << 22]), causal=st.booleans(),
       mask_kind=st.sampled_from(["none", "per_head", "shared", "bool_per_head", "bool_rows"]),
       seed=st.integers(0, 2**32 - 1))
def test_blocked_kernel_equals_reference(L, S_, heads, budget, causal, mask_kind, seed):
    """Any score budget (one row of one head at a time up to everything at once) gives the
    spec's result, for per-head and shared masks."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, heads, L, 4))
    k = rng.standard_normal((2, 1, S_, 4))
    v = rng.standard_normal((1, heads, S_, 3))
    mask = None
    if mask_kind == "per_head":
        mask = rng.standard_normal((2, heads, L, S_))
    elif mask_kind == "shared":
        mask = rng.standard_normal((2, 1, 1, S_))
    elif mask_kind == "bool_per_head":
        mask = rng.random((2, heads, L, S_)) < 0.8
        mask[..., 0] = True
    elif mask_kind == "bool_rows":
        mask = rng.random((L, 1)) < 0.7            # whole rows masked: NaN rows, in both
    got = attention(q, k, v, None if causal else mask, None, causal, budget=budget)
    np.testing.assert_allclose(got, reference(q, k, v, mask, None, causal), rtol=1e-12, atol=1e-12,
                               equal_nan=True)


def test_long_sequences_never_hold_all_scores_at_once():
    """One head with L = S = 2048: the full [L, S] scores are 16 MiB of f32; with a budget
    of 2**18 scores the kernel's peak allocation stays far below that."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2048, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2048, 8)).astype(np.float32)
    tracemalloc.start()
    try:
        attention(q, k, k, None, None, True, budget=1 << 18)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"peak {peak} bytes"
    small = attention(q[:, :64], k[:, :64], k[:, :64], None, None, True, budget=1 << 18)
    np.testing.assert_allclose(small, reference(q[:, :64], k[:, :64], k[:, :64], causal=True),
                               rtol=1e-4, atol=1e-5)


def test_f16_inputs_compute_in_f32():
    """Scores of 75000 overflow f16 (inf - inf would give NaN) but not the f32 softmax
    irrun and OpenVINO use."""
    q = np.full((1, 1, 1), 300.0, np.float16)
    k = np.array([[[250.0], [249.0]]], np.float16)
    v = np.array([[[1.0], [3.0]]], np.float16)
    (y,) = run_op("ScaledDotProductAttention", {"causal": "false"}, q, k, v, opset=13)
    assert y.dtype == np.float16 and y[0, 0, 0] == np.float16(1.0)


def test_bf16_and_f64_keep_their_type():
    import ml_dtypes
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 3, 4)) for _ in range(3))
    want = reference(q, k, v, causal=True)
    (y,) = run_op("ScaledDotProductAttention", {"causal": "true"}, q, k, v, opset=13)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, want, rtol=1e-12)
    b = [x.astype(ml_dtypes.bfloat16) for x in (q, k, v)]
    (y,) = run_op("ScaledDotProductAttention", {"causal": "true"}, *b, opset=13)
    assert y.dtype == b[0].dtype
    np.testing.assert_allclose(y.astype(np.float64), reference(*b, causal=True), rtol=2e-2, atol=2e-2)
