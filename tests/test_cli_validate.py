"""`irrun validate FILE...` and running an invalid model, through click's CliRunner:
compiler-style lines, summary, exit codes 0/1/2, --strict, --format json, no tracebacks."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

import irrun
from irrun.ui.cli import cli

ov = pytest.importorskip("openvino")
from test_validate import base_model, corrupt, edge_into, in_layer  # noqa: E402

LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<sev>error|warning): "
                  r"layer '(?P<layer>[^']*)' \((?P<op>[^)]*)\): (?P<msg>.+)$")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("base")
    ov.save_model(base_model(), str(d / "model.xml"), compress_to_fp16=False)
    return d / "model.xml"


@pytest.fixture
def broken(base, tmp_path):
    """Two errors (a bad attribute, a Const size too small) and one warning (declared dims)."""
    (tmp_path / "broken").mkdir()
    return corrupt(base, tmp_path / "broken",
                   in_layer("to_i32", 'destination_type="i32"', 'destination_type="f33"'),
                   in_layer("weights", 'size="12"', 'size="8"'),
                   in_layer("x", "<dim>3</dim>", "<dim>4</dim>"))


@pytest.fixture
def warned(base, tmp_path):
    """Only a warning: an unknown attribute."""
    (tmp_path / "warned").mkdir()
    return corrupt(base, tmp_path / "warned", in_layer("to_i32", 'destination_type="i32"',
                                            'destination_type="i32" flavour="mild"'))


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    # Never a Python traceback: the only exception allowed is click's exit.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result


def test_clean_model_exit_0(base):
    r = run("validate", base)
    assert r.exit_code == 0
    assert r.output == "1 file: 0 errors, 0 warnings\n"


def test_errors_are_compiler_lines_with_a_summary(broken):
    r = run("validate", broken.path)
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[-1] == "1 file: 2 errors, 1 warning"
    parsed = [LINE.match(t) for t in lines[:-1]]
    assert all(parsed), lines
    got = {(m["line"], m["sev"], m["layer"], m["op"]) for m in parsed}
    assert got == {
        (str(broken.line("f33")), "error", "to_i32", "Convert-opset1"),
        (str(broken.line('size="8"')), "error", "weights", "Const-opset1"),
        (str(broken.line("<port id=", "x")), "warning", "x", "Parameter-opset1"),
    }
    assert all(m["file"] == broken.path for m in parsed)
    # The same diagnostics as the Python API, in the same order.
    assert lines[:-1] == [str(d) for d in irrun.validate(broken.path)]


def test_warnings_alone_exit_0_and_strict_makes_them_errors(warned):
    r = run("validate", warned.path)
    assert r.exit_code == 0
    assert ": warning: layer 'to_i32' (Convert-opset1): unknown attribute 'flavour'" in r.output
    assert r.output.endswith("1 file: 0 errors, 1 warning\n")
    r = run("validate", "--strict", warned.path)
    assert r.exit_code == 1
    assert ": error: layer 'to_i32' (Convert-opset1): unknown attribute 'flavour'" in r.output
    assert r.output.endswith("1 file: 1 error, 0 warnings\n")


def test_json_format(broken):
    r = run("validate", "--format", "json", broken.path)
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert doc["errors"] == 2 and doc["warnings"] == 1 and doc["files"] == [broken.path]
    by_code = {d["code"]: d for d in doc["diagnostics"]}
    d = by_code["const-size"]
    assert d["file"] == broken.path and d["line"] == broken.line('size="8"')
    assert d["severity"] == "error" and d["layer_name"] == "weights" and d["op"] == "Const-opset1"
    assert d["layer_id"] == re.search(r'<layer id="(\d+)" name="weights"', broken.text).group(1)
    assert "size=8" in d["message"]
    assert by_code["declared-mismatch"]["severity"] == "warning"


def test_json_strict(warned):
    r = run("validate", "--format", "json", "--strict", warned.path)
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert doc["errors"] == 1 and doc["warnings"] == 0
    assert [d["severity"] for d in doc["diagnostics"]] == ["error"]


def test_many_files_at_once(base, broken, warned, tmp_path):
    missing = tmp_path / "missing.xml"
    r = run("validate", base, broken.path, warned.path, missing)
    assert r.exit_code == 1
    assert r.output.splitlines()[-1] == "4 files: 3 errors, 2 warnings"
    assert f"{missing}: error: no such model file" in r.output
    files = {line.split(":")[0] for line in r.output.splitlines()[:-1]}
    assert files == {broken.path, warned.path, str(missing)}


@pytest.mark.parametrize("args", [["validate"], ["validate", "--format", "xml", "m.xml"],
                                  ["validate", "--bogus", "m.xml"],
                                  ["validate", "-w", "x.bin", "a.xml", "b.xml"]])
def test_usage_errors_exit_2(args):
    r = run(*args)
    assert r.exit_code == 2


@pytest.mark.parametrize("content", [b"", b"\x00\xff\xfe garbage", b"<net version='11'>",
                                     b"<?xml version='1.0'?><a/>"])
def test_garbage_never_gives_a_traceback(tmp_path, content):
    p = tmp_path / "g.xml"
    p.write_bytes(content)
    r = run("validate", p)
    assert r.exit_code == 1
    assert r.output.startswith(f"{p}:")


def test_an_irrun_bug_is_reported_not_raised(base, monkeypatch):
    import irrun.run.model

    def boom(*a, **k):
        raise KeyError("oops")
    monkeypatch.setattr(irrun.run.model, "validate", boom)
    r = run("validate", base, base)
    assert r.exit_code == 1
    assert r.output.count("error: internal error while validating: KeyError") == 2
    assert r.output.endswith("2 files: 2 errors, 0 warnings\n")


@pytest.mark.parametrize("prefix", [[], ["run"]])
def test_running_an_invalid_model_prints_the_same_diagnostics(broken, prefix):
    r = run(*prefix, broken.path)
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [str(d) for d in irrun.validate(broken.path)]
    assert r.stdout == ""


def test_running_a_model_with_an_unconnected_input(base, tmp_path):
    ir = corrupt(base, tmp_path, (edge_into(open(base).read(), "out_i32"), ""))
    r = run(ir.path, "--inputs", tmp_path / "nothing.npz")
    assert r.exit_code == 1
    line = ir.line('<port id="0"', "out_i32")
    assert f"{ir.path}:{line}: error: layer 'out_i32' (Result-opset1): input port 0 has no edge" \
        in r.stderr
