"""Prepared kernels (irrun.opkit.prepared): a layer of static shapes whose op has `prepare`
runs the function it made once per plan, with the kernel's results bit for bit; a listener's
run (trace, profile, compare) still runs the kernels."""
import numpy as np
import pytest

import irrun
from irrun.errors import OpError
from irrun.ir.registry import unregister
from irrun.run.executor import Plan
from irrun.tools.builder import GraphBuilder


def _run_with_kernels(model, feed):
    """The model's outputs as the kernels compute them: a listener's run is not prepared."""
    return model.infer(feed, listener=lambda node, outputs, seconds: None)


def _plan(model):
    return Plan(model.program, model._targets(None)[0])


def test_an_op_prepares_once_per_plan_and_its_function_computes_the_layer():
    calls = {"prepare": 0, "fn": 0, "run": 0}

    @irrun.register("ZzScale", version="extension")
    class ZzScale:
        @staticmethod
        def infer(attrs, x, k):
            return [irrun.TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x, k):
            calls["run"] += 1
            return (x * k,)

        @staticmethod
        def prepare(attrs, inputs, values):
            calls["prepare"] += 1
            assert [s.shape for s in inputs] == [inputs[0].shape, ()]
            assert values[0] is None and values[1] == np.float32(3)
            twice = irrun.opkit.Fixed(values[1] * 2)     # computed once, held by the plan

            def scale(x, k2):
                calls["fn"] += 1
                return x * (k2 / 2)
            return scale, (0, twice)

    try:
        g = GraphBuilder("scale")
        x = g.parameter("x", "f32", [2, 3])
        g.result(g.op("ZzScale", [x, g.constant(np.float32(3))], version="extension"),
                 name="y")
        m = g.model()
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        for _ in range(3):
            np.testing.assert_array_equal(m.infer({"x": x})["y"], x * 3)
        assert calls == {"prepare": 1, "fn": 3, "run": 0}
        np.testing.assert_array_equal(_run_with_kernels(m, {"x": x})["y"], x * 3)
        assert calls["run"] == 1
    finally:
        unregister("ZzScale", version="extension")


def test_a_failing_prepare_keeps_the_kernel_which_reports_where_the_run_meets_it():
    @irrun.register("ZzPicky", version="extension")
    class ZzPicky:
        @staticmethod
        def infer(attrs, x):
            return [irrun.TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            raise OpError("refused at run time")

        @staticmethod
        def prepare(attrs, inputs, values):
            irrun.opkit.fail("refused when prepared")

    try:
        g = GraphBuilder("picky")
        g.result(g.op("ZzPicky", [g.parameter("x", "f32", [4])], version="extension",
                      name="picky"), name="y")
        m = g.model()
        assert _plan(m).steps[1].bare is None
        with pytest.raises(OpError, match=r"layer 'picky' \(ZzPicky-extension\): refused at run"):
            m.infer({"x": np.zeros(4, np.float32)})
    finally:
        unregister("ZzPicky", version="extension")


def _many_ops():
    """A decoder step's kinds of layers, every shape static, weights as Consts."""
    rng = np.random.default_rng(0)
    g = GraphBuilder("many")
    x = g.parameter("x", "f32", [1, 1, 8])
    ids = g.parameter("ids", "i64", [1, 2])
    i64 = lambda *v: g.constant(np.array(v, np.int64))
    table = g.constant(rng.standard_normal((10, 8)).astype(np.float32))
    emb = g.op("Gather", [table, ids, i64(0)], version="opset8", batch_dims=0)    # [1, 2, 8]
    sq = g.op("Power", [x, g.constant(np.full((1, 1, 1), 2, np.float32))])
    mean = g.op("ReduceMean", [sq, i64(-1)], keep_dims=True)
    r = g.op("Divide", [g.constant(np.ones((1, 1, 1), np.float32)),
                        g.op("Sqrt", [g.op("Add", [mean, g.constant(np.full((1, 1, 1), 1e-6,
                                                                               np.float32))])])])
    h = g.op("Multiply", [x, r])
    w = g.constant(rng.standard_normal((16, 8)).astype(np.float32))
    q = g.op("MatMul", [h, w], transpose_a=False, transpose_b=True)                 # [1, 1, 16]
    heads = g.op("Transpose", [g.op("Reshape", [q, i64(1, 1, 2, 8)], special_zero=True),
                               i64(0, 2, 1, 3)])                                   # [1, 2, 1, 8]
    lo = g.op("Slice", [heads, i64(0), i64(4), i64(1), i64(3)])
    hi = g.op("Slice", [heads, i64(4), i64(2 ** 62), i64(1), i64(3)])
    rot = g.op("Concat", [g.op("Negative", [hi]), lo], axis=-1)
    mixed = g.op("Subtract", [g.op("Multiply", [heads, g.op("Cos", [heads])]),
                              g.op("Multiply", [rot, g.op("Sin", [heads])])])
    flat = g.op("Squeeze", [g.op("Unsqueeze", [mixed, i64(0)]), i64(0)])           # [1, 2, 1, 8]
    total = g.op("ReduceSum", [g.op("Add", [emb, g.op("Reshape", [flat, i64(1, 2, 8)],
                                                       special_zero=False)]), i64(1)],
                 keep_dims=False)
    g.result(g.op("Convert", [total], destination_type="f16"), name="half")
    g.result(g.op("Convert", [ids], destination_type="i32"), name="ids32")
    return g.model()


def test_prepared_kernels_give_the_kernels_bits():
    m = _many_ops()
    prepared = {s.node.layer.type for s in _plan(m).steps if s.bare is not None}
    assert prepared >= {"Gather", "Power", "ReduceMean", "Divide", "Sqrt", "Add", "Multiply",
                        "MatMul", "Transpose", "Reshape", "Slice", "Concat", "Negative",
                        "Subtract", "Cos", "Sin", "Unsqueeze", "Squeeze", "ReduceSum",
                        "Convert"}
    rng = np.random.default_rng(1)
    for _ in range(3):
        feed = {"x": rng.standard_normal((1, 1, 8)).astype(np.float32),
                "ids": rng.integers(-10, 10, (1, 2))}
        got, want = m.infer(feed), _run_with_kernels(m, feed)
        for name in ("half", "ids32"):
            assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
            assert got[name].tobytes() == want[name].tobytes()


def test_a_prepared_gather_refuses_an_index_out_of_range_as_its_kernel_does():
    m = _many_ops()
    feed = {"x": np.zeros((1, 1, 8), np.float32), "ids": np.array([[3, 10]])}
    for run in (m.infer, lambda f: _run_with_kernels(m, f)):
        with pytest.raises(OpError, match=r"\(Gather-opset8\): indices\[0,1\] = 10 is out of "
                                          r"range \[-10, 9\]"):
            run(feed)
