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
    column = g.op("Reshape", [g.op("Swish", [x]), i64(1, 8, 1)], special_zero=False)
    g.result(g.op("MatMul", [column, g.constant(rng.standard_normal((1, 1, 3)).astype(np.float32))],
                  transpose_a=False, transpose_b=False), name="outer")
    return g.model()


def test_prepared_kernels_give_the_kernels_bits():
    m = _many_ops()
    prepared = {s.node.layer.type for s in _plan(m).steps if s.bare is not None}
    assert prepared >= {"Gather", "Power", "ReduceMean", "Divide", "Sqrt", "Add", "Multiply",
                        "MatMul", "Transpose", "Reshape", "Slice", "Concat", "Negative",
                        "Subtract", "Cos", "Sin", "Unsqueeze", "Squeeze", "ReduceSum",
                        "Convert", "Swish"}
    rng = np.random.default_rng(1)
    for _ in range(3):
        feed = {"x": rng.standard_normal((1, 1, 8)).astype(np.float32),
                "ids": rng.integers(-10, 10, (1, 2))}
        got, want = m.infer(feed), _run_with_kernels(m, feed)
        for name in ("half", "ids32", "outer"):
            assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
            assert got[name].tobytes() == want[name].tobytes()


def test_a_prepared_gather_refuses_an_index_out_of_range_as_its_kernel_does():
    m = _many_ops()
    feed = {"x": np.zeros((1, 1, 8), np.float32), "ids": np.array([[3, 10]])}
    for run in (m.infer, lambda f: _run_with_kernels(m, f)):
        with pytest.raises(OpError, match=r"\(Gather-opset8\): indices\[0,1\] = 10 is out of "
                                          r"range \[-10, 9\]"):
            run(feed)


def _dynamic_ops():
    """Layers of dynamic shape (a sequence length that changes from run to run) of the
    kinds a decode step runs, rechecked by their shape rules and then prepared."""
    g = GraphBuilder("dynamic")
    x = g.parameter("x", "f32", [1, None, 4])
    y = g.parameter("y", "f32", [3, None, 4])
    m = g.parameter("m", "i64", [1, None])
    i64 = lambda *v: g.constant(np.array(v, np.int64))
    u = g.op("Unsqueeze", [x, i64(1)])                                     # [1, 1, ?, 4]
    sq = g.op("Squeeze", [u, i64(1)])                                      # [1, ?, 4]
    split = g.op("Reshape", [x, i64(0, -1, 2, 2)], special_zero=True)      # [1, ?, 2, 2]
    back = g.op("Reshape", [split, g.op("ShapeOf", [x], output_type="i64")], special_zero=False)
    wide = g.op("Broadcast", [x, g.op("ShapeOf", [y], output_type="i64")], mode="numpy")
    both = g.op("Broadcast", [sq, i64(3, 1, 1)], mode="bidirectional")
    keep = g.op("Convert", [m], destination_type="boolean")               # [1, ?]
    twice = g.op("BitwiseAnd", [keep, g.op("Convert", [m], destination_type="boolean")])
    mask = g.op("Unsqueeze", [twice, i64(1, 2)])                          # [1, 1, 1, ?]
    le = g.op("LessEqual", [x, back])
    picked = g.op("Select", [le, g.op("Multiply", [x, sq]), g.op("Subtract", [back, x])])
    joined = g.op("Concat", [picked, x], axis=1)
    turned = g.op("Transpose", [joined, i64(0, 2, 1)])
    total = g.op("ReduceSum", [turned, i64(2)], keep_dims=False)
    column = g.op("Gather", [joined, i64(1), i64(2)], batch_dims=0)
    att = g.op("ScaledDotProductAttention", [u, u, u, mask, g.constant(np.float32(0.5))],
               causal=False)
    ids = g.op("Add", [m, m])
    n = g.op("Gather", [g.op("ShapeOf", [x], output_type="i64"), g.constant(np.int64(1)),
                        g.constant(np.int64(0))], batch_dims=0)
    steps = g.op("Range", [g.constant(np.int64(0)), n, g.constant(np.int64(1))],
                 output_type="i32")
    mean = g.op("ReduceMean", [g.op("Swish", [x]), i64(2)], keep_dims=True)
    for name, t in (("wide", wide), ("both", both), ("total", total), ("column", column),
                    ("att", att), ("ids", ids), ("ids32", g.op("Convert", [ids],
                                                               destination_type="i32")),
                    ("steps", steps), ("mean", mean)):
        g.result(t, name=name)
    return g.model()


def test_layers_of_dynamic_shape_run_prepared_kernels_with_the_kernels_bits():
    m = _dynamic_ops()
    rng = np.random.default_rng(2)
    for n in (2, 3, 4, 5, 6, 4, 7):
        feed = {"x": rng.standard_normal((1, n, 4)).astype(np.float32),
                "y": rng.standard_normal((3, n, 4)).astype(np.float32),
                "m": rng.integers(-1, 2, (1, n))}
        got, want = m.infer(feed), _run_with_kernels(m, feed)
        for name in want:
            assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
            assert got[name].tobytes() == want[name].tobytes(), name
    plans = [p for p in m._signature_plans.patterns.values() if p]
    prepared = {s.node.layer.type for p in plans for s in p.steps if s.prepared is not None}
    assert prepared >= {"Unsqueeze", "Squeeze", "Reshape", "ShapeOf", "Broadcast", "Convert",
                        "BitwiseAnd", "LessEqual", "Select", "Multiply", "Subtract", "Concat",
                        "Transpose", "ReduceSum", "Gather", "ScaledDotProductAttention", "Add",
                        "Range", "ReduceMean", "Swish"}
    # What the shape rule refuses is still refused before a prepared kernel runs.
    bad = {"x": np.zeros((1, 5, 4), np.float32), "y": np.zeros((3, 6, 4), np.float32),
           "m": np.zeros((1, 5), np.int64)}
    for run in (m.infer, lambda f: _run_with_kernels(m, f)):
        with pytest.raises(irrun.IrrunError, match=r"\(Broadcast-opset3\)"):
            run(bad)


@pytest.mark.parametrize("folder", ["genai_llama", "genai_llama_int4"])
def test_a_decode_step_gives_the_kernels_bits(folder):
    import json
    from pathlib import Path

    path = Path(__file__).parent.parent / "models" / folder
    model = irrun.read_model(path / "openvino_model.xml")
    plain, kernels = model.create_session(), model.create_session()
    prompt = json.loads((path / "oracle.json").read_text())["cases"][0]["prompt_ids"]
    ids, n = list(prompt), len(prompt)
    for step in range(8):
        feed = {"input_ids": np.array([ids if step == 0 else ids[-1:]], np.int64),
                "attention_mask": np.ones((1, n), np.int64),
                "position_ids": np.arange(n - (len(prompt) if step == 0 else 1), n)[None],
                "beam_idx": np.zeros(1, np.int32)}
        got = plain.infer(feed)["logits"]
        want = kernels.infer(feed, listener=lambda node, outputs, seconds: None)["logits"]
        assert got.tobytes() == want.tobytes()
        ids.append(int(np.argmax(got[0, -1])))
        n += 1
    plans = [p for p in model._signature_plans.patterns.values() if p]
    prepared = {s.node.layer.type for p in plans for s in p.steps if s.prepared is not None}
    assert {"ScaledDotProductAttention", "Concat", "Broadcast", "Gather"} <= prepared


def test_a_prepared_function_that_breaks_the_promise_is_a_located_error():
    @irrun.register("ZzWrong", version="extension")
    class ZzWrong:
        @staticmethod
        def infer(attrs, x):
            return [irrun.TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            return (x,)

        @staticmethod
        def prepare(attrs, inputs, values):
            return (lambda x: x[:1]), (0,)

    try:
        g = GraphBuilder("wrong")
        g.result(g.op("ZzWrong", [g.parameter("x", "f32", [4])], version="extension",
                      name="wrong"), name="y")
        m = g.model()
        with pytest.raises(OpError, match=r"layer 'wrong' \(ZzWrong-extension\): output 0 has "
                                          r"shape \[1\] but inference promised \[4\]"):
            m.infer({"x": np.zeros(4, np.float32)})
    finally:
        unregister("ZzWrong", version="extension")
