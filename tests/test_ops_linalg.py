"""Einsum-7 and Inverse-14: differential tests against OpenVINO's CPU plugin, the spec's
examples verbatim, shape rules and errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irrun.errors import OpError, ShapeError
from irrun.ir.shapes import Dim, TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset7 as o7
import openvino.opset14 as o14
from test_ops_elementwise import DTYPES, infer, model, param, run_op


def S(etype, shape):
    return TensorSpec.make(etype, shape)


def einsum(eq, *xs):
    return run_op("Einsum", {"equation": eq}, *xs, opset=7)[0]


# ------------------------------------------------------------------ spec examples, verbatim

def test_einsum_spec_examples():
    A3 = np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],
                   [[2.0, 4.0, 6.0], [8.0, 10.0, 12.0], [14.0, 16.0, 18.0]]], np.float32)
    assert einsum("i,i->", np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)) == 32.0
    A = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], np.float32)
    assert einsum("ij,j->i", A, np.array([4.0, 5.0, 6.0], np.float32)).tolist() == [32.0, 32.0]
    assert einsum("kii->k", A3).tolist() == [15.0, 30.0]
    assert einsum("kii->ki", A3).tolist() == [[1.0, 5.0, 9.0], [2.0, 10.0, 18.0]]
    assert einsum("ijk->kij", A3[:1]).tolist() == [[[1.0, 4.0, 7.0]], [[2.0, 5.0, 8.0]], [[3.0, 6.0, 9.0]]]
    assert einsum("a...->...", A3[0]).tolist() == [12.0, 15.0, 18.0]
    assert einsum("a...,...->a...", A3[0], np.array([0.5], np.float32)).tolist() == \
        [[0.5, 1.0, 1.5], [2.0, 2.5, 3.0], [3.5, 4.0, 4.5]]
    assert einsum("AbC", np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]], np.float32)).tolist() == \
        [[[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]]
    # the shape examples of the text
    (s,) = infer("Einsum", {"equation": "ab,bcd,bc->ca"}, S("f32", [2, 5]), S("f32", [5, 3, 6]),
                 S("f32", [5, 3]), opset=7)
    assert format_shape(s.shape) == "[3,2]"
    (s,) = infer("Einsum", {"equation": "a...b,b...->a..."}, S("f32", [9, 1, 4, 3]),
                 S("f32", [3, 11, 7, 1]), opset=7)
    assert format_shape(s.shape) == "[9,11,7,4]"
    (s,) = infer("Einsum", {"equation": "ijkj->ij"}, S("f32", [2, 4, 5, 4]), opset=7)
    assert format_shape(s.shape) == "[2,4]"
    (s,) = infer("Einsum", {"equation": "dbbc,ca"}, S("f32", [2, 3, 3, 4]), S("f32", [4, 5]), opset=7)
    assert format_shape(s.shape) == "[5,2]"           # implicit: "dbbc,ca->ad"
    assert einsum(" i j , j k -> i k ", np.eye(2, dtype=np.float32), np.ones((2, 2), np.float32)).shape == (2, 2)


def test_inverse_spec_examples_keep_shapes():
    for shape, attrs in (([3, 3], {}), ([2, 4, 4], {"adjoint": "true"}), ([5, 4, 3, 2, 2], {})):
        (s,) = infer("Inverse", attrs, S("f32", shape), opset=14)
        assert format_shape(s.shape) == format_shape(S("f32", shape).shape)


def test_inverse_values_and_adjoint():
    a = np.array([[[4.0, 7.0], [2.0, 6.0]], [[1.0, 2.0], [3.0, 4.0]]], np.float32)
    (y,) = run_op("Inverse", {}, a, opset=14)
    np.testing.assert_allclose(y @ a, np.broadcast_to(np.eye(2), a.shape), atol=1e-6)
    (adj,) = run_op("Inverse", {"adjoint": "true"}, a, opset=14)
    np.testing.assert_allclose(adj, np.swapaxes(y, -1, -2), rtol=1e-6)
    assert y.dtype == np.float32


# ------------------------------------------------------------------ OpenVINO differential

EQUATIONS = [
    # (equation, input shapes)
    ("ij,jk->ik", [[3, 4], [4, 5]]),
    ("bij,bjk->bik", [[2, 3, 4], [2, 4, 2]]),
    ("bhqd,bhkd->bhqk", [[1, 2, 3, 4], [1, 2, 5, 4]]),          # Keras attention scores
    ("abcd,cde->abe", [[2, 3, 4, 5], [4, 5, 6]]),              # Keras EinsumDense
    ("ii->i", [[4, 4]]),
    ("ii", [[3, 3]]),                                          # implicit trace (not in OpenVINO)
    ("ijkj->ij", [[2, 4, 3, 4]]),
    ("...ij,...jk->...ik", [[2, 3, 2, 4], [3, 4, 5]]),
    ("a...b,b...->a...", [[3, 1, 4, 2], [2, 5, 1]]),
    ("i,j", [[3], [4]]),                                       # implicit outer product
    ("ab,ba", [[3, 4], [4, 3]]),                               # implicit: everything reduced
    ("ab,bc,cd->ad", [[2, 3], [3, 4], [4, 2]]),
    ("ij->ji", [[3, 5]]),
    ("i,i->i", [[4], [1]]),                                    # a label that broadcasts
]


@pytest.mark.oracle
@settings(max_examples=20)
@given(case=st.sampled_from([c for c in EQUATIONS if c[0] != "ii"]),
       etype=st.sampled_from(["f32", "f32", "i32"]),
       seed=st.integers(0, 2**32 - 1))
def test_einsum_matches_openvino(tmp_path_factory, case, etype, seed):
    """("ii" is left out: the CPU plugin's Einsum decomposition fails to compile a full
    trace to a scalar.)"""
    eq, shapes = case
    rng = np.random.default_rng(seed)
    if etype == "i32":
        xs = [rng.integers(-20, 20, s).astype(np.int32) for s in shapes]
    else:
        xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ps = [param(f"x{k}", s, etype) for k, s in enumerate(shapes)]
    node = o7.einsum([p.output(0) for p in ps], eq)
    oracle.compare(model([node], ps), {f"x{k}": x for k, x in enumerate(xs)}, rtol=1e-5, atol=1e-5,
                   tmpdir=tmp_path_factory.getbasetemp())


@pytest.mark.oracle
@settings(max_examples=15)
@given(batch=st.lists(st.integers(1, 3), max_size=2), n=st.integers(1, 5), adjoint=st.booleans(),
       etype=st.sampled_from(["f32", "f16"]), seed=st.integers(0, 2**32 - 1))
def test_inverse_matches_openvino(tmp_path_factory, batch, n, adjoint, etype, seed):
    """Well-conditioned matrices (the identity plus a small random part), so f32 LU and
    irrun's f64 inverse agree to a few ulp."""
    rng = np.random.default_rng(seed)
    a = (np.eye(n) * 2 + rng.uniform(-0.5, 0.5, batch + [n, n])).astype(DTYPES[etype])
    px = param("a", a.shape, etype)
    tol = 2e-3 if etype == "f16" else 2e-5
    oracle.compare(model([o14.inverse(px, adjoint)], [px]), {"a": a}, rtol=tol, atol=tol,
                   tmpdir=tmp_path_factory.getbasetemp())


@given(eq_case=st.sampled_from(EQUATIONS), seed=st.integers(0, 2**32 - 1))
def test_einsum_infer_agrees_with_run(eq_case, seed):
    eq, shapes = eq_case
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(s) for s in shapes]
    (y,) = run_op("Einsum", {"equation": eq}, *xs, opset=7)     # run_op checks shape and dtype
    (s,) = infer("Einsum", {"equation": eq}, *(S("f64", sh) for sh in shapes), opset=7)
    assert tuple(d.value for d in s.shape) == y.shape


# ------------------------------------------------------------------ rules and errors

@pytest.mark.parametrize("eq, shapes, message", [
    ("ij,jk->ik", [[2, 3], [4, 5]], r"label 'j' has size 3 in one input and 4 in input 1"),
    ("ij->ik", [[2, 3]], r"output label 'k' is in no input subscript"),
    ("ij->ii", [[2, 3]], r"output label 'i' appears twice"),
    ("ij", [[2, 3, 4]], r"input 0 has rank 3 .* covers 2 dims"),
    ("ii->i", [[2, 3]], r"label 'i' repeats in input 0 over dims of different sizes"),
    ("i1,j", [[2], [3]], r"subscript 'i1' is not letters"),
    ("...i...", [[2, 3]], r"subscript '...i...' is not letters with at most one ellipsis"),
    ("ij->...", [[2, 3]], r"the output has an ellipsis but no input has"),
    ("i,j->ij", [[2]], r"has 2 input subscripts but the layer has 1 inputs"),
    ("a->b->c", [[2]], r"more than one '->'"),
])
def test_einsum_errors(eq, shapes, message):
    with pytest.raises(ShapeError, match=message):
        infer("Einsum", {"equation": eq}, *(S("f32", s) for s in shapes), opset=7)


def test_einsum_type_rules_and_dynamic_dims():
    with pytest.raises(ShapeError, match="input 0 is f32, input 1 is f16"):
        infer("Einsum", {"equation": "i,i"}, S("f32", [2]), S("f16", [2]), opset=7)
    with pytest.raises(ShapeError, match="numeric inputs, got boolean"):
        infer("Einsum", {"equation": "i"}, S("boolean", [2]), opset=7)
    (s,) = infer("Einsum", {"equation": "ij,jk->ik"}, S("f32", [None, 3]), S("f32", [None, Dim(2, 5)]),
                 opset=7)
    assert format_shape(s.shape) == "[?,2..5]"
    (s,) = infer("Einsum", {"equation": "ij,jk->ik"}, S("f32", None), S("f32", [3, 4]), opset=7)
    assert s.shape is None
    (y,) = run_op("Einsum", {"equation": "ij,jk->ik"}, np.full((2, 2), 2**30, np.int32),
                  np.full((2, 2), 2, np.int32), opset=7)
    assert y.tolist() == [[0, 0], [0, 0]]             # int32 wraps, as in C++


def test_inverse_errors():
    with pytest.raises(ShapeError, match=r"square matrices, got \[2,3\]"):
        infer("Inverse", {}, S("f32", [2, 3]), opset=14)
    with pytest.raises(ShapeError, match="rank 2 or more"):
        infer("Inverse", {}, S("f32", [3]), opset=14)
    with pytest.raises(ShapeError, match="floating-point input, got i32"):
        infer("Inverse", {}, S("i32", [3, 3]), opset=14)
    singular = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 4.0]]], np.float32)
    with pytest.raises(OpError, match=r"the matrix at batch position \[1\] is singular"):
        import irrun.ir.registry as R
        from irrun.errors import OpProblem
        from irrun.ir.registry import lookup
        op = lookup("Inverse", "opset14")
        attrs, _, _ = R.parse_attrs(op.attrs, {})
        try:
            op.run(attrs, singular)
        except OpProblem as e:
            raise OpError(str(e)) from e
    (s,) = infer("Inverse", {}, S("f16", [None, 4, None]), opset=14)
    assert format_shape(s.shape) == "[?,4,?]"


def test_einsum_checks_the_output_size_before_allocating():
    from irrun.errors import ResourceError
    x = np.ones(10**6, np.float32)
    with pytest.raises(ResourceError, match=r"Einsum output: shape \[1000000, 1000000\] of float32"):
        run_op("Einsum", {"equation": "i,j->ij"}, x, x, opset=7)
