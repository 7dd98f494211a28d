"""Plans for one input signature (irrun.run.specialize): a model with dynamic inputs fed the
same shapes again runs a plan whose shapes are static where they follow from the input
shapes, with the same results as the general plan, and keeps checking what depends on
input values."""
import numpy as np
import pytest

from irrun.run import specialize
from irrun.tools.builder import GraphBuilder
import irrun
from irrun.errors import OpError
from irrun.run.executor import Plan


def _shape_chain():
    """x [?, 4] -> MatMul -> ReLU, and a Reshape of it to ShapeOf(x) (shape arithmetic the
    signature's plan knows the value of)."""
    g = GraphBuilder("chain")
    x = g.parameter("x", "f32", [None, 4])
    w = g.constant(np.arange(8, dtype=np.float32).reshape(4, 2) / 8)
    y = g.op("ReLU", [g.op("MatMul", [x, w], version="opset1")])
    flat = g.op("Reshape", [y, g.constant(np.array([-1], np.int64))], version="opset1",
                special_zero=False)
    rows = g.op("Gather", [g.op("ShapeOf", [x], version="opset3", output_type="i64"),
                           g.constant(np.array([0], np.int64)), g.constant(np.array(0, np.int64))],
                version="opset8", batch_dims=0)
    back = g.op("Concat", [rows, g.constant(np.array([2], np.int64))], version="opset1", axis=0)
    g.result(g.op("Reshape", [flat, back], version="opset1", special_zero=False), name="out")
    return g.model()


def _plans(m):
    return [p for p in m._signature_plans.plans.values() if p]


def test_second_run_of_a_signature_gets_a_static_plan_with_the_same_result():
    m = _shape_chain()
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    first = m.infer({"x": x})["out"]
    assert not _plans(m)                        # one run: the general plan only
    second = m.infer({"x": x})["out"]
    (plan,) = _plans(m)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(second, np.maximum(x @ (np.arange(8).reshape(4, 2) / 8), 0),
                               rtol=1e-6)
    # Every layer that runs takes the fast path; the shape arithmetic is known, not run.
    kinds = {s.node.layer.type: s.kind for s in plan.steps}
    assert kinds["MatMul"] == kinds["ReLU"] == kinds["Reshape"] == "run"
    assert kinds["Concat"] == "folded" and "ShapeOf" not in kinds and "Gather" not in kinds
    assert plan.most_bytes is not None
    # Other values of the same shape: the same plan, the right answer.
    x2 = -x
    np.testing.assert_allclose(m.infer({"x": x2})["out"],
                               np.maximum(x2 @ (np.arange(8).reshape(4, 2) / 8), 0), rtol=1e-6)
    assert len(_plans(m)) == 1


def test_each_signature_has_its_own_plan_and_only_the_latest_are_kept(monkeypatch):
    monkeypatch.setattr(specialize, "MAX_SIGNATURE_PLANS", 2)
    m = _shape_chain()
    for rows in (1, 2, 3, 2, 1):
        x = np.ones((rows, 4), np.float32)
        for _ in range(2):
            assert m.infer({"x": x})["out"].shape == (rows, 2)
    shapes = [k[-1][0][2] for k, p in m._signature_plans.plans.items() if p]
    assert shapes == [(2, 4), (1, 4)]           # most recent last, at most 2


def _ranged():
    """out = Range(0, n) * 2 for a fed scalar n: a shape that depends on a value."""
    g = GraphBuilder("ranged")
    n = g.parameter("n", "i64", [])
    r = g.op("Range", [g.constant(np.array(0, np.int64)), n, g.constant(np.array(1, np.int64))],
             version="opset4", output_type="i64")
    g.result(g.op("Multiply", [r, g.constant(np.array(2, np.int64))], version="opset1"),
             name="out")
    return g.model()


def test_shapes_that_depend_on_values_are_still_checked_each_run():
    m = _ranged()
    for n in (3, 3, 5, 5, 0, 7):
        assert m.infer({"n": np.array(n, np.int64)})["out"].tolist() == list(range(0, 2 * n, 2))
    (plan,) = _plans(m)
    step = next(s for s in plan.steps if s.node.layer.type == "Range")
    assert step.recheck is not None             # the output size is not the signature's


def test_a_kernel_that_breaks_the_signature_plan_promise_is_an_error(monkeypatch):
    m = _shape_chain()
    x = np.ones((2, 4), np.float32)
    m.infer({"x": x})
    m.infer({"x": x})
    (plan,) = _plans(m)
    relu = next(s for s in plan.steps if s.node.layer.type == "ReLU")
    relu.bare = None            # the kernel's path (a prepared one: tests/test_prepared.py)
    relu.fast = (lambda attrs, v: (v[:1],),) + relu.fast[1:]
    with pytest.raises(OpError, match=r"output 0 has shape \[1, 2\] but inference promised "
                                      r"\[2,2\]"):
        m.infer({"x": x})


def test_a_signature_the_rules_refuse_keeps_the_general_plan():
    """MatMul of [?, 3] fed [2, 3] with a [4, 2] weight: no plan of its own (the rule
    refuses), and the run reports the layer's error as it did."""
    g = GraphBuilder("bad")
    x = g.parameter("x", "f32", [None, None])
    g.result(g.op("MatMul", [x, g.constant(np.ones((4, 2), np.float32))], version="opset1"),
             name="y")
    m = g.model()
    for _ in range(3):
        with pytest.raises(Exception, match="MatMul"):
            m.infer({"x": np.ones((2, 3), np.float32)})
    assert list(m._signature_plans.plans.values()) == [False]


def test_static_models_do_not_count_signatures():
    g = GraphBuilder("static")
    x = g.parameter("x", "f32", [2, 4])
    g.result(g.op("ReLU", [x]), name="y")
    m = g.model()
    for _ in range(3):
        m.infer({"x": np.ones((2, 4), np.float32)})
    assert not m._signature_plans.plans and not m._signature_plans.seen
    assert all(isinstance(p, Plan) for p in m._plans.values())


def _kv_cache():
    """An LLM-style cache: a session variable [1,?,4] each run extends by the fed row x
    (Concat, Assign); out = the cache's rows scored against x; twice = x * 2 (whose shape
    is the same every run)."""
    g = GraphBuilder("kv")
    x = g.parameter("x", "f32", [None, 1, 4])
    init = g.op("Broadcast", [g.constant(np.array(0, np.float32)),
                              g.constant(np.array([1, 0, 4], np.int64))], version="opset3")
    rv = g.op("ReadValue", [init], version="opset6", variable_id="kv", variable_type="f32",
              variable_shape="1,?,4")
    cache = g.op("Concat", [rv, x], axis=1)
    g.op("Assign", [cache], version="opset6", variable_id="kv")
    g.result(g.op("ReduceSum", [g.op("Multiply", [cache, x]), g.constant(np.array([2], np.int64))],
                  keep_dims=False), name="out")
    g.result(g.op("Multiply", [x, g.constant(np.array(2, np.float32))]), name="twice")
    return g.model()


def test_a_session_variable_that_grows_each_run_gets_one_plan_for_every_run():
    """The variable's shape is part of what a plan is specialised to; the dim that grows
    between runs is left dynamic in a plan every later run shares, in which the layers the
    cache does not reach are static."""
    m = _kv_cache()
    session = m.create_session()
    rows = []
    rng = np.random.default_rng(0)
    for k in range(6):
        x = rng.standard_normal((1, 1, 4)).astype(np.float32)
        rows.append(x[0, 0])
        got = session.infer({"x": x})
        cache = np.stack(rows)
        np.testing.assert_allclose(got["out"], (cache * x[0, 0]).sum(-1)[None], rtol=1e-6)
        np.testing.assert_array_equal(got["twice"], 2 * x)
    assert not _plans(m)                        # every run's signature was new
    (plan,) = [p for p in m._signature_plans.patterns.values() if p]
    kinds = {s.node.layer.type: s for s in plan.steps}
    assert str(kinds["ReadValue"].specs[0].shape) == "(1, ?, 4)"
    assert kinds["Concat"].recheck is not None
    multiplies = [s for s in plan.steps if s.node.layer.type == "Multiply"]
    assert sorted(s.kind for s in multiplies) == ["op", "run"]   # x * 2 static, cache * x not
    # After a reset the cache starts empty again; a batch of 2 rows fits no plan's shapes
    # (the variable is [1,?,4]) and is refused by the Concat's rule as before.
    session.reset_state()
    np.testing.assert_array_equal(session.infer({"x": x})["twice"], 2 * x)
    with pytest.raises(Exception, match="Concat"):
        session.infer({"x": np.ones((2, 1, 4), np.float32)})


def _float_range():
    """out = Range(0, stop, 1) for a fed f32 scalar stop, in two layers of the same rule."""
    g = GraphBuilder("float_range")
    stop = g.parameter("stop", "f32", [])
    zero, one = g.constant(np.array(0, np.float32)), g.constant(np.array(1, np.float32))
    for name in ("a", "b"):
        g.result(g.op("Range", [zero, stop, one], version="opset4", output_type="f32"),
                 name=name)
    return g.model()


def test_a_rule_that_reads_float_values_is_checked_again_for_new_ones(monkeypatch):
    """Layers of one rule share what it accepted, without the values of float inputs only
    when the rule did not read them: Range reads its float bounds, so a new stop of the
    same shape is checked again, and one past the memory limit is refused by the rule
    (before the kernel allocates) in each layer."""
    m = _float_range()
    for stop in (3, 5, 5, 2):
        got = m.infer({"stop": np.array(stop, np.float32)})
        assert got["a"].tolist() == got["b"].tolist() == list(range(stop))
    monkeypatch.setenv("IRRUN_MAX_BYTES", "4096")
    with pytest.raises(irrun.ResourceError, match=r"output 0: shape \[2000\]"):
        m.infer({"stop": np.array(2000, np.float32)})


def test_layers_of_one_rule_share_its_verdict_on_the_same_shapes():
    """The KV cache model's plan for growing runs: its Multiply of the cache sees new
    shapes each run; the rule runs once per (rule, shapes), not once per layer."""
    from irrun.run import executor

    m = _kv_cache()
    session = m.create_session()
    calls = []
    real = executor.check_inputs
    executor._ACCEPTED.clear()        # what other tests' models of the same rules left
    x = np.ones((1, 1, 4), np.float32)
    for _ in range(4):
        session.infer({"x": x})

    def counting(node, *args):
        calls.append(node.layer.type)
        return real(node, *args)

    executor.check_inputs = counting
    try:
        session.infer({"x": x})
        first = list(calls)
        calls.clear()
        session.reset_state()
        for _ in range(5):
            session.infer({"x": 2 * x})     # the same shapes as the runs before, other values
    finally:
        executor.check_inputs = real
    assert "Multiply" in first
    # After the reset the cache grows through shapes the rules accepted before: runs 2-5
    # (caches of 1..4 rows) recheck nothing the first round saw with other values.
    assert "Concat" not in calls and "Multiply" not in calls, calls


def test_a_rule_whose_verdict_ignores_the_dynamic_dims_runs_once_for_every_length():
    """The KV cache's Concat (every dim but the axis static: Concat.rule_ignores_dims) is
    checked at its first run of the plan and not for each new length; the Multiply of the
    grown cache by x, whose rule relates the two shapes, is checked for each."""
    from irrun.run import executor

    m = _kv_cache()
    session = m.create_session()
    x = np.ones((1, 1, 4), np.float32)
    executor._ACCEPTED.clear()
    calls = []
    real = executor.check_inputs

    def counting(node, *args):
        calls.append(node.layer.type)
        return real(node, *args)

    executor.check_inputs = counting
    try:
        for k in range(8):
            session.infer({"x": x})
            if k == 3:                  # the plan for growing runs is in use from here
                calls.clear()
    finally:
        executor.check_inputs = real
    assert calls.count("Multiply") == 4 and "Concat" not in calls, calls
