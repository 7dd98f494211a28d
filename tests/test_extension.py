"""Custom ops: @irrun.register(..., version="extension") from user code, and `--extension FILE`
on the command line, with an IR file holding a version="extension" layer."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
from irrun.ir import registry
from irrun.ui.cli import cli

# docs/ops.md's example, verbatim (test_the_ops_page_shows_this_example keeps the two in step).
MY_OPS = '''\
"""my_ops.py: a kernel for the custom layer type ScaledTanh (version="extension")."""
from dataclasses import dataclass

import numpy as np

from irrun.opkit import TensorSpec, fail, register


@dataclass(frozen=True)
class ScaledTanhAttrs:           # the layer's <data> attributes; defaults make them optional
    alpha: float = 1.0
    beta: float = 1.0


@register("ScaledTanh", version="extension", attrs=ScaledTanhAttrs, category="activation")
class ScaledTanh:
    @staticmethod
    def infer(attrs, x: TensorSpec) -> list[TensorSpec]:                # the shape rule
        if x.etype.kind != "float":
            fail(f"ScaledTanh takes a floating-point tensor, got {x.etype.name}")
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x: np.ndarray) -> tuple[np.ndarray]:                   # the kernel
        return ((attrs.alpha * np.tanh(attrs.beta * x)).astype(x.dtype),)
'''


def model_xml(data='alpha="2.0" beta="0.5"', etype="f32", version="extension"):
    prec = {"f32": "FP32", "i32": "I32"}[etype]
    return textwrap.dedent(f"""\
        <?xml version="1.0"?>
        <net name="custom" version="11">
          <layers>
            <layer id="0" name="x" type="Parameter" version="opset1">
              <data shape="2,3" element_type="{etype}"/>
              <output><port id="0" precision="{prec}" names="x"><dim>2</dim><dim>3</dim></port></output>
            </layer>
            <layer id="1" name="act" type="ScaledTanh" version="{version}">
              <data {data}/>
              <input><port id="0" precision="{prec}"><dim>2</dim><dim>3</dim></port></input>
              <output><port id="1" precision="{prec}" names="y"><dim>2</dim><dim>3</dim></port></output>
            </layer>
            <layer id="2" name="y" type="Result" version="opset1">
              <input><port id="0" precision="{prec}"><dim>2</dim><dim>3</dim></port></input>
            </layer>
          </layers>
          <edges>
            <edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
            <edge from-layer="1" from-port="1" to-layer="2" to-port="0"/>
          </edges>
        </net>
        """)


X = np.array([[0, 1, -2], [3, -0.5, 0.25]], np.float32)


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch):
    """Each test registers ScaledTanh afresh; nothing leaks into other test files."""
    monkeypatch.setattr(registry, "_EXTENSIONS", {})
    registry.unregister("ScaledTanh", version="extension")
    yield
    registry.unregister("ScaledTanh", version="extension")


@pytest.fixture
def files(tmp_path):
    xml = tmp_path / "model.xml"
    xml.write_text(model_xml())
    np.savez(tmp_path / "inputs.npz", x=X)
    ext = tmp_path / "my_ops.py"
    ext.write_text(MY_OPS)
    return str(xml), str(tmp_path / "inputs.npz"), str(ext)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def expected():
    return (2.0 * np.tanh(0.5 * X)).astype(np.float32)


# ---------------------------------------------------------------- Python API

def test_the_ops_page_shows_this_example():
    page = (Path(__file__).resolve().parent.parent / "docs" / "ops.md").read_text()
    assert f"```python\n{MY_OPS}```" in page, "docs/ops.md's my_ops.py differs from MY_OPS"


def test_decorator_registers_a_custom_op(files):
    from dataclasses import dataclass

    xml, _, _ = files

    @dataclass(frozen=True)
    class Attrs:
        alpha: float = 1.0
        beta: float = 1.0

    @irrun.register("ScaledTanh", version="extension", attrs=Attrs, category="activation")
    class ScaledTanh:
        @staticmethod
        def infer(attrs, x):
            return [irrun.TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            return ((attrs.alpha * np.tanh(attrs.beta * x)).astype(x.dtype),)

    op = registry.lookup("ScaledTanh", "extension")
    assert ScaledTanh.opdef is op
    assert op.label == "ScaledTanh-extension" and op.category == "activation"
    assert (op.min_inputs, op.max_inputs) == (1, 1)
    m = irrun.read_model(xml)
    out = m.infer({"x": X})
    np.testing.assert_array_equal(out["y"], expected())
    assert out["y"].dtype == np.float32
    assert [d for d in irrun.validate(xml) if d.severity == "error"] == []


def test_attribute_schema_checks_the_layer(files, tmp_path):
    _, _, ext = files
    registry.load_extension(ext)
    bad = tmp_path / "bad.xml"
    bad.write_text(model_xml(data='alpha="lots"'))
    errors = [str(d) for d in irrun.validate(bad) if d.severity == "error"]
    assert errors == [f"{bad}:9: error: layer 'act' (ScaledTanh-extension): attribute "
                      "alpha='lots' is not a number"]
    defaults = tmp_path / "defaults.xml"
    defaults.write_text(model_xml(data=""))
    np.testing.assert_array_equal(irrun.read_model(defaults).infer({"x": X})["y"],
                                  np.tanh(X).astype(np.float32))


def test_shape_rule_errors_are_located(files, tmp_path):
    _, _, ext = files
    registry.load_extension(ext)
    ints = tmp_path / "ints.xml"
    ints.write_text(model_xml(etype="i32"))
    errors = [str(d) for d in irrun.validate(ints) if d.severity == "error"]
    assert errors == [f"{ints}:8: error: layer 'act' (ScaledTanh-extension): ScaledTanh takes a "
                      "floating-point tensor, got i32"]


def test_unregistered_custom_op_says_how_to_add_it(files):
    xml, _, _ = files
    errors = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert len(errors) == 1 and errors[0].line == 8
    assert "unknown op type 'ScaledTanh'" in errors[0].message
    assert "@irrun.register" in errors[0].message and "--extension" in errors[0].message


def test_registering_twice_is_refused(files):
    _, _, ext = files
    registry.load_extension(ext)
    copy = os.path.join(os.path.dirname(ext), "copy_of_my_ops.py")
    with open(copy, "w") as f:
        f.write(MY_OPS)
    with pytest.raises(irrun.ReadError, match="ScaledTanh-extension is registered twice"):
        registry.load_extension(copy)


# ---------------------------------------------------------------- --extension on the CLI

@pytest.mark.parametrize("where", ["before", "after"])
def test_cli_extension_runs_the_model(files, tmp_path, where):
    xml, inputs, ext = files
    out = tmp_path / "out.npz"
    args = (["--extension", ext, xml, "-i", inputs, "-o", out] if where == "before"
            else [xml, "-i", inputs, "-o", out, "--extension", ext])
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    with np.load(out) as z:
        np.testing.assert_array_equal(z["y"], expected())


def test_cli_without_extension_fails_with_a_hint(files):
    xml, inputs, _ = files
    r = invoke(xml, "-i", inputs)
    assert r.exit_code == 1
    assert f"{xml}:8: error: layer 'act' (ScaledTanh-extension): unknown op type 'ScaledTanh'" in r.stderr
    assert "--extension" in r.stderr


def test_cli_extension_with_other_commands(files, tmp_path):
    xml, inputs, ext = files
    r = invoke("--extension", ext, "validate", xml)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip().endswith("1 file: 0 errors, 0 warnings")
    r = invoke("--extension", ext, "ops")
    assert "ScaledTanh" in r.stdout and "ScaledTanh-extension" in r.stdout
    r = invoke("--extension", ext, "graph", xml)
    assert r.exit_code == 0 and "ScaledTanh-extension" in r.stdout
    r = invoke("--extension", ext, xml, "-i", inputs, "-v")
    assert "ScaledTanh-extension 'act' (line 8): f32[2,3] in [" in r.stderr


def test_cli_extension_is_repeatable_and_loaded_once(files, tmp_path):
    xml, inputs, ext = files
    other = tmp_path / "other_ops.py"
    other.write_text("import irrun\nLOADED = True\n")
    r = invoke("--extension", ext, "--extension", other, "--extension", ext, xml, "-i", inputs)
    assert r.exit_code == 0, r.output
    assert len(registry._EXTENSIONS) == 2


def test_cli_extension_file_errors(tmp_path, files):
    xml, inputs, _ = files
    broken = tmp_path / "broken_ops.py"
    broken.write_text("import irrun\n\nraise RuntimeError('no GPU here')\n")
    r = invoke("--extension", broken, xml, "-i", inputs)
    assert r.exit_code == 1
    assert r.stderr.strip() == (f"{broken}:3: error: the extension failed to import: "
                                "RuntimeError: no GPU here")
    syntax = tmp_path / "syntax_ops.py"
    syntax.write_text("def f(:\n")
    r = invoke(xml, "-i", inputs, "--extension", syntax)
    assert r.exit_code == 1 and r.stderr.startswith(f"{syntax}:1: error: the extension failed to "
                                                    "import: SyntaxError")
    r = invoke("--extension", tmp_path / "missing.py", xml)
    assert r.exit_code == 1 and "no such extension file" in r.stderr


# ---------------------------------------------------------------- replacing a built-in kernel

# An extension that replaces the built-in ReLU-1 with a "leaky" one, so the test can tell which
# kernel ran.
LEAKY_RELU = '''\
import numpy as np

from irrun.opkit import TensorSpec, register


@register("ReLU", since=1, category="activation", replace=True)
class LeakyReLU:
    @staticmethod
    def infer(attrs, x: TensorSpec) -> list[TensorSpec]:
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x: np.ndarray) -> tuple[np.ndarray]:
        return (np.where(x > 0, x, x * 0.5).astype(x.dtype),)
'''


def relu_files(tmp_path):
    xml = tmp_path / "relu.xml"
    xml.write_text(model_xml(data="", version="opset1").replace('type="ScaledTanh"', 'type="ReLU"'))
    ext = tmp_path / "leaky.py"
    ext.write_text(LEAKY_RELU)
    np.savez(tmp_path / "in.npz", x=X)
    return xml, ext


def test_replace_overrides_a_builtin_kernel_from_python(tmp_path):
    xml, ext = relu_files(tmp_path)
    builtin = irrun.read_model(xml).infer({"x": X})["y"]
    np.testing.assert_array_equal(builtin, np.maximum(X, 0))
    try:
        registry.load_extension(ext)
        np.testing.assert_array_equal(irrun.read_model(xml).infer({"x": X})["y"],
                                      np.where(X > 0, X, X * 0.5))
        assert registry.lookup("ReLU", "opset1").impl.__name__ == "LeakyReLU"
    finally:
        registry.unregister("ReLU", since=1)
    # Unregistering the overlay brings the built-in back.
    assert registry.lookup("ReLU", "opset1").impl.__module__ == "irrun.ops.activation"
    np.testing.assert_array_equal(irrun.read_model(xml).infer({"x": X})["y"], np.maximum(X, 0))


def test_replace_overrides_a_builtin_kernel_from_the_cli(tmp_path):
    # A fresh process: there --extension is imported before any built-in kernel is, which is
    # where an import-order registry used to fail ("ReLU-1 is registered twice").
    import subprocess
    import sys

    xml, ext = relu_files(tmp_path)
    out = tmp_path / "out.npz"
    done = subprocess.run([sys.executable, "-m", "irrun", "--extension", str(ext), str(xml),
                           "--inputs", str(tmp_path / "in.npz"), "--output", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(out)["y"], np.where(X > 0, X, X * 0.5))


def test_registering_a_builtin_version_without_replace_names_both_places(tmp_path):
    ext = tmp_path / "clash.py"
    ext.write_text(LEAKY_RELU.replace(", replace=True", ""))
    with pytest.raises(irrun.IrrunError, match=r"ReLU-1 is registered twice: here and at "
                       r".*activation\.py(:\d+)? \(pass replace=True") as info:
        registry.load_extension(ext)
    assert str(ext) in str(info.value)
    assert registry.lookup("ReLU", "opset1").impl.__module__ == "irrun.ops.activation"


def test_one_class_can_serve_several_versions():
    from dataclasses import dataclass
    from typing import ClassVar

    from irrun.opkit import NoAttrs, TensorSpec, register

    @dataclass(frozen=True)
    class NewAttrs:
        k: int = 2
        doubled: ClassVar[bool] = True

    @register("ZzMulti", since=(2, 9), attrs=(NoAttrs, NewAttrs), version=None)
    class ZzMulti:
        @staticmethod
        def infer(attrs, x):
            return [TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            return (x * (attrs.k if getattr(attrs, "doubled", False) else 1),)

    try:
        assert [o.label for o in registry.registered_versions("ZzMulti")] == ["ZzMulti-2",
                                                                              "ZzMulti-9"]
        assert registry.lookup("ZzMulti", "opset5").attrs is NoAttrs
        assert registry.lookup("ZzMulti", "opset12").attrs is NewAttrs
        assert registry.lookup("ZzMulti", "opset12").impl is ZzMulti
    finally:
        registry.unregister("ZzMulti", since=2)
        registry.unregister("ZzMulti", since=9)

