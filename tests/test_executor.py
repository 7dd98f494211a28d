"""The executor: only what the Results need runs, in order; intermediates are freed."""
import gc
import weakref

import numpy as np
import pytest

import irrun
from irfiles import IRBuilder


def _chain(tmp_path, with_unused=False):
    b = IRBuilder()
    x = b.parameter("x", "f32", "4", [4])
    c1 = b.op("Convert", "opset1", [x], [0], [1], {"destination_type": "i32"}, name="to_i32",
              out_dims=[[4]], out_precisions=["I32"])
    c2 = b.op("Convert", "opset1", [(c1, 1)], [0], [1], {"destination_type": "f16"},
              name="to_f16", out_dims=[[4]], out_precisions=["FP16"])
    c3 = b.op("Convert", "opset1", [(c2, 1)], [0], [1], {"destination_type": "f32"},
              name="to_f32", out_dims=[[4]], out_precisions=["FP32"])
    if with_unused:
        b.op("Convert", "opset1", [x], [0], [1], {"destination_type": "i8"}, name="unused",
             out_dims=[[4]], out_precisions=["I8"])
    b.result((c3, 1), "y")
    return b.write(tmp_path)


def test_runs_in_order_and_frees_intermediates(tmp_path):
    model = irrun.read_model(_chain(tmp_path))
    seen, refs = [], {}

    def listener(node, outputs, seconds):
        seen.append(node.layer.name)
        for o in outputs:
            refs[node.layer.name] = weakref.ref(o) if o.flags.owndata else None
        gc.collect()
        if node.layer.name == "to_f32":
            # to_i32's output had its last use in to_f16: it must be gone by now.
            assert refs["to_i32"]() is None

    out = model.infer({"x": np.array([1.5, -2.5, 3, 4], np.float32)}, listener=listener)
    assert seen == ["x", "to_i32", "to_f16", "to_f32"]
    np.testing.assert_array_equal(out["y"], [1, -2, 3, 4])


def test_layers_no_result_needs_are_not_run(tmp_path):
    xml = _chain(tmp_path, with_unused=True)
    assert any(d.code == "unused-layer" for d in irrun.validate(xml))
    model = irrun.read_model(xml)
    seen = []
    model.infer({"x": np.zeros(4, np.float32)},
                listener=lambda node, outs, s: seen.append(node.layer.name))
    assert "unused" not in seen


def test_intermediate_and_until(tmp_path):
    model = irrun.read_model(_chain(tmp_path))
    x = np.array([1.5, -2.5, 3, 4], np.float32)
    everything = model.infer({"x": x}, intermediate=True)
    np.testing.assert_array_equal(everything["to_i32:0"], [1, -2, 3, 4])
    assert everything["to_f16:0"].dtype == np.float16
    part = model.infer({"x": x}, until="to_i32")
    assert list(part) == ["to_i32"]
    assert part["to_i32"].dtype == np.int32


def test_kernel_errors_get_the_layer_location(tmp_path):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class NoAttrs:
        pass

    @irrun.register("ZzBoom", version="extension")
    class ZzBoom:
        @staticmethod
        def infer(attrs, x):
            return [x]

        @staticmethod
        def run(attrs, x):
            raise irrun.OpError("input 0: value 7 at position [2] is out of range")

    try:
        b = IRBuilder()
        x = b.parameter("x", "f32", "4", [4])
        z = b.op("ZzBoom", "extension", [x], [0], [1], name="boom", out_dims=[[4]],
                 out_precisions=["FP32"])
        b.result((z, 1), "y")
        xml = b.write(tmp_path)
        model = irrun.read_model(xml)
        with pytest.raises(irrun.OpError) as info:
            model.infer({"x": np.zeros(4, np.float32)})
        text = str(info.value)
        assert text.startswith(f"{xml}:")
        assert "layer 'boom' (ZzBoom-extension): input 0: value 7 at position [2]" in text
        line = info.value.diagnostic.line
        assert 'name="boom"' in open(xml).read().splitlines()[line - 1]
    finally:
        from irrun.ir.registry import unregister
        unregister("ZzBoom", version="extension")


def test_views_of_small_buffers_go_uncounted_as_the_buffers_do():
    """The live budget skips a slot's small buffer of its own (each slot holds one array:
    at most SMALL bytes a slot); a view of such a buffer (a Reshape's, an Unsqueeze's of a
    decode step's tensors) is skipped the same way, a view of a large one is counted."""
    from irrun.ir.weights import LiveBudget

    budget = LiveBudget(limit=1 << 30, slots=8)
    small = np.zeros(1000, np.float32)
    budget.hold([0, 1], [small.reshape(10, 100), small[None][:, 5:]])
    assert budget.live == 0 and not budget._held
    budget.hold([2], [np.zeros(1 << 20, np.uint8).reshape(1024, 1024)[:1]])
    assert budget.live == 1 << 20
    budget.release(2)
    assert budget.live == 0


def test_a_kernel_s_irrun_error_is_not_its_own_cause(tmp_path):
    """A kernel's IrrunError (a budget refusal) is located and raised as itself: chained to
    itself, pickling it (as Dask does for a process worker) recursed without end."""
    import pickle
    from dataclasses import dataclass

    from irrun.ir import registry
    from irrun.opkit import TensorSpec, check_alloc, register

    @dataclass(frozen=True)
    class _NoAttrs:
        pass

    @register("HugeAsk", version="extension", attrs=_NoAttrs)
    class HugeAsk:
        @staticmethod
        def infer(attrs, x: TensorSpec) -> list[TensorSpec]:
            return [TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            check_alloc([1 << 40], np.float32, "what it asks for")
            return (x,)

    b = IRBuilder()
    x = b.parameter("x", "f32", "2", [2])
    ask = b.op("HugeAsk", "extension", [x], [0], [1], name="ask", out_dims=[[2]],
               out_precisions=["FP32"])
    b.result((ask, 1), "y")
    xml = b.write(tmp_path)
    try:
        m = irrun.read_model(xml)
        with pytest.raises(irrun.IrrunError, match="what it asks for") as info:
            m.infer({"x": np.ones(2, np.float32)})
    finally:
        registry.unregister("HugeAsk", version="extension")
    assert info.value.__cause__ is not info.value
    assert "layer 'ask'" in str(pickle.loads(pickle.dumps(info.value)))
