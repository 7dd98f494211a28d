"""The executor's check of every kernel output against the inferred spec (its fast path
skips the full check only when dtype and static shape are exactly what was promised)."""
from __future__ import annotations

import numpy as np
import pytest
from irfiles import IRBuilder

import irrun
from irrun.ir.registry import unregister


class Sub(np.ndarray):
    """An ndarray subclass: accepted like an ndarray (isinstance), not by the fast path."""


# What the kernel of the test op returns, by name, for input x (f32).
RETURNS = {
    "same": lambda x: (x.copy(),),
    "f64": lambda x: (x.astype(np.float64),),
    "transposed": lambda x: (np.ascontiguousarray(x.reshape(-1, 1)),),
    "flat": lambda x: (x.reshape(-1),),
    "list": lambda x: (x.tolist(),),
    "subclass": lambda x: (x.copy().view(Sub),),
    "two": lambda x: (x, x),
    "flat_if_3": lambda x: (x.reshape(-1) if x.shape[0] == 3 else x.copy(),),
}


@pytest.fixture
def op():
    """ZzOut-extension: output spec = input spec; the kernel returns RETURNS[mode]."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Attrs:
        mode: str = "same"

    @irrun.register("ZzOut", version="extension", attrs=Attrs)
    class ZzOut:
        @staticmethod
        def infer(attrs, x):
            return [x]

        @staticmethod
        def run(attrs, x):
            return RETURNS[attrs.mode](x)

    yield
    unregister("ZzOut", version="extension")


def model(tmp_path, mode, shape_text="2,3", dims=(2, 3)):
    b = IRBuilder()
    x = b.parameter("x", "f32", shape_text, list(dims))
    z = b.op("ZzOut", "extension", [x], [0], [1], {"mode": mode}, name="z",
             out_dims=[list(dims)], out_precisions=["FP32"])
    b.result((z, 1), "y")
    return irrun.read_model(b.write(tmp_path))


X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("shape_text, dims", [("2,3", (2, 3)), ("?,3", (-1, 3)),
                                              ("1..4,3", (-1, 3)), ("...", ())])
def test_right_outputs_pass(op, tmp_path, shape_text, dims):
    for mode in ("same", "subclass"):
        out = model(tmp_path, mode, shape_text, dims).infer({"x": X})["y"]
        np.testing.assert_array_equal(out, X)


@pytest.mark.parametrize("mode, message", [
    ("f64", "internal error: output 0 has dtype float64 but inference promised f32"),
    ("transposed", "output 0 has shape [6, 1] but inference promised [2,3]"),
    ("flat", "output 0 has shape [6] but inference promised [2,3]"),
    ("list", "internal error: output 0 is a list, not an array"),
    ("two", "internal error: the kernel returned 2 outputs, inference promised 1"),
])
def test_wrong_outputs_are_refused_with_the_layer_named(op, tmp_path, mode, message):
    with pytest.raises(irrun.OpError) as info:
        model(tmp_path, mode).infer({"x": X})
    assert str(info.value).endswith(f"layer 'z' (ZzOut-extension): {message}")


def test_a_dynamic_shape_is_checked_against_its_interval(op, tmp_path):
    m = model(tmp_path, "flat", "1..4,3", (-1, 3))
    with pytest.raises(irrun.OpError, match=r"output 0 has shape \[6\] but inference "
                                            r"promised \[1\.\.4,3\]"):
        m.infer({"x": X})


def test_the_rule_rerun_on_dynamic_inputs_is_skipped_only_for_the_same_inputs(tmp_path):
    # A dynamic layer's shape rule runs on the real inputs; it is remembered per layer for
    # the inputs it last accepted (types, shapes, small values), never for others.
    b = IRBuilder()
    a = b.parameter("a", "f32", "?,?", [-1, -1])
    w = b.parameter("w", "f32", "?,?", [-1, -1])
    target = b.parameter("target", "i64", "2", [2])
    mm = b.op("MatMul", "opset1", [a, w], [0, 1], [2], name="mm", out_dims=[[-1, -1]],
              out_precisions=["FP32"])
    r = b.op("Reshape", "opset1", [(mm, 2), target], [0, 1], [2], {"special_zero": "false"},
             name="r", out_dims=[[-1, -1]], out_precisions=["FP32"])
    b.result((r, 2), "y")
    m = irrun.read_model(b.write(tmp_path))
    ok = {"a": np.ones((2, 3), np.float32), "w": np.ones((3, 4), np.float32),
          "target": np.array([4, 2], np.int64)}
    for _ in range(2):
        assert m.infer(ok)["y"].shape == (4, 2)
    with pytest.raises(irrun.ShapeError, match="layer 'mm'.*inner dims differ"):
        m.infer({**ok, "w": np.ones((2, 4), np.float32)})          # another shape
    with pytest.raises(irrun.ShapeError, match=r"layer 'r'.*cannot reshape input shape \[2, 4\]"):
        m.infer({**ok, "target": np.array([3, 2], np.int64)})      # same shape, other values
    assert m.infer({**ok, "target": np.array([8, 1], np.int64)})["y"].shape == (8, 1)
    assert m.infer(ok)["y"].shape == (4, 2)


def test_a_dynamic_output_is_checked_at_every_run_whatever_passed_before(op, tmp_path):
    m = model(tmp_path, "flat_if_3", "1..4,3", (-1, 3))
    for _ in range(2):
        assert m.infer({"x": X})["y"].shape == (2, 3)
    with pytest.raises(irrun.OpError, match=r"output 0 has shape \[9\] but inference "
                                            r"promised \[1\.\.4,3\]"):
        m.infer({"x": np.zeros((3, 3), np.float32)})
