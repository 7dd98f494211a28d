"""Generation ops: identity matrices and OpenVINO's seeded random generators.

Spec pages: generation/eye-9, generation/random-uniform-8, generation/multinomial-13.

RandomUniform and Multinomial reproduce the numbers OpenVINO's CPU plugin draws for the same
seeds (with INFERENCE_PRECISION_HINT f32), bit for bit where the plugin is deterministic:

- RandomUniform, alignment TENSORFLOW: Philox4x32-10, key = global_seed, counter = op_seed,
  the n-th block of four uint32 numbers from the 64-bit block index n. alignment PYTORCH:
  MT19937 seeded with the low 32 bits of global_seed (op_seed unused).
- Multinomial: std::mt19937 seeded through std::seed_seq{global_seed, op_seed} (the plugin's
  generator; the spec leaves the generator open), one f32 sample per output element.

Where the plugin's arithmetic differs from the spec's description it is followed, and
docs/ops.md ("Where irrun chooses a rule") says so: f16/f64 outputs are drawn as f32 and
converted, i64 outputs whose bounds fit i32 are drawn as i32, and Philox results are
fused multiply-adds (one rounding). Each run draws the op's first sequence: irrun keeps no
state between runs (the plugin continues its sequence in later inferences of one compiled
model). Both seeds 0 ask for a non-deterministic sequence: irrun then draws a global seed
from the operating system's entropy, as the plugin draws one from the clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import ml_dtypes
import numpy as np

from irrun.opkit import (
    DYNAMIC,
    Dim,
    ElementTypeName,
    TensorSpec,
    check_alloc,
    element_type,
    elements,
    fail,
    format_shape,
    register,
)

U32 = np.uint64(0xFFFFFFFF)


def _scalar_input(spec: TensorSpec, what: str, types=("i32", "i64")) -> None:
    if spec.etype.name not in types:
        fail(f"{what} must be {' or '.join(types)}, got {spec.etype.name}")
    if spec.shape is not None and not (len(spec.shape) == 0 or (
            len(spec.shape) == 1 and spec.shape[0].compatible(Dim.of(1)))):
        fail(f"{what} must be a scalar or a 1-element 1-D tensor, got {format_shape(spec.shape)}")


def _one_value(x: np.ndarray, what: str):
    if x.size != 1:
        fail(f"{what} must hold one element, got shape {list(x.shape)}")
    return x.reshape(-1)[0]


def _count_dim(spec: TensorSpec, what: str) -> Dim:
    """The output dim a scalar count input gives, as far as inference knows it."""
    el = elements(spec)
    if el is None or len(el) != 1:
        return DYNAMIC
    d = el[0]
    if d.is_static and d.lo < 0:
        fail(f"{what} must be non-negative, got {d.lo}")
    return Dim(max(d.lo, 0), d.hi)


def _shape_dims(spec: TensorSpec, what: str) -> tuple[Dim, ...] | None:
    """The output shape a 1-D shape input gives: its known elements, else its length."""
    if spec.shape is not None and len(spec.shape) != 1:
        fail(f"{what} must be a 1-D tensor, got {format_shape(spec.shape)}")
    el = elements(spec)
    if el is not None:
        for i, d in enumerate(el):
            if d.is_static and d.lo < 0:
                fail(f"{what} element {i} is {d.lo}, expected a non-negative dim")
        return tuple(Dim(max(d.lo, 0), d.hi) for d in el)
    if spec.shape is not None and spec.shape[0].is_static:
        return (DYNAMIC,) * spec.shape[0].value
    return None


def _check_shape_values(shape: np.ndarray, what: str) -> tuple[int, ...]:
    if shape.ndim != 1:
        fail(f"{what} must be a 1-D tensor, got shape {list(shape.shape)}")
    dims = [int(v) for v in shape.tolist()]
    for i, d in enumerate(dims):
        if d < 0:
            fail(f"{what} element {i} is {d}, expected a non-negative dim")
    return tuple(dims)


# ---------------------------------------------------------------- Eye


@dataclass(frozen=True)
class EyeAttrs:
    output_type: ElementTypeName


def _output_etype(name: str, allowed=None):
    try:
        et = element_type(name)
    except ValueError as e:
        fail(str(e))
    if allowed is not None and et.name not in allowed:
        fail(f"output_type must be one of {', '.join(allowed)}, got {et.name}")
    return et


@register("Eye", since=9, attrs=EyeAttrs, category="generation")
class Eye9:
    @staticmethod
    def infer(attrs, rows: TensorSpec, cols: TensorSpec, diag: TensorSpec,
              batch: TensorSpec | None = None):
        et = _output_etype(attrs.output_type)
        if et.kind == "bool":
            fail("output_type must be a numeric type, got boolean")
        _scalar_input(rows, "num_rows (input 0)")
        _scalar_input(cols, "num_columns (input 1)")
        _scalar_input(diag, "diagonal_index (input 2)")
        matrix = (_count_dim(rows, "num_rows (input 0)"), _count_dim(cols, "num_columns (input 1)"))
        if batch is None:
            return [TensorSpec(et, matrix)]
        if batch.etype.name not in ("i32", "i64"):
            fail(f"batch_shape (input 3) must be i32 or i64, got {batch.etype.name}")
        lead = _shape_dims(batch, "batch_shape (input 3)")
        return [TensorSpec(et, None if lead is None else lead + matrix)]

    @staticmethod
    def run(attrs, rows, cols, diag, batch=None):
        et = element_type(attrs.output_type)
        n = int(_one_value(rows, "num_rows (input 0)"))
        m = int(_one_value(cols, "num_columns (input 1)"))
        k = int(_one_value(diag, "diagonal_index (input 2)"))
        if n < 0 or m < 0:
            fail(f"num_rows and num_columns must be non-negative, got {n} and {m}")
        lead = () if batch is None else _check_shape_values(batch, "batch_shape (input 3)")
        check_alloc(lead + (n, m), et.dtype, "Eye output")
        # |k| beyond the matrix gives all zeros, as the spec says (np.eye does too).
        k = max(min(k, m), -n)
        eye = np.eye(n, m, k=k, dtype=et.dtype)
        return (np.array(np.broadcast_to(eye, lead + (n, m))),)


# ---------------------------------------------------------------- the generators

_PHILOX_M0, _PHILOX_M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_PHILOX_W0, _PHILOX_W1 = 0x9E3779B9, 0xBB67AE85


def philox4x32(key: int, counter: int, blocks: int) -> np.ndarray:
    """uint32[blocks, 4]: Philox4x32-10 of the 128-bit counters (n, counter) for n = 0, 1,
    ...; words are (n low, n high, counter low, counter high), the key is 64 bits."""
    n = np.arange(blocks, dtype=np.uint64)
    c0, c1 = n & U32, n >> np.uint64(32)
    c2 = np.full(blocks, counter & 0xFFFFFFFF, np.uint64)
    c3 = np.full(blocks, (counter >> 32) & 0xFFFFFFFF, np.uint64)
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = _PHILOX_M0 * c0, _PHILOX_M1 * c2          # 32 x 32 bits: exact in uint64
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & U32,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & U32)
        k0, k1 = (k0 + _PHILOX_W0) & 0xFFFFFFFF, (k1 + _PHILOX_W1) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32)


def mt19937(key: np.ndarray, count: int) -> np.ndarray:
    """The first `count` tempered outputs of MT19937 from the 624-word state `key`."""
    gen = np.random.MT19937()
    gen.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": 624}}
    return gen.random_raw(count).astype(np.uint32)


def mt19937_init(seed: int) -> np.ndarray:
    """The state of MT19937's init_genrand(seed) (Knuth's multiplier), as a 624-word key."""
    return np.random.RandomState(seed & 0xFFFFFFFF).get_state()[1]


def seed_seq(values, n: int = 624) -> np.ndarray:
    """The n words std::seed_seq(values).generate() writes (C++ [rand.util.seedseq]);
    values keep their low 32 bits. A loop over n = 624 state words, not over elements."""
    v = [int(x) & 0xFFFFFFFF for x in values]
    s, mask = len(v), 0xFFFFFFFF
    b = [0x8B8B8B8B] * n
    t = 11 if n >= 623 else 7 if n >= 68 else 5 if n >= 39 else 3 if n >= 7 else (n - 1) // 2
    p = (n - t) // 2
    q = p + t
    m = max(s + 1, n)

    def mix(x):
        return x ^ (x >> 27)

    for k in range(m):
        r1 = (1664525 * mix(b[k % n] ^ b[(k + p) % n] ^ b[(k - 1) % n])) & mask
        r2 = (r1 + (s if k == 0 else (k % n + v[k - 1]) if k <= s else k % n)) & mask
        b[(k + p) % n] = (b[(k + p) % n] + r1) & mask
        b[(k + q) % n] = (b[(k + q) % n] + r2) & mask
        b[k % n] = r2
    for k in range(m, m + n):
        r3 = (1566083941 * mix((b[k % n] + b[(k + p) % n] + b[(k - 1) % n]) & mask)) & mask
        r4 = (r3 - k % n) & mask
        b[(k + p) % n] ^= r3
        b[(k + q) % n] ^= r4
        b[k % n] = r4
    return np.array(b, dtype=np.uint32)


def _entropy_seed() -> int:
    return int(np.random.default_rng().integers(1, 2**31))


def fma_f32(x: np.ndarray, r: np.float32, m: np.float32) -> np.ndarray:
    """x * r + m rounded once to f32, as an FMA instruction computes it: the product of
    two f32 is exact in f64, the sum is rounded to odd in f64 (the two-sum error decides),
    and rounding that to f32 is then correct (53 >= 24 + 2 bits)."""
    a = x.astype(np.float64) * np.float64(r)
    b = np.float64(m)
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    s = np.where((err != 0) & even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


# ---------------------------------------------------------------- RandomUniform

_RU_TYPES = ("i32", "i64", "f16", "bf16", "f32", "f64")


@dataclass(frozen=True)
class RandomUniformAttrs:
    output_type: ElementTypeName
    global_seed: int = 0
    op_seed: int = 0
    alignment: Literal["tensorflow", "pytorch"] = "tensorflow"


def _uniform_words(attrs, count: int, per_value: int) -> np.ndarray:
    """count * per_value uint32 words of the op's generator, in the order values take them."""
    gs, os_ = attrs.global_seed & (2**64 - 1), attrs.op_seed & (2**64 - 1)
    if gs == 0 and os_ == 0:
        gs = _entropy_seed()
    words = count * per_value
    # The largest intermediate, held to the memory budget as the output is: the words as
    # uint64 (what MT19937 gives; Philox computes in whole blocks of four). The values made
    # from them (an f64 per value for f32's rounding, a uint64 per i64 value) are no larger.
    if attrs.alignment == "pytorch":
        check_alloc((words,), np.uint64, "RandomUniform's random bits")
        return mt19937(mt19937_init(gs), words)
    blocks = -(-count // (4 // per_value))    # 64-bit values take two words: two a block
    check_alloc((blocks, 4), np.uint64, "RandomUniform's random bits")
    return philox4x32(gs, os_, blocks).reshape(-1)[:words]


def _uniform_f32(attrs, u: np.ndarray, lo: np.float32, hi: np.float32) -> np.ndarray:
    span = np.float32(hi - lo)
    if attrs.alignment == "pytorch":
        x = (u & np.uint32(0xFFFFFF)).astype(np.float32) * np.float32(2.0 ** -24)
        return x * span + lo                  # the plugin multiplies, then adds
    x = ((u & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
    return fma_f32(x, span, lo)


def _uniform_bf16(attrs, u: np.ndarray, lo, hi) -> np.ndarray:
    # bf16 has a path of its own in the plugin: 7 (Philox) or 8 (MT) random bits, the range
    # rounded to bf16, the sum rounded to f32 and then to bf16 (the product is exact).
    lo32, hi32 = np.float32(lo), np.float32(hi)
    span = np.float32(ml_dtypes.bfloat16(hi32 - lo32))
    if attrs.alignment == "pytorch":
        x = (u & np.uint32(0xFF)).astype(np.float32) / np.float32(256)
    else:
        x = (u & np.uint32(0x7F)).astype(np.float32) / np.float32(128)
    return (x * span + lo32).astype(ml_dtypes.bfloat16)


def _uniform_int(u: np.ndarray, lo: int, hi: int, dtype) -> np.ndarray:
    # The range as an unsigned number: the plugin's int32 difference overflows beyond 2**31.
    span = np.uint64(hi - lo)
    return ((u.astype(np.uint64) % span).astype(np.int64) + np.int64(lo)).astype(dtype)


def random_uniform(attrs, shape: tuple[int, ...], lo, hi) -> np.ndarray:
    et = element_type(attrs.output_type)
    count = int(np.prod(shape, dtype=np.int64))
    if et.name == "bf16":
        return _uniform_bf16(attrs, _uniform_words(attrs, count, 1), lo, hi).reshape(shape)
    if et.is_float:
        # f16 and f64 are drawn as f32 and converted, as the plugin computes them.
        u = _uniform_words(attrs, count, 1)
        y = _uniform_f32(attrs, u, np.float32(lo), np.float32(hi))
        return y.astype(et.dtype).reshape(shape)
    lo, hi = int(lo), int(hi)
    i32 = np.iinfo(np.int32)
    if et.name == "i32" or (i32.min <= lo and hi <= i32.max):
        # i64 bounds that fit i32 draw one word per value (the plugin's i32 path).
        return _uniform_int(_uniform_words(attrs, count, 1), lo, hi, et.dtype).reshape(shape)
    # Wider i64 bounds: the spec's 64-bit values from two words (the plugin narrows them
    # to i32 instead). TENSORFLOW puts the second word high, PYTORCH the first.
    u = _uniform_words(attrs, count, 2).astype(np.uint64).reshape(-1, 2)
    first, second = u[:, 0], u[:, 1]
    v = (first << np.uint64(32)) | second if attrs.alignment == "pytorch" else \
        (second << np.uint64(32)) | first
    span = np.uint64((hi - lo) % 2**64)
    return ((v % span) + np.uint64(lo % 2**64)).astype(np.int64).reshape(shape)


@register("RandomUniform", since=8, attrs=RandomUniformAttrs, category="generation")
class RandomUniform8:
    # Seeds 0/0 draw afresh at every run: never computed once at load, not even as the
    # value inference hands to layers after it (which would then be folded to one draw).
    NO_FOLD = True

    @staticmethod
    def infer(attrs, shape: TensorSpec, lo: TensorSpec, hi: TensorSpec):
        et = _output_etype(attrs.output_type, _RU_TYPES)
        if shape.etype.name not in ("i32", "i64"):
            fail(f"shape (input 0) must be i32 or i64, got {shape.etype.name}")
        _scalar_input(lo, "minval (input 1)", (et.name,))
        _scalar_input(hi, "maxval (input 2)", (et.name,))
        if lo.value is not None and hi.value is not None:
            _check_bounds(lo.value, hi.value)
        return [TensorSpec(et, _shape_dims(shape, "shape (input 0)"))]

    @staticmethod
    def run(attrs, shape, lo, hi):
        dims = _check_shape_values(shape, "shape (input 0)")
        et = element_type(attrs.output_type)
        check_alloc(dims, et.dtype, "RandomUniform output")
        a, b = _check_bounds(lo, hi)
        return (random_uniform(attrs, dims, a, b),)


def _check_bounds(lo: np.ndarray, hi: np.ndarray):
    a, b = _one_value(lo, "minval (input 1)"), _one_value(hi, "maxval (input 2)")
    if not (a < b):
        fail(f"expected minval < maxval, got minval {a} and maxval {b}")
    return a, b


# ---------------------------------------------------------------- Multinomial


@dataclass(frozen=True)
class MultinomialAttrs:
    convert_type: Literal["i32", "i64"]
    with_replacement: bool
    log_probs: bool
    global_seed: int = 0
    op_seed: int = 0


def multinomial_samples(global_seed: int, op_seed: int, count: int) -> np.ndarray:
    """count f32 numbers in [0, 1]: float(gen()) / float(gen.max()) of std::mt19937
    seeded with seed_seq{global_seed, op_seed}, in f32 as the plugin divides them."""
    if global_seed == 0 and op_seed == 0:
        key = mt19937_init(_entropy_seed())
    else:
        key = seed_seq([global_seed, op_seed])
    u = mt19937(key, count)
    return u.astype(np.float32) / np.float32(4294967295.0)


def multinomial(attrs, probs: np.ndarray, num_samples: int) -> np.ndarray:
    batch, classes = probs.shape
    p = probs.astype(np.float32)
    if attrs.log_probs:
        # exp in f64, rounded once: the correctly rounded f32 (the plugin's std::exp).
        p = np.exp(p.astype(np.float64)).astype(np.float32)
    cdf = np.cumsum(p, axis=1, dtype=np.float32)          # sequential sums, as partial_sum
    top = np.maximum(cdf[:, -1:], np.finfo(np.float32).tiny)
    cdf = cdf / top
    u = multinomial_samples(attrs.global_seed, attrs.op_seed, batch * num_samples)
    u = u.reshape(batch, num_samples)
    if attrs.with_replacement:
        # The first class whose cumulative probability reaches the sample. The CDF of
        # non-negative numbers is sorted, so a sorted search per row finds it; rows are
        # kept apart by searching (row, value) pairs as one sorted int64 key.
        rows = np.arange(batch, dtype=np.int64)[:, None] << np.int64(32)
        keys = (rows + cdf.view(np.int32)).reshape(-1)
        queries = (rows + u.view(np.int32)).reshape(-1)
        found = np.searchsorted(keys, queries, side="left").reshape(batch, num_samples)
        out = found - np.arange(batch)[:, None] * classes
        # a sample above every value of its row (it cannot exceed the normalised 1.0)
        return np.minimum(out, classes - 1)
    # Each draw changes the CDF the next one reads: the compiled loop of
    # ops/multinomial_loop.py, draw by draw.
    from .multinomial_loop import without_replacement

    out = np.zeros((batch, num_samples), dtype=np.int64)
    without_replacement(np.ascontiguousarray(cdf, np.float32), np.ascontiguousarray(u), out)
    return out


@register("Multinomial", since=13, attrs=MultinomialAttrs, category="generation")
class Multinomial13:
    NO_FOLD = True      # as RandomUniform8

    @staticmethod
    def infer(attrs, probs: TensorSpec, num_samples: TensorSpec):
        if probs.etype.kind != "float":
            fail(f"probs (input 0) must be a floating-point tensor, got {probs.etype.name}")
        if probs.rank is not None and probs.rank != 2:
            fail(f"probs (input 0) must be 2-D [batch_size, class_size], got {format_shape(probs.shape)}")
        _scalar_input(num_samples, "num_samples (input 1)")
        n = _count_dim(num_samples, "num_samples (input 1)")
        batch = probs.shape[0] if probs.shape is not None else DYNAMIC
        if not attrs.with_replacement and probs.shape is not None and n.is_static:
            c = probs.shape[1]
            if c.is_static and n.value > c.value:
                fail(f"without replacement num_samples ({n.value}) must not exceed "
                     f"class_size ({c.value})")
        return [TensorSpec(element_type(attrs.convert_type), (batch, n))]

    @staticmethod
    def run(attrs, probs, num_samples):
        if probs.ndim != 2:
            fail(f"probs (input 0) must be 2-D, got shape {list(probs.shape)}")
        n = int(_one_value(num_samples, "num_samples (input 1)"))
        if n < 0:
            fail(f"num_samples (input 1) must be non-negative, got {n}")
        batch, classes = probs.shape
        if not attrs.with_replacement and n > classes:
            fail(f"without replacement num_samples ({n}) must not exceed class_size ({classes})")
        et = element_type(attrs.convert_type)
        check_alloc((batch, n), et.dtype, "Multinomial output")
        # And its intermediates: an int64 per sample (the random words, the classes found)
        # and, with replacement, per probability (the rows' cumulative sums as sorted keys).
        check_alloc((batch, n), np.int64, "Multinomial's samples")
        if attrs.with_replacement:
            check_alloc((batch, classes), np.int64, "Multinomial's sorted keys")
        if classes == 0 and n > 0 and batch > 0:
            fail("probs (input 0) has no classes to sample from")
        p = probs.astype(np.float32)
        if not attrs.log_probs:
            bad = ~np.isfinite(p) | (p < 0)
            if bad.any():
                pos = [int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape)]
                fail(f"probs (input 0) must be non-negative and finite, got {p[tuple(pos)]} "
                     f"at position {pos}")
        elif np.isnan(p).any():
            pos = [int(i) for i in np.unravel_index(int(np.argmax(np.isnan(p))), p.shape)]
            fail(f"probs (input 0) is NaN at position {pos}")
        if batch == 0 or n == 0:
            return (np.zeros((batch, n), et.dtype),)
        return (multinomial(attrs, probs, n).astype(et.dtype),)
