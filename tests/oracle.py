"""Differential testing helpers: build a model with OpenVINO's Python API, write it with
ov.save_model, then run it through OpenVINO's CPU plugin and through irrun."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import irrun

ov = pytest.importorskip("openvino")

_core = None


def core():
    global _core
    if _core is None:
        _core = ov.Core()
    return _core


def ov_type(name: str):
    """The openvino.Type for an IR element type name ("f32", "boolean", ...)."""
    return getattr(ov.Type, name)


def save(model, directory, name="model", compress_to_fp16=False) -> str:
    """Write `model` as IR with ov.save_model; return the .xml path."""
    path = os.path.join(os.fspath(directory), f"{name}.xml")
    ov.save_model(model, path, compress_to_fp16=compress_to_fp16)
    return path


def ov_run(xml: str, feed: dict, config: dict | None = None) -> list[np.ndarray]:
    """Outputs of OpenVINO's CPU plugin (f32 inference precision, and `config`), in Result
    order."""
    compiled = core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                 **(config or {})})
    request = compiled.create_infer_request()
    feed = {k: _ov_tensor(v) for k, v in feed.items()}
    results = request.infer(feed)
    outs = []
    for out in compiled.outputs:
        value = np.array(results[out])
        if out.get_element_type() == ov.Type.bf16:
            # OpenVINO's Python API hands bf16 back as float16-typed bits: reinterpret them.
            import ml_dtypes
            value = value.view(np.uint16).view(ml_dtypes.bfloat16)
        outs.append(value)
    return outs


def _ov_tensor(value):
    """bf16 arrays go in bit for bit (OpenVINO's Python API has no bfloat16 dtype)."""
    value = np.asarray(value)
    if value.dtype.name == "bfloat16":
        t = ov.Tensor(ov.Type.bf16, list(value.shape))
        t.data.view(np.uint16)[...] = value.view(np.uint16)
        return t
    return value if value.flags.c_contiguous else np.array(value, order="C")  # keeps 0-d


def irrun_run(xml: str, feed: dict) -> list[np.ndarray]:
    m = irrun.read_model(xml)
    out = m.infer(feed)
    return [out[o.name] for o in m.outputs]


def compare(model, feed: dict, *, rtol=None, atol=0.0, compress_to_fp16=False, tmpdir=None):
    """Save `model`, run it in both, and assert shapes, dtypes and values agree."""
    with tempfile.TemporaryDirectory(dir=tmpdir) as d:
        xml = save(model, d, compress_to_fp16=compress_to_fp16)
        expected = ov_run(xml, feed)
        got = irrun_run(xml, feed)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert_same(g, e, rtol=rtol, atol=atol)
    return got, expected


def assert_same(got: np.ndarray, expected: np.ndarray, rtol=None, atol=0.0):
    """Shape first, then dtype, then values: integers exact, floats within a few ulp."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
    assert got.dtype == expected.dtype, f"dtype {got.dtype} != {expected.dtype}"
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, expected)
        return
    if rtol is None:
        rtol = {2: 1e-3, 4: 1e-5, 8: 1e-12}.get(got.dtype.itemsize, 1e-5)
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


# ---------------------------------------------------------------- model-building helpers

NP_TYPE = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64,
           "u8": np.uint8, "boolean": np.bool_}
OV_TYPE = {name: ov_type(name) for name in NP_TYPE}


def sample(shape, dtype, seed):
    """Random values of an element type: ints in [-1000, 1000), u8 over its range, normal floats."""
    rng = np.random.default_rng(seed)
    if dtype == "boolean":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "u8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    if dtype in ("i32", "i64"):
        return rng.integers(-1000, 1000, shape).astype(NP_TYPE[dtype])
    return rng.standard_normal(shape).astype(NP_TYPE[dtype])


def param(shape, dtype, name="x", dynamic=False):
    """A Parameter of `shape` (every dim -1 when dynamic)."""
    import openvino.opset8 as o8
    dims = [-1] * len(shape) if dynamic else list(shape)
    return o8.parameter(dims, OV_TYPE[dtype], name=name)


def i64(values):
    """An i64 Constant (opset8.constant refuses empty arrays; this does not)."""
    return ov.op.Constant(np.array(values, dtype=np.int64))


def plugin_bf16_bits(x: np.ndarray) -> np.ndarray:
    """The bf16 bits (uint16) the CPU plugin makes of f32 `x` where it does not round to
    nearest even (CPUs without AVX512-BF16), seen on an AMD EPYC with AVX2 and OpenVINO
    2026.4.1: (bits + 0x8000 * lsb) >> 16, lsb the bf16's own last bit (2570 -> 2560,
    where round to nearest gives 2576)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x8000 * ((bits >> 16) & 1)) >> 16).astype(np.uint16)


_bf16_rounds = None


def plugin_rounds_bf16() -> bool:
    """Whether this machine's CPU plugin rounds f32 -> bf16 to nearest even.

    It does on CPUs with AVX512-BF16 (and AMX); elsewhere it truncates the low 16 bits. The
    probe converts 2570.0, whose neighbours in bf16 are 2560 (truncation, bits 0x4520) and
    2576 (nearest, 0x4521), and reads the bf16 output's bits: a round trip back to f32 is
    no probe, since the plugin drops the pair of Converts on some CPUs (AMD EPYC without
    AVX-512: 2570 comes back).
    """
    global _bf16_rounds
    if _bf16_rounds is None:
        import openvino.opset8 as o
        p = o.parameter([1], ov.Type.f32, name="x")
        m = ov.Model([o.result(o.convert(p, "bf16"))], [p], "probe")
        compiled = core().compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        out = compiled.create_infer_request().infer({0: np.array([2570.0], np.float32)})
        _bf16_rounds = int(np.array(out[compiled.outputs[0]]).view(np.uint16)[0]) == 0x4521
    return _bf16_rounds

