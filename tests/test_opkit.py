"""The op kit's contract: ops/ imports only irrun.opkit, settings are read in one place, the
worker pool survives a fork, and errors are mapped by phase."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import irrun
from irrun import config as irrun_config
from irrun.ui.cli import cli
from irrun.opkit import parallel

OPS = Path(__file__).resolve().parent.parent / "ops"


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node.lineno, ("." * node.level) + (node.module or ""), \
                [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, []


@pytest.mark.parametrize("path", sorted(OPS.glob("*.py")), ids=lambda p: p.name)
def test_ops_modules_import_only_the_kit(path):
    if path.name == "__init__.py":
        return
    bad = []
    # The one exception among siblings: a compiled loop module (*_loop.py: numba, or LLVM
    # IR), which its op imports on first run (`from .x_loop import f` or `from . import
    # x_loop`).
    for line, module, names in _imports(path):
        loop_modules = module == "." and names and all(n.endswith("_loop") for n in names)
        if module.startswith(".") and not module.endswith("_loop") and not loop_modules:
            bad.append(f"{path.name}:{line}: imports {module} (another ops module)")
        elif module.startswith("irrun") and module not in (
                "irrun.opkit", "irrun.opkit.compiled", "irrun.opkit.llvm"):
            bad.append(f"{path.name}:{line}: imports {module} (irrun internals)")
        bad += [f"{path.name}:{line}: imports private {n} from {module}" for n in names
                if n.startswith("_") and n != "__future__" and module != "__future__"]
    assert not bad, "\n".join(bad)


def test_kit_names_are_all_importable():
    import irrun.opkit as kit

    missing = [n for n in kit.__all__ if not hasattr(kit, n)]
    assert not missing


def test_bad_setting_is_one_usage_error(monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", "lots")
    result = CliRunner().invoke(cli, ["ops"])
    assert result.exit_code == 2
    assert "IRRUN_MAX_BYTES='lots' is not a byte count" in result.output
    assert result.output.count("IRRUN_MAX_BYTES") == 1
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1G")
    monkeypatch.setenv("IRRUN_THREADS", "0")
    result = CliRunner().invoke(cli, ["ops"])
    assert result.exit_code == 2 and "IRRUN_THREADS='0'" in result.output


def test_settings_are_parsed_once_per_value(monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", "3M")
    monkeypatch.setenv("IRRUN_THREADS", "2")
    first = irrun_config.config()
    assert first == irrun_config.Config(3 << 20, 2)
    assert irrun_config.config() is first          # cached, not parsed again
    monkeypatch.setenv("IRRUN_MAX_BYTES", "4M")
    assert irrun_config.config().max_bytes == 4 << 20


def test_pool_runs_every_range_and_survives_fork():
    assert parallel(lambda a, b: a + b, [(1, 2), (3, 4), (5, 6)]) == [3, 7, 11]
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    # A child forked after the pool exists must make its own pool, not wait on threads that
    # do not exist in it.
    script = ("import os, sys\n"
              "from irrun.opkit import parallel\n"
              "parallel(lambda a: a, [(1,), (2,)])\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    ok = parallel(lambda a: a * 2, [(1,), (2,), (3,)]) == [2, 4, 6]\n"
              "    os._exit(0 if ok else 3)\n"
              "_, status = os.waitpid(pid, 0)\n"
              "sys.exit(os.waitstatus_to_exitcode(status))\n")
    done = subprocess.run([sys.executable, "-c", script], timeout=60,
                          env=dict(os.environ, IRRUN_THREADS="2"))
    assert done.returncode == 0


def test_python_bug_in_a_shape_rule_is_an_internal_error(tmp_path):
    from irrun.ir import registry
    from irrun.opkit import TensorSpec, register

    @register("ZzBuggy", version="extension")
    class ZzBuggy:
        @staticmethod
        def infer(attrs, x):
            return [TensorSpec(x.etype, (x.shape[5],))]     # IndexError: a bug, not a shape

        @staticmethod
        def run(attrs, x):
            return (x,)

    xml = tmp_path / "m.xml"
    xml.write_text(_buggy_xml())
    try:
        problems = irrun.validate(xml)
    finally:
        registry.unregister("ZzBuggy", version="extension")
    errors = [d for d in problems if d.severity == "error"]
    assert len(errors) == 1 and errors[0].code == "internal"
    assert "internal error in the shape rule of ZzBuggy-extension: IndexError" in errors[0].message
    assert "test_opkit.py:" in errors[0].message and "an irrun bug" in errors[0].message


def test_fail_is_an_op_error_at_run_time_and_a_located_shape_error_at_load(tmp_path):
    from irrun.ir import registry
    from irrun.opkit import TensorSpec, fail, register

    @register("ZzBuggy", version="extension")
    class ZzFails:
        @staticmethod
        def infer(attrs, x):
            if x.shape is not None and len(x.shape) == 1:
                fail("ZzBuggy takes rank 2, got rank 1")
            return [TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            fail("the values are wrong", code="value")

    xml = tmp_path / "m.xml"
    xml.write_text(_buggy_xml())
    try:
        m = irrun.read_model(xml)
        with pytest.raises(irrun.OpError) as info:
            m.infer({"x": np.zeros((2, 3), np.float32)})
        assert type(info.value) is irrun.OpError
        assert str(info.value).startswith(f"{xml}:8: error: layer 'act' (ZzBuggy-extension): "
                                          "the values are wrong")
        rank1 = tmp_path / "m1.xml"
        rank1.write_text(_buggy_xml("3", "<dim>3</dim>"))
        with pytest.raises(irrun.ModelError) as info:
            irrun.read_model(rank1)
        assert str(info.value) == (f"{rank1}:8: error: layer 'act' (ZzBuggy-extension): "
                                   "ZzBuggy takes rank 2, got rank 1")
    finally:
        registry.unregister("ZzBuggy", version="extension")


def _buggy_xml(shape="2,3", dims="<dim>2</dim><dim>3</dim>"):
    return f"""<?xml version="1.0"?>
<net name="buggy" version="11">
  <layers>
    <layer id="0" name="x" type="Parameter" version="opset1">
      <data shape="{shape}" element_type="f32"/>
      <output><port id="0" precision="FP32" names="x">{dims}</port></output>
    </layer>
    <layer id="1" name="act" type="ZzBuggy" version="extension">
      <input><port id="0" precision="FP32">{dims}</port></input>
      <output><port id="1" precision="FP32" names="y">{dims}</port></output>
    </layer>
    <layer id="2" name="y" type="Result" version="opset1">
      <input><port id="0" precision="FP32">{dims}</port></input>
    </layer>
  </layers>
  <edges>
    <edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
    <edge from-layer="1" from-port="1" to-layer="2" to-port="0"/>
  </edges>
</net>
"""


@pytest.fixture
def f16c_state(monkeypatch):
    """opkit.f16c as a fresh process has it: no loop built, no NumPy time paid towards it
    (other tests may have built it); the test may then build it, and it is put back."""
    from irrun.opkit import f16c

    monkeypatch.setattr(f16c, "_built", [])
    monkeypatch.setattr(f16c, "_rent_paid", 0.0)
    monkeypatch.setattr(f16c, "PRICE_SECONDS", 1e9)     # never bought unless the test says
    return f16c


def _every_half():
    return np.arange(1 << 16, dtype=np.uint16).view(np.float16)   # NaNs, infs, subnormals


def _same_f32(got: np.ndarray, want: np.ndarray) -> bool:
    """Bit for bit, except that a NaN need only be a NaN of the same sign (F16C quiets a
    signalling NaN; NumPy keeps its payload)."""
    nan = np.isnan(want)
    return (got.dtype == np.float32 and got.shape == want.shape
            and np.array_equal(np.isnan(got), nan)
            and np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
            and np.array_equal(np.signbit(got[nan]), np.signbit(want[nan])))


def test_a_large_float_cast_on_threads_is_the_same_cast(monkeypatch, f16c_state):
    from irrun.opkit import convert_array
    from irrun.opkit.numeric import PARALLEL_CAST_ELEMENTS

    monkeypatch.setenv("IRRUN_THREADS", "2")
    every_half = _every_half()
    x = np.tile(every_half, 2 * PARALLEL_CAST_ELEMENTS // every_half.size + 1)
    got = convert_array(x, "f32")
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.array_equal(got.view(np.uint32), x.astype(np.float32).view(np.uint32))
    shaped = x[:3 * PARALLEL_CAST_ELEMENTS // 2 * 2].reshape(2, -1)
    assert np.array_equal(convert_array(shaped, "f64"), shaped.astype(np.float64), equal_nan=True)


def _f16c_loop(f16c):
    loop = f16c.load()
    if loop is None:
        import llvmlite.binding as llvm

        assert not llvm.get_host_cpu_features().get("f16c", False), \
            "this CPU has F16C, yet the compiled f16 -> f32 loop was not built"
        pytest.skip("this CPU has no F16C: irrun keeps NumPy's cast (tested above)")
    return loop


def test_the_compiled_f16_cast_is_numpys_cast_for_every_half(f16c_state):
    loop = _f16c_loop(f16c_state)
    halves = _every_half()
    # Every length of tail (the loop converts 16 at a time) and starts off any 16-element
    # boundary: NumPy's buffers are aligned to their element only.
    for start in (0, 1, 7):
        for n in (*range(0, 40), 65536 - start):
            src = halves[start:start + n]
            dst = np.full(n + 1, 7.0, np.float32)
            loop.convert(src, dst[:n])
            assert _same_f32(dst[:n], src.astype(np.float32)), (start, n)
            assert dst[n] == 7.0, "wrote past the end"
    # Several arrays in one call: each converted, nothing between or after them written.
    parts = [halves[3:3 + n] for n in (0, 1, 17, 40000)]
    dsts = [np.full(p.size + 1, 7.0, np.float32) for p in parts]
    loop.convert_many([(p, d[:p.size]) for p, d in zip(parts, dsts)])
    for p, d in zip(parts, dsts):
        assert _same_f32(d[:p.size], p.astype(np.float32)) and d[p.size] == 7.0
    loop.convert_many([])


def test_large_f16_casts_take_numpy_until_it_has_cost_the_loops_price(monkeypatch, f16c_state):
    from irrun.opkit import convert_array
    from irrun.opkit.numeric import COMPILED_CAST_ELEMENTS

    _f16c_loop(f16c_state)
    f16c_state._built.clear()          # as in a fresh process: not built yet
    calls = []
    convert = f16c_state.Loops.convert
    monkeypatch.setattr(f16c_state.Loops, "convert",
                        lambda *a: calls.append(1) or convert(*a))
    x = np.tile(_every_half(), 4)
    assert x.size >= COMPILED_CAST_ELEMENTS
    monkeypatch.setattr(f16c_state, "PRICE_SECONDS", 3600.0)
    for threads in ("1", "2"):
        monkeypatch.setenv("IRRUN_THREADS", threads)
        assert np.array_equal(convert_array(x, "f32").view(np.uint32),
                              x.astype(np.float32).view(np.uint32))   # NumPy's, bit for bit
    assert not calls and not f16c_state._built and f16c_state._rent_paid > 0
    # A small cast neither uses the loop nor counts towards it.
    paid = f16c_state._rent_paid
    convert_array(x[:COMPILED_CAST_ELEMENTS - 1], "f32")
    assert f16c_state._rent_paid == paid
    monkeypatch.setattr(f16c_state, "PRICE_SECONDS", paid)   # NumPy has now cost the price
    for threads in ("1", "2"):
        monkeypatch.setenv("IRRUN_THREADS", threads)
        calls.clear()
        assert _same_f32(convert_array(x, "f32"), x.astype(np.float32))
        assert calls, "the compiled loop was not used"
        shaped = x.reshape(4, 2, -1)[:, 1]          # not contiguous: NumPy's cast
        calls.clear()
        got = convert_array(shaped, "f32")
        assert not calls and np.array_equal(got.view(np.uint32),
                                            shaped.astype(np.float32).view(np.uint32))
    assert f16c_state._rent_paid == paid, "the loop's casts were counted as NumPy's"


def test_without_llvmlite_f16_casts_stay_numpys(monkeypatch, f16c_state, without_llvmlite):
    from irrun.opkit import convert_array

    monkeypatch.setattr(f16c_state, "PRICE_SECONDS", 0.0)
    assert f16c_state.load() is None and f16c_state.loop() is None
    x = np.tile(_every_half(), 2)
    assert np.array_equal(convert_array(x, "f32").view(np.uint32),
                          x.astype(np.float32).view(np.uint32))


@given(st.lists(st.integers(0, 5), max_size=30), st.integers(1, 9))
def test_balanced_ranges_cut_at_the_item_holding_each_aim(sizes, parts):
    """balanced_ranges (NumPy, one searchsorted) against its rule written out one aim at a
    time: even shares of the total work, each cut at the start of the item holding the
    share's first unit, repeated and empty ranges dropped, all items covered."""
    from irrun.opkit import balanced_ranges, even_ranges

    bounds = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    items = len(sizes)
    cuts = [0]
    for lo, _ in even_ranges(int(bounds[-1]), parts)[1:]:
        cut = int(np.searchsorted(bounds, lo, side="right")) - 1
        if cut > cuts[-1]:
            cuts.append(cut)
    want = [(a, b) for a, b in zip(cuts, cuts[1:] + [items]) if b > a] or [(0, items)]
    assert balanced_ranges(bounds, parts) == want


def test_compile_ir_refuses_a_signature_of_the_wrong_arity():
    """A ctypes signature with more or fewer arguments than the IR function would put the
    arguments in the wrong registers: compile_ir says so (an irrun bug), never returns it."""
    import ctypes

    from irrun.opkit.llvm import compile_ir

    pytest.importorskip("llvmlite.binding")
    ir = "define i64 @first(i64 %a, i64 %b) {\nentry:\n  ret i64 %a\n}\n"
    i64 = ctypes.c_int64
    with pytest.raises(TypeError, match="@first takes 2 arguments, its signature 1"):
        compile_ir(ir, {"first": (i64, i64)})
    assert compile_ir(ir, {"first": (i64, i64, i64)})["first"](5, 6) == 5


def test_erf_constants_are_erfs_own():
    # ERF_CONSTANTS holds the coefficients erf evaluates: the first range's rational
    # function from them gives erf's values there.
    import numpy as np

    from irrun.opkit import ERF_CONSTANTS, erf

    x = np.linspace(-0.84, 0.84, 101)
    z = x * x
    horner = lambda c, z: np.polyval(c[::-1], z)  # noqa: E731
    first = x + x * (horner(ERF_CONSTANTS["pp"], z) / horner(ERF_CONSTANTS["qq"], z))
    np.testing.assert_allclose(erf(x), first, rtol=1e-15, atol=1e-17)
    assert set(ERF_CONSTANTS) == {"pp", "qq", "pa", "qa", "ra", "sa", "rb", "sb", "erx"}


def test_add_elements_sums_the_bounds_of_shape_arithmetic():
    """x.shape[2] + 1 of a dynamic dim: at least 1, so a Concat of it keeps the static dims
    around it (OpenVINO's value bounds); an unknown element or a negative bound gives
    nothing."""
    from irrun.ir.etypes import element_type
    from irrun.ir.shapes import Dim, TensorSpec
    from irrun.opkit import add_elements

    i64 = element_type("i64")
    k = TensorSpec(i64, (Dim(1, 1),), dims=(Dim(0, None),))
    one = TensorSpec(i64, (Dim(1, 1),), np.array([1], np.int64))
    out = add_elements(k, one, TensorSpec(i64, (Dim(1, 1),)))
    assert out.dims == (Dim(1, None),) and out.value is None
    pair = TensorSpec(i64, (Dim(2, 2),), dims=(Dim(2, 5), Dim(3, 3)))
    out = add_elements(pair, one, TensorSpec(i64, (Dim(2, 2),)))
    assert out.dims == (Dim(3, 6), Dim(4, 4))
    both = add_elements(TensorSpec(i64, (Dim(1, 1),), np.array([3], np.int64)), one,
                        TensorSpec(i64, (Dim(1, 1),)))
    assert both.value.tolist() == [4]
    assert add_elements(TensorSpec(i64, (Dim(1, 1),)), one, TensorSpec(i64, (Dim(1, 1),))).dims is None
    minus = TensorSpec(i64, (Dim(1, 1),), np.array([-2], np.int64))
    assert add_elements(k, minus, TensorSpec(i64, (Dim(1, 1),))).dims is None
    f32 = TensorSpec(element_type("f32"), (Dim(1, 1),))
    assert add_elements(k, one, f32) is f32
