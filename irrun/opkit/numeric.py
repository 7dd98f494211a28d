"""Numeric helpers for kernels: widening half types, exact dtypes, C++ conversions, erf."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from irrun.ir.etypes import ELEMENT_TYPES, convert_into, element_type, from_dtype

from .problems import fail

_WIDE = {"f16": np.float32, "bf16": np.float32}


def widened(x: np.ndarray, etype_name: str) -> np.ndarray:
    """f16/bf16 values as f32, so every ufunc exists and rounding happens once."""
    w = _WIDE.get(etype_name)
    return x.astype(w) if w is not None else x


def etype_name(x: np.ndarray) -> str:
    return from_dtype(x.dtype).name


def as_dtype(y, dtype) -> np.ndarray:
    """An ndarray of exactly `dtype` (ufuncs on 0-d arrays return NumPy scalars)."""
    return np.asarray(y).astype(dtype, copy=False)


def first_position(mask: np.ndarray) -> list[int]:
    return [int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape)] if mask.ndim else []


def float_to_int(y: np.ndarray, dtype, what: str, x: np.ndarray) -> np.ndarray:
    """A float result back to an integer type: round half to even (the CPU plugin's
    conversion); NaN or out-of-range results are errors rather than garbage."""
    info = np.iinfo(dtype)
    bad = ~np.isfinite(y) | (y < info.min - 0.5) | (y > info.max + 0.5)
    if bad.any():
        pos = first_position(bad)
        fail(f"{what} of integer input 0 at position {pos} (value {x[tuple(pos)]}) "
             f"is {y[tuple(pos)]}, not representable in {np.dtype(dtype).name}", code="value")
    return as_dtype(np.rint(y), dtype)


# Ops whose float results are computed in f32 (f16/bf16 widened to f32 once), not f64:
# NumPy's f32 ufuncs (and these short formulas of them) are within an ulp or two, as the
# CPU plugin's f32 kernels are, so widening buys no agreement with OpenVINO and costs 2-10x
# (Tanh of a [1,128,768] f32 tensor: 122 ms in f64, 9 ms in f32). The ops that still widen
# to f64, and why: Erf and Gelu (irrun's erf is fdlibm's f64 algorithm, no f32 one); Elu and
# Selu (exp(x) - 1 cancels near 0 in f32); SoftPlus, Mish and SoftSign (log(1 + exp(x)) and
# its kin lose the tail or overflow early in f32); Softmax/LogSoftmax (sums over an axis);
# any op not listed (an extension's, by default). Integer inputs always compute in f64.
F32_EXACT = frozenset((
    "Abs", "Negative", "Sign", "Floor", "Ceiling", "ReLU", "Sqrt", "Exp", "Log", "Sin", "Cos",
    "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Sigmoid", "Tanh",
    "HSwish", "HSigmoid", "Swish", "HardSigmoid"))


def float_unary(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, what: str) -> np.ndarray:
    """Apply a float function and return x's dtype; integers round to nearest.

    Ops in F32_EXACT compute f32/f16/bf16 in f32; the others in f64, rounding once (so
    results are correctly rounded where fn is). NumPy's overflow and invalid-value warnings
    are silenced by the executor for the whole run (and by folding and inference), not per
    call: the context manager cost more than a small ReLU."""
    if x.dtype.kind in "iu":
        return float_to_int(np.asarray(fn(x.astype(np.float64))), x.dtype, what, x)
    if what in F32_EXACT and x.dtype != np.float64:
        y = fn(x if x.dtype == np.float32 else x.astype(np.float32))
    else:
        y = fn(x.astype(np.float64))
    return y if type(y) is np.ndarray and y.dtype == x.dtype else as_dtype(y, x.dtype)


# Destination types converted by irrun.ir.etypes.convert_into (rounding or packing rules of
# their own rather than C++ casts).
_COMPRESSED = frozenset(("u2", "u3", "u6", "nf4", "f4e2m1", "f8e4m3", "f8e5m2", "f8e8m0"))


def convert_array(x: np.ndarray, dst) -> np.ndarray:
    """Element-wise conversion as OpenVINO computes it (its reference `evaluate` on x86-64,
    and the CPU plugin wherever that computes in the asked type).

    Integer to integer wraps modulo 2**bits (u4/i4/u1 keep their low bits); anything to
    boolean is x != 0 (NaN gives true). Float to integer truncates toward zero and, outside
    the destination's range, follows the x86-64 conversion instructions OpenVINO's C++ casts
    compile to (float_to_integer below): the value wraps to the destination's bits rather
    than saturating, and NaN and +-inf become a fixed pattern.
    """
    cast = _FLOAT_CASTS.get(dst) if type(dst) is str else None
    if cast is not None:
        return _cast(x, cast)   # the usual Convert, its destination looked up once
    dst = element_type(dst)
    if dst.name in _COMPRESSED:
        # The weight-compression types round or pack as OpenVINO's converts do (etypes).
        return convert_into(x, dst)
    if dst.kind == "bool":
        return np.asarray(x != 0)    # a 0-d input would otherwise give a NumPy scalar
    if dst.is_float:
        # Values beyond the destination's range become +-inf, as in C++ (the executor
        # silences NumPy's warning for every kernel).
        return _cast(x, dst.dtype)
    if np.issubdtype(x.dtype, np.floating) or x.dtype.kind == "V":
        v = float_to_integer(x, dst.name)
        if v.dtype == dst.dtype and dst.name not in _SUB_BYTE:
            return v
    else:
        v = x
    if dst.name in _SUB_BYTE:
        # Sub-byte destinations keep their low bits (irrun holds them unpacked).
        bits = dst.bits
        v = np.asarray(v).astype(np.int64) & ((1 << bits) - 1)
        if dst.is_signed:
            v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
        return np.asarray(v, dtype=dst.dtype)   # `&` on a 0-d array gives a NumPy scalar
    return np.asarray(v).astype(dst.dtype)      # C++ integer conversion: wraps


_SUB_BYTE = frozenset(("u1", "u4", "i4"))


def convert_is_astype(src: np.dtype, size: int | None, dst: str):
    """The NumPy dtype `t` for which convert_array(x, dst) is x.astype(t) for every x of
    dtype `src` and `size` elements (None: any size), or None: a small cast to a float
    type, an integer or boolean array to an integer type of whole bytes (C++'s wrapping
    conversion)."""
    cast = _FLOAT_CASTS.get(dst)
    if cast is not None:
        return cast if size is not None and size < COMPILED_CAST_ELEMENTS else None
    try:
        et = element_type(dst)
    except ValueError:
        return None
    if (src.kind in "iub" and et.kind in ("int", "uint") and et.name not in _SUB_BYTE
            and et.name not in _COMPRESSED):
        return et.dtype
    return None
_INT32_MIN, _INT64_MIN = -2.0 ** 31, -2.0 ** 63


def _cvtt32(f: np.ndarray) -> np.ndarray:
    """cvttss2si/cvttsd2si to 32 bits, as int64: toward zero; NaN and values outside
    [-2^31, 2^31) give INT32_MIN (the instruction's "integer indefinite")."""
    t = np.trunc(f)
    return np.where((t >= _INT32_MIN) & (t < -_INT32_MIN), t, _INT32_MIN).astype(np.int64)


def _cvtt64(f: np.ndarray) -> np.ndarray:
    """The same to 64 bits: NaN and values outside [-2^63, 2^63) give INT64_MIN."""
    t = np.trunc(f)
    ok = (t >= _INT64_MIN) & (t < -_INT64_MIN)
    return np.where(ok, np.where(ok, t, 0.0).astype(np.int64), np.int64(-2 ** 63))


def float_to_integer(x: np.ndarray, dst: str) -> np.ndarray:
    """Float x to the integer type `dst` as OpenVINO's x86-64 build converts (measured on its
    reference `evaluate` and CPU plugin, OpenVINO 2026.4; C++ leaves out-of-range values
    undefined, so these are the instructions its casts compile to):

    - 8- and 16-bit types, i32, u4/i4/u1: truncate toward zero to i32 (NaN, +-inf and values
      outside i32 give INT32_MIN), then keep the low bits: -9 -> u8 247, 300 -> i8 44,
      NaN/inf/3e9 -> 0 (i32: -2147483648).
    - i64: truncate to i64 (NaN, +-inf and values outside i64 give -2^63).
    - u64: values >= 2^63 convert as x - 2^63 to i64 with the top bit set again (so 2^64
      and +inf give 0); the rest as i64, reinterpreted (-9 -> 2^64 - 9, NaN and -inf ->
      2^63).
    - u32: to i64 as above, then the low 32 bits (-9 -> 2^32 - 9, 5e9 -> 705032704, NaN and
      +-inf -> 0). OpenVINO's reference does this for f16/bf16/f64 inputs and for some
      f32 elements; the f32 elements its vector loop takes give 2^31 for values below
      -2^31, NaN and -inf (and 0 from 2^32 up), so there the result depends on the
      element's position in the tensor: irrun takes the scalar rule everywhere.
    """
    f = np.asarray(x).astype(np.float64)
    if dst == "i64":
        return _cvtt64(f)
    if dst == "u64":
        high = _cvtt64(f - 2.0 ** 63) ^ np.int64(-2 ** 63)
        return np.where(f >= 2.0 ** 63, high, _cvtt64(f)).view(np.uint64)
    if dst == "u32":
        return (_cvtt64(f) & 0xFFFFFFFF).astype(np.uint32)
    return _cvtt32(f)


# Casts of at least this many elements are split over the kernel pool: NumPy's f16 -> f32
# cast runs at ~2 ns an element on one core (ResNet-18's decompression Converts, folded at
# load, were most of its read_model time) and releases the GIL.
PARALLEL_CAST_ELEMENTS = 1 << 20
# The compiled F16C loop converts ~7 elements a nanosecond, so it is split only from here
# (2-core AMD EPYC: 1M elements 0.65x on two threads, 4M 1.2x).
PARALLEL_F16C_ELEMENTS = 1 << 23
# f16 -> f32 casts of at least this many elements go to the compiled F16C loop once this
# process has it (opkit.f16c), and until then count towards building it; below, a call
# through ctypes would cost more than it saves.
COMPILED_CAST_ELEMENTS = 1 << 16


# IR names of the float destinations _cast converts to (all but the compressed ones).
_FLOAT_CASTS = {name: et.dtype for name, et in ELEMENT_TYPES.items()
                if et.is_float and name not in _COMPRESSED}


def _cast(x: np.ndarray, dtype) -> np.ndarray:
    """x.astype(dtype), on several threads for a large contiguous x, and by F16C for a
    large f16 -> f32 cast once the process has that loop (same result)."""
    if x.size < COMPILED_CAST_ELEMENTS or not x.flags.c_contiguous:
        return x.astype(dtype)      # the interpreter's every small Convert: nothing more
    if x.dtype == np.float16 and np.dtype(dtype) == np.float32:
        from . import f16c

        loop = f16c.loop()
        if loop is not None:
            return _in_parts(x, np.float32, loop.convert, PARALLEL_F16C_ELEMENTS)
        start = time.perf_counter()
        out = _in_parts(x, dtype, _numpy_cast)
        f16c.pay_rent(time.perf_counter() - start)
        return out
    return _in_parts(x, dtype, _numpy_cast)


def _in_parts(x: np.ndarray, dtype, cast, parallel_from: int = PARALLEL_CAST_ELEMENTS
              ) -> np.ndarray:
    """A new array of x's shape and `dtype` filled by cast(src, dst), which converts a flat
    part of x into the same part of the result: split over the kernel pool's threads for
    a large x (contiguous, like the result)."""
    from .pool import even_ranges, parallel, workers

    out = np.empty(x.shape, dtype)
    src, dst = x.reshape(-1), out.reshape(-1)
    parallel(lambda lo, hi: cast(src[lo:hi], dst[lo:hi]),
             even_ranges(x.size, workers(x.size, parallel_from // 2)))
    return out


def _numpy_cast(src: np.ndarray, dst: np.ndarray) -> None:
    np.copyto(dst, src, casting="unsafe")   # what astype does


# erf in f64 to within an ulp, vectorised: the piecewise rational approximations of
# fdlibm's s_erf.c (Sun Microsystems, 1993; the same constants serve musl and FreeBSD).
# NumPy has no erf, and SciPy is not a dependency.
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)
_ERX = 8.45062911510467529297e-01
# The same constants by name, for compiled erf loops that must give erf's steps exactly
# (ops/gelu_loop.py): each range's numerator and denominator, highest power last.
ERF_CONSTANTS = {"pp": _PP, "qq": _QQ, "pa": _PA, "qa": _QA, "ra": _RA, "sa": _SA,
                 "rb": _RB, "sb": _SB, "erx": _ERX}


def _poly(coeffs, z):
    acc = np.full_like(z, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc = acc * z + c
    return acc


def erf(x: np.ndarray) -> np.ndarray:
    """erf of an f64 array (NaN stays NaN, +-inf gives +-1).

    Each of fdlibm's ranges is evaluated on its own elements only (a GELU's inputs are
    mostly in the first): the same formula per element as computing every range for all
    of them and picking, at a third of the cost."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    y = np.empty_like(x)
    with np.errstate(all="ignore"):
        small = ax < 0.84375
        v = x[small]
        z = v * v
        y[small] = v + v * (_poly(_PP, z) / _poly(_QQ, z))
        mid = ~small & (ax < 1.25)
        s = ax[mid] - 1.0
        y[mid] = np.copysign(_ERX + _poly(_PA, s) / _poly(_QA, s), x[mid])
        for tail, (r, q) in (((ax >= 1.25) & (ax < 1 / 0.35), (_RA, _SA)),
                             ((ax >= 1 / 0.35) & (ax < 6.0), (_RB, _SB))):
            a = ax[tail]
            inv = 1.0 / (a * a)
            rs = _poly(r, inv) / _poly(q, inv)
            # exp(-x*x) split so its rounding error does not grow with x (fdlibm's trick).
            hi = (a.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
            value = 1.0 - np.exp(-hi * hi - 0.5625) * np.exp((hi - a) * (hi + a) + rs) / a
            y[tail] = np.copysign(value, x[tail])
        one = ax >= 6.0
        y[one] = np.copysign(1.0, x[one])
        nan = np.isnan(x)
        y[nan] = x[nan]
    return y


# name -> (function on f64 (or exact on the input dtype), integer handling, accepted kinds)
#   integer handling: "exact" applies the function to the integers themselves;
#                     "round" computes in f64 and rounds to nearest (the CPU plugin's way).
