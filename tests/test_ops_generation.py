"""Generation ops: Eye-9, RandomUniform-8, Multinomial-13 -- spec examples, shape rules,
errors, and the random generators reproducing OpenVINO's CPU plugin bit for bit."""
import tempfile

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irrun.ir.registry as R
from irrun.errors import OpError, ShapeError
from irrun.ir.etypes import from_dtype
from irrun.opkit.llvm import cpu_flags
from irrun.ir.registry import lookup
from irrun.ir.shapes import TensorSpec, format_shape

oracle = pytest.importorskip("oracle")
ov = oracle.ov
import openvino.opset8 as o8
import openvino.opset9 as o9
import openvino.opset13 as o13

import irrun.ops.generation as G

NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "bf16": ml_dtypes.bfloat16,
      "i32": np.int32, "i64": np.int64, "i8": np.int8, "u8": np.uint8}


def op_of(type_, opset):
    return lookup(type_, f"opset{opset}")


def attrs_of(type_, opset, data):
    a, problems, _ = R.parse_attrs(op_of(type_, opset).attrs, data)
    assert not problems, problems
    return a


def run_op(type_, opset, data, *arrays):
    op = op_of(type_, opset)
    a = attrs_of(type_, opset, data)
    specs = [TensorSpec.of_value(x, from_dtype(x.dtype)) for x in arrays]
    out_specs = op.infer(a, *specs)
    outs = op.run(a, *arrays)
    for s, y in zip(out_specs, outs):
        assert y.dtype == s.etype.dtype
        assert s.shape is not None and all(d.contains(n) for d, n in zip(s.shape, y.shape))
    return outs


def infer(type_, opset, data, *specs):
    return op_of(type_, opset).infer(attrs_of(type_, opset, data), *specs)


def S(etype, shape):
    return TensorSpec.make(etype, shape)


def V(values, dtype=np.int64):
    v = np.array(values, dtype)
    return TensorSpec.of_value(v, from_dtype(v.dtype))


def run_both(model, feed, tmp):
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        xml = oracle.save(model, d)
        return oracle.ov_run(xml, feed), oracle.irrun_run(xml, feed)


# ---------------------------------------------------------------- Eye


def test_eye_spec_examples():
    i32 = lambda v: np.array(v, np.int32)
    (y,) = run_op("Eye", 9, {"output_type": "i32"}, i32(3), i32(4), i32(2))
    assert y.dtype == np.int32 and y.tolist() == [[0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]]
    (y,) = run_op("Eye", 9, {"output_type": "i32"}, i32(3), i32(4), i32(-1))
    assert y.tolist() == [[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
    # Example 3: num_columns is not printed; a square matrix (2) fits the printed output
    (y,) = run_op("Eye", 9, {"output_type": "f16"}, i32(2), i32(2), i32(5), i32([1, 2]))
    assert y.dtype == np.float16 and y.shape == (1, 2, 2, 2) and not y.any()


def test_eye_spec_shape_examples():
    (s,) = infer("Eye", 9, {"output_type": "i8"}, V(5, np.int32), V(5, np.int32), S("i32", []))
    assert s.etype.name == "i8" and format_shape(s.shape) == "[5,5]"
    (s,) = infer("Eye", 9, {"output_type": "f32"}, S("i32", []), S("i32", []), S("i32", []),
                 V([2, 3], np.int32))
    assert s.etype.name == "f32" and format_shape(s.shape) == "[2,3,?,?]"


def test_eye_shape_rules_and_errors():
    (s,) = infer("Eye", 9, {"output_type": "f32"}, V([4]), S("i64", [1]), V(0), S("i64", [3]))
    assert format_shape(s.shape) == "[?,?,?,4,?]"
    (s,) = infer("Eye", 9, {"output_type": "f32"}, V(4), V(2), V(0), S("i64", [None]))
    assert s.shape is None
    with pytest.raises(ShapeError, match=r"num_rows \(input 0\) must be i32 or i64, got f32"):
        infer("Eye", 9, {"output_type": "f32"}, S("f32", []), V(2), V(0))
    with pytest.raises(ShapeError, match=r"num_columns \(input 1\) must be a scalar or a 1-element"):
        infer("Eye", 9, {"output_type": "f32"}, V(2), S("i64", [2]), V(0))
    with pytest.raises(ShapeError, match=r"num_rows \(input 0\) must be non-negative, got -1"):
        infer("Eye", 9, {"output_type": "f32"}, V(-1), V(2), V(0))
    with pytest.raises(ShapeError, match=r"batch_shape \(input 3\) element 1 is -2"):
        infer("Eye", 9, {"output_type": "f32"}, V(2), V(2), V(0), V([1, -2]))
    with pytest.raises(ShapeError, match="output_type must be a numeric type"):
        infer("Eye", 9, {"output_type": "boolean"}, V(2), V(2), V(0))
    with pytest.raises(OpError, match=r"batch_shape \(input 3\) element 0 is -3"):
        G.Eye9.run(attrs_of("Eye", 9, {"output_type": "f32"}), np.array(2), np.array(2),
                   np.array(0), np.array([-3]))


@pytest.mark.oracle
@settings(max_examples=8)
@given(n=st.integers(0, 5), m=st.integers(0, 5), k=st.integers(-7, 7),
       batch=st.lists(st.integers(1, 3), max_size=2),
       et=st.sampled_from(["f32", "i32", "i64", "u8", "f16"]), itype=st.sampled_from(["i32", "i64"]))
def test_eye_matches_openvino(tmp_path_factory, n, m, k, batch, et, itype):
    ps = [o8.parameter([], getattr(ov.Type, itype), name=nm) for nm in ("n", "m", "k")]
    outs = [o9.eye(ps[0], ps[1], ps[2], et)]
    if batch:
        outs.append(o9.eye(ps[0], ps[1], ps[2], et, ov.op.Constant(np.array(batch, NP[itype]))))
    feed = {"n": np.array(n, NP[itype]), "m": np.array(m, NP[itype]), "k": np.array(k, NP[itype])}
    expected, got = run_both(ov.Model([o8.result(o) for o in outs], ps), feed,
                             tmp_path_factory.getbasetemp())
    for g, e in zip(got, expected):
        oracle.assert_same(g, e)


# ---------------------------------------------------------------- RandomUniform


def ru_attrs(output_type, gs, os_, alignment="tensorflow"):
    return attrs_of("RandomUniform", 8, {"output_type": output_type, "global_seed": str(gs),
                                         "op_seed": str(os_), "alignment": alignment})


def test_random_uniform_spec_examples_philox():
    y = G.random_uniform(ru_attrs("f32", 150, 10), (3, 3), 0.0, 1.0)
    np.testing.assert_array_equal(y, np.array([[0.7011236, 0.30539632, 0.93931055],
                                               [0.9456035, 0.11694777, 0.50770056],
                                               [0.5197197, 0.22727466, 0.991374]], np.float32))
    y = G.random_uniform(ru_attrs("i32", 80, 100), (2, 3), 50, 100)
    assert y.dtype == np.int32 and y.tolist() == [[65, 70, 56], [59, 82, 92]]
    # Example 2 (f64, [[5.65927959 4.23122376] [2.67008206 2.36423758]]) is the reference
    # implementation's 52-bit draw; the CPU plugin (and so irrun) draws f64 as f32 and
    # converts. The spec's numbers are the same Philox words read as a double:
    u = G.philox4x32(80, 100, 2).reshape(-1, 2).astype(np.uint64)
    bits = ((u[:, 0] & np.uint64(0xFFFFF)) << np.uint64(32)) | u[:, 1] | (np.uint64(1023) << np.uint64(52))
    ref = (bits.view(np.float64) - 1.0) * 8 + 2
    np.testing.assert_allclose(ref, [5.65927959, 4.23122376, 2.67008206, 2.36423758], rtol=1e-8)
    y = G.random_uniform(ru_attrs("f64", 80, 100), (2, 2), 2.0, 10.0)
    f = G.random_uniform(ru_attrs("f32", 80, 100), (2, 2), np.float32(2.0), np.float32(10.0))
    assert y.dtype == np.float64 and np.array_equal(y, f.astype(np.float64))


def test_random_uniform_spec_ir_example_shape():
    (s,) = infer("RandomUniform", 8, {"output_type": "f32", "global_seed": "234", "op_seed": "148"},
                 V([2, 3, 10], np.int32), S("f32", []), S("f32", []))
    assert s.etype.name == "f32" and format_shape(s.shape) == "[2,3,10]"
    (s,) = infer("RandomUniform", 8, {"output_type": "i64"}, S("i64", [3]), S("i64", [1]), S("i64", []))
    assert format_shape(s.shape) == "[?,?,?]"
    (s,) = infer("RandomUniform", 8, {"output_type": "i64"}, S("i64", [None]), S("i64", [1]), S("i64", []))
    assert s.shape is None
    assert attrs_of("RandomUniform", 8, {"output_type": "f32"}).alignment == "tensorflow"


def test_random_uniform_errors():
    with pytest.raises(ShapeError, match=r"minval \(input 1\) must be f32, got f16"):
        infer("RandomUniform", 8, {"output_type": "f32"}, V([2]), S("f16", []), S("f32", []))
    with pytest.raises(ShapeError, match="output_type must be one of i32, i64, f16, bf16, f32, f64, got u8"):
        infer("RandomUniform", 8, {"output_type": "u8"}, V([2]), S("u8", []), S("u8", []))
    with pytest.raises(ShapeError, match=r"shape \(input 0\) element 1 is -4"):
        infer("RandomUniform", 8, {"output_type": "f32"}, V([2, -4]), S("f32", []), S("f32", []))
    with pytest.raises(ShapeError, match="expected minval < maxval, got minval 5 and maxval 5"):
        infer("RandomUniform", 8, {"output_type": "i32"}, V([2]), V(5, np.int32), V(5, np.int32))
    op = op_of("RandomUniform", 8)
    with pytest.raises(OpError, match="expected minval < maxval, got minval 2.0 and maxval 1.0"):
        op.run(ru_attrs("f32", 1, 2), np.array([3]), np.array(2.0, np.float32), np.array(1.0, np.float32))
    _, problems, _ = R.parse_attrs(op.attrs, {"output_type": "f32", "alignment": "jax"})
    assert problems and "alignment='jax'" in problems[0][1]


def seed_pairs(count=20, seed=18):
    """Seed pairs with a zero on either side, 32- and 64-bit values."""
    rng = np.random.default_rng(seed)
    pairs = [(0, 1), (1, 0), (150, 10), (80, 100), (2**32 - 1, 2**32), (2**63 - 1, 2**62 + 5)]
    while len(pairs) < count:
        bits = int(rng.choice([16, 32, 48, 63]))
        pairs.append((int(rng.integers(0, 2**bits)), int(rng.integers(0, 2**bits))))
    return pairs


RU_CASES = {  # type -> (min, max): ranges with inexact products; i64 within and beyond i32
    "f32": (0.1, 7.4), "f16": (-2.5, 3.25), "bf16": (-3.3, 2.2), "f64": (0.3, 9.1),
    "i32": (-7, 100003), "i64": (-50, 2**20 + 3),
}


def const(value, et):
    if et != "bf16":
        return ov.op.Constant(np.array(value, NP[et]))
    t = ov.Tensor(ov.Type.bf16, [])
    t.data.view(np.uint16)[...] = np.array(value, ml_dtypes.bfloat16).view(np.uint16)
    return ov.op.Constant(t, shared_memory=False)


def ru_node(shape, et, gs, os_, lo, hi, alignment):
    lo_c, hi_c = const(lo, et), const(hi, et)
    r = o8.random_uniform(ov.op.Constant(np.array(shape, np.int64)), lo_c, hi_c, et, gs, os_)
    r.set_attribute("alignment", alignment)
    return r


def assert_bits(got, expected, et, exact):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if exact:
        np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))
    else:
        # f32 -> bf16/f16 conversions of the plugin may truncate on CPUs without the
        # instructions (see tests/oracle.py): one unit in the last place at most.
        diff = np.abs(got.view(np.int16).astype(np.int32) - expected.view(np.int16).astype(np.int32))
        assert diff.max() <= 1


@pytest.mark.oracle
@pytest.mark.parametrize("alignment", ["tensorflow", "pytorch"])
def test_random_uniform_reproduces_openvino_bit_for_bit(tmp_path, alignment):
    """20 seed pairs for each of the six output types: the same bits as the CPU plugin."""
    pairs = seed_pairs()
    outs, keys = [], []
    for et, (lo, hi) in RU_CASES.items():
        for i, (gs, os_) in enumerate(pairs):
            shape = [37] if i % 2 else [3, 347]     # not a multiple of the block size; > 624
            outs.append(ru_node(shape, et, gs, os_, lo, hi, alignment))
            keys.append((et, gs, os_))
    expected, got = run_both(ov.Model([o8.result(o) for o in outs], []), {}, tmp_path)
    bf16_exact = "avx512_bf16" in cpu_flags()
    exact_16 = {"f16": True, "bf16": bf16_exact}
    for (et, gs, os_), g, e in zip(keys, got, expected):
        if alignment == "pytorch" and et == "bf16":
            # The plugin's MT19937 kernel steps its state pointer by the size of a bf16
            # while reading 4-byte words, so its bf16 values depend on its vector width and
            # thread split; irrun draws one word per value. Same range and granularity only.
            lo, hi = RU_CASES["bf16"]
            v = g.astype(np.float32)
            assert g.dtype == ml_dtypes.bfloat16 and (v >= lo - 0.02).all() and (v < hi + 0.02).all()
            continue
        if et == "bf16" and not bf16_exact and "avx512f" not in cpu_flags():
            # Without AVX-512 the plugin runs the bf16 op in f32 (seen on an AMD EPYC
            # with AVX2): its values are the f32 stream between the bf16 bounds, rounded
            # to bf16 its way. irrun's f32 op gives that stream bit for bit.
            f32 = irrun_f32_stream(g.shape, gs, os_, alignment, tmp_path)
            np.testing.assert_array_equal(e.view(np.uint16), oracle.plugin_bf16_bits(f32))
            continue
        if et == "bf16" and not bf16_exact:
            # With AVX-512 but not AVX512-BF16 (an Intel Xeon) the plugin draws irrun's bf16
            # stream but scales it in its own order of roundings: about half the values
            # are irrun's bits, the rest within two bf16 units of the bounds' magnitude.
            lo, hi = RU_CASES["bf16"]
            unit = 2.0 ** (np.floor(np.log2(max(abs(lo), abs(hi)))) - 7)
            diff = np.abs(g.astype(np.float32) - e.astype(np.float32))
            assert diff.max() <= 2 * unit and (diff == 0).mean() > 0.3
            continue
        assert_bits(g, e, et, exact_16.get(et, True))


def irrun_f32_stream(shape, gs, os_, alignment, tmp_path):
    """irrun's f32 RandomUniform between RU_CASES' bf16 bounds (as bf16 values)."""
    lo, hi = (float(ml_dtypes.bfloat16(v)) for v in RU_CASES["bf16"])
    node = ru_node(list(shape), "f32", gs, os_, lo, hi, alignment)
    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        xml = oracle.save(ov.Model([o8.result(node)], []), d)
        return oracle.irrun_run(xml, {})[0]


@pytest.mark.oracle
@settings(max_examples=8)
@given(gs=st.integers(0, 2**63 - 1), os_=st.integers(0, 2**63 - 1), n=st.integers(1, 700),
       alignment=st.sampled_from(["tensorflow", "pytorch"]), et=st.sampled_from(["f32", "i32", "i64"]),
       data=st.data())
def test_random_uniform_matches_openvino_on_drawn_seeds(tmp_path_factory, gs, os_, n, alignment, et, data):
    if gs == 0 and os_ == 0:
        gs = 1
    if et == "f32":
        lo = data.draw(st.integers(-10**4, 10**4)) / 97
        hi = lo + data.draw(st.integers(1, 10**4)) / 89
    else:
        # inside i32 (the plugin draws i64 as i32), and the plugin's i32 difference
        # max - min must not overflow
        lo = data.draw(st.integers(-2**30, 2**30))
        hi = data.draw(st.integers(lo + 1, min(lo + 2**31 - 1, 2**31 - 1)))
    expected, got = run_both(ov.Model([o8.result(ru_node([n], et, gs, os_, lo, hi, alignment))], []), {},
                             tmp_path_factory.getbasetemp())
    assert_bits(got[0], expected[0], et, True)


def test_random_uniform_64_bit_draws_beyond_i32():
    """i64 bounds outside i32: the spec's 64-bit value from two words (the plugin narrows
    them to i32; irrun follows the spec)."""
    lo, hi = -2**40, 2**41
    y = G.random_uniform(ru_attrs("i64", 5, 6), (10,), lo, hi)
    u = G.philox4x32(5, 6, 5).reshape(-1, 2).astype(np.uint64)
    v = (u[:, 1] << np.uint64(32)) | u[:, 0]
    assert y.tolist() == [int(x) % (hi - lo) + lo for x in v]
    assert (y >= lo).all() and (y < hi).all() and len(set(y.tolist())) == 10
    y = G.random_uniform(ru_attrs("i64", 5, 6, "pytorch"), (10,), lo, hi)
    w = G.mt19937(G.mt19937_init(5), 20).reshape(-1, 2).astype(np.uint64)
    assert y.tolist() == [int(x) % (hi - lo) + lo for x in (w[:, 0] << np.uint64(32)) | w[:, 1]]


def test_fma_rounds_once():
    x = np.array([1 - 2**-23, 0.5, 2**-23], np.float32)
    r, m = np.float32(3 + 2**-22), np.float32(-1.5)
    exact = [float(np.float64(a) * np.float64(r) + np.float64(m)) for a in x]   # exact in f64 here
    assert G.fma_f32(x, r, m).tolist() == np.array(exact, np.float32).tolist()
    # a product whose double rounding differs from one rounding
    a, b, c = np.float32(1 + 2**-12), np.float32(1 + 2**-12), np.float32(-2**-40)
    # exact value 1 + 2**-11 + 2**-24 - 2**-40: just below the tie at 1 + 2**-11 + 2**-24
    assert G.fma_f32(np.array([a]), b, c)[0] == np.float32(1 + 2**-11)
    assert (np.float64(a) * np.float64(b) + np.float64(c)).astype(np.float32) == np.float32(1 + 2**-11)


@pytest.mark.oracle
def test_random_uniform_seeds_zero_zero_are_not_deterministic(tmp_path):
    """Both seeds 0: the spec asks for a non-deterministic sequence. The plugin seeds from
    the clock; irrun from the OS's entropy. Neither reads 0/0 as literal seeds."""
    attrs = ru_attrs("f32", 0, 0)
    a = G.random_uniform(attrs, (64,), 0.0, 1.0)
    b = G.random_uniform(attrs, (64,), 0.0, 1.0)
    literal = G._uniform_f32(attrs, G.philox4x32(0, 0, 16).reshape(-1), np.float32(0), np.float32(1))
    assert not np.array_equal(a, b) and not np.array_equal(a, literal)
    assert (a >= 0).all() and (a < 1).all()
    expected, got = run_both(ov.Model([o8.result(ru_node([64], "f32", 0, 0, 0.0, 1.0, "tensorflow"))], []),
                             {}, tmp_path)
    assert not np.array_equal(expected[0], literal) and (expected[0] >= 0).all() and (expected[0] < 1).all()
    assert got[0].shape == (64,) and not np.array_equal(got[0], literal)


def test_layers_after_a_random_draw_are_not_folded_to_one_draw():
    """RandomUniform of constant inputs, times 2: the product is computed at every run from
    that run's draw (it was once folded at load from a draw of its own, so with seeds 0/0
    it stayed the same and was not twice the draw it came from)."""
    from irrun.tools.builder import GraphBuilder

    g = GraphBuilder("draws")
    r = g.op("RandomUniform", [g.constant(np.array([16], np.int64)),
                               g.constant(np.array(0, np.float32)),
                               g.constant(np.array(1, np.float32))],
             version="opset8", output_type="f32", global_seed=0, op_seed=0)
    g.result(g.op("Multiply", [r, g.constant(np.array(2, np.float32))], version="opset1"),
             name="twice")
    g.result(r, name="draw")
    m = g.model()
    runs = [m.infer({}) for _ in range(3)]
    for out in runs:
        np.testing.assert_array_equal(out["twice"], 2 * out["draw"])
    assert not np.array_equal(runs[0]["twice"], runs[1]["twice"])


# ---------------------------------------------------------------- Multinomial


MN_ATTRS = {"convert_type": "i32", "with_replacement": "true", "log_probs": "false",
            "global_seed": "234", "op_seed": "148"}


def mn_attrs(**kw):
    data = dict(MN_ATTRS)
    data.update({k: str(v).lower() for k, v in kw.items()})
    return attrs_of("Multinomial", 13, data)


def fixed_samples(monkeypatch, values):
    monkeypatch.setattr(G, "multinomial_samples",
                        lambda gs, os_, count: np.array(values, np.float32).reshape(-1)[:count])


def test_multinomial_spec_example_1(monkeypatch):
    fixed_samples(monkeypatch, [0.2, 0.4, 0.6, 0.8, 1.0])
    y = G.multinomial(mn_attrs(), np.array([[0.1, 0.5, 0.4]], np.float32), 5)
    assert y.tolist() == [[1, 1, 1, 2, 2]]


def test_multinomial_spec_example_2(monkeypatch):
    fixed_samples(monkeypatch, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0] * 2)
    y = G.multinomial(mn_attrs(log_probs=True), np.array([[-1, 1, 2], [50, 1, 21]], np.float32), 10)
    assert y.tolist() == [[1, 1, 2, 2, 2, 2, 2, 2, 2, 2], [0] * 10]


def test_multinomial_spec_example_3(monkeypatch):
    """The spec's walk-through: after drawing class 1 for 0.3 the CDF is [0.2, 0.2, 1.0],
    and "for sampled values <= 0.2, only the class with idx 0 can be selected". Its printed
    result [[1, 2]] contradicts that rule for the second sample 0.2; irrun (like the CPU
    plugin's loop) follows the rule and gives [[1, 0]]."""
    fixed_samples(monkeypatch, [0.3, 0.2])
    y = G.multinomial(mn_attrs(with_replacement=False), np.array([[0.1, 0.5, 0.4]], np.float32), 2)
    assert y.tolist() == [[1, 0]]
    fixed_samples(monkeypatch, [0.3, 0.21])
    y = G.multinomial(mn_attrs(with_replacement=False), np.array([[0.1, 0.5, 0.4]], np.float32), 2)
    assert y.tolist() == [[1, 2]]


def test_multinomial_shape_rules_and_errors():
    (s,) = infer("Multinomial", 13, MN_ATTRS, S("f32", [1, 3]), V(5, np.int32))
    assert s.etype.name == "i32" and format_shape(s.shape) == "[1,5]"
    (s,) = infer("Multinomial", 13, dict(MN_ATTRS, convert_type="i64"), S("f32", [2, None]), S("i64", [1]))
    assert s.etype.name == "i64" and format_shape(s.shape) == "[2,?]"
    (s,) = infer("Multinomial", 13, MN_ATTRS, S("f16", None), V([4]))
    assert format_shape(s.shape) == "[?,4]"
    with pytest.raises(ShapeError, match=r"probs \(input 0\) must be 2-D"):
        infer("Multinomial", 13, MN_ATTRS, S("f32", [3]), V(2))
    with pytest.raises(ShapeError, match="floating-point"):
        infer("Multinomial", 13, MN_ATTRS, S("i32", [1, 3]), V(2))
    with pytest.raises(ShapeError, match=r"num_samples \(5\) must not exceed class_size \(3\)"):
        infer("Multinomial", 13, dict(MN_ATTRS, with_replacement="false"), S("f32", [1, 3]), V(5))
    _, problems, _ = R.parse_attrs(op_of("Multinomial", 13).attrs, dict(MN_ATTRS, convert_type="f32"))
    assert problems and "convert_type='f32'" in problems[0][1]
    run = op_of("Multinomial", 13).run
    with pytest.raises(OpError, match=r"non-negative and finite, got -0.5 at position \[1, 0\]"):
        run(mn_attrs(), np.array([[1, 1], [-0.5, 1]], np.float32), np.array([2]))
    with pytest.raises(OpError, match=r"must not exceed class_size \(2\)"):
        run(mn_attrs(with_replacement=False), np.ones((1, 2), np.float32), np.array([3]))
    (y,) = run(mn_attrs(), np.ones((3, 2), np.float32), np.array([0]))
    assert y.shape == (3, 0) and y.dtype == np.int32


def test_multinomial_without_replacement_never_repeats():
    probs = np.random.default_rng(3).random((6, 9)).astype(np.float32)
    y = G.multinomial(mn_attrs(with_replacement=False, global_seed=7, op_seed=8), probs, 9)
    assert all(sorted(row) == list(range(9)) for row in y.tolist())


def test_seed_seq_matches_cpp():
    # std::mt19937 gen(std::seed_seq{1u, 2u}); gen() -- values printed by a C++ program
    # built with g++ (libstdc++): the words of generate() are the generator's state.
    assert int(G.mt19937(G.seed_seq([1, 2]), 1)[0]) == 3232623227
    assert int(G.mt19937(G.seed_seq([234, 148]), 1)[0]) == 1077409035
    # the default-seeded std::mt19937 (5489) gives 3499211612 first (the C++ standard's check
    # is the 10000th value, 4123659995)
    assert int(G.mt19937(G.mt19937_init(5489), 1)[0]) == 3499211612
    assert int(G.mt19937(G.mt19937_init(5489), 10000)[-1]) == 4123659995


@pytest.mark.oracle
def test_multinomial_reproduces_openvino_for_20_seeds(tmp_path):
    rng = np.random.default_rng(13)
    probs = rng.random((3, 11)).astype(np.float32)
    probs[:, ::4] = 0                                   # classes that can never be drawn
    logits = (rng.standard_normal((3, 11)) * 3).astype(np.float32)
    pp = o13.parameter([3, 11], ov.Type.f32, name="p")
    pl = o13.parameter([3, 11], ov.Type.f32, name="l")
    outs = []
    for gs, os_ in seed_pairs():
        for repl in (True, False):
            for logp, src in ((False, pp), (True, pl)):
                n = 40 if repl else 8
                outs.append(o13.multinomial(src, ov.op.Constant(np.array([n], np.int64)),
                                            "i64" if repl else "i32", repl, logp, gs, os_))
    expected, got = run_both(ov.Model([o13.result(o) for o in outs], [pp, pl]),
                             {"p": probs, "l": logits}, tmp_path)
    for g, e in zip(got, expected):
        oracle.assert_same(g, e)


@pytest.mark.oracle
def test_multinomial_without_replacement_many_draws_match_openvino(tmp_path):
    # Many draws from many classes (the compiled loop, draw by draw).
    rng = np.random.default_rng(21)
    probs = rng.random((3, 400)).astype(np.float32)
    probs[:, ::3] = 0
    logits = (rng.standard_normal((3, 400)) * 3).astype(np.float32)
    pp = o13.parameter([3, 400], ov.Type.f32, name="p")
    pl = o13.parameter([3, 400], ov.Type.f32, name="l")
    outs = [o13.multinomial(pp, ov.op.Constant(np.array([260], np.int64)), "i32", False, False, 3, 4),
            o13.multinomial(pl, ov.op.Constant(np.array([400], np.int64)), "i64", False, True, 5, 6)]
    expected, got = run_both(ov.Model([o13.result(o) for o in outs], [pp, pl]),
                             {"p": probs, "l": logits}, tmp_path)
    for g, e in zip(got, expected):
        oracle.assert_same(g, e)


def test_multinomial_without_replacement_after_the_mass_runs_out():
    # Drawing the last class with probability left divides the CDF by 1 - 1 = 0: no class
    # reaches a later sample, and irrun draws class 0 (OpenVINO's CPU plugin leaves those
    # entries unwritten).
    few = np.array([[0, 0, 2, 0, 0], [0, 1, 0, 0, 3], [5, 0, 0, 0, 0]], np.float32)
    y = G.multinomial(mn_attrs(with_replacement=False, global_seed=7, op_seed=8), few, 4)
    assert y.tolist() == [[2, 0, 0, 0], [4, 1, 0, 0], [0, 0, 0, 0]]


@pytest.mark.oracle
@settings(max_examples=8)
@given(batch=st.integers(1, 4), classes=st.integers(1, 30), data=st.data(),
       gs=st.integers(1, 2**40), os_=st.integers(0, 2**40), repl=st.booleans(), logp=st.booleans(),
       et=st.sampled_from(["f32", "f16"]), seed=st.integers(0, 2**32 - 1))
def test_multinomial_matches_openvino(tmp_path_factory, batch, classes, data, gs, os_, repl, logp, et, seed):
    n = data.draw(st.integers(1, classes if not repl else 50))
    rng = np.random.default_rng(seed)
    probs = (rng.standard_normal((batch, classes)) * 4 if logp else rng.random((batch, classes)))
    probs = probs.astype(NP[et])
    p = o13.parameter([batch, classes], getattr(ov.Type, et), name="p")
    q = o13.parameter([], ov.Type.i32, name="n")
    m = ov.Model([o13.result(o13.multinomial(p, q, "i32", repl, logp, gs, os_))], [p, q])
    expected, got = run_both(m, {"p": probs, "n": np.array(n, np.int32)}, tmp_path_factory.getbasetemp())
    oracle.assert_same(got[0], expected[0])
