"""Looking inside a run: trace (-v/-vv, golden text), --profile, --dump, --check-nan, --until,
the progress bar, and the Python API (Model.infer(intermediate=True), Model.profile)."""
from __future__ import annotations

import glob
import io
import json
import os
import re

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
from irrun.run import inspect
from irrun.run.feed import sample_inputs_for
from irrun.ui.cli import cli
from irrun.ir.registry import registered_versions

oracle = pytest.importorskip("oracle")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def needs_ops(*types):
    import irrun.ops  # noqa: F401
    missing = [t for t in types if not registered_versions(t)]
    if missing:
        pytest.skip(f"ops not registered yet: {', '.join(missing)}")


def line_of(xml: str, name: str) -> int:
    """The line of `<layer ... name="NAME"` found by a plain text scan (not irrun's reader)."""
    with open(xml, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if "<layer " in text and f'name="{name}"' in text:
                return number
    raise AssertionError(f"no layer {name} in {xml}")


X = np.array([[1, 2, 3], [-4, 5, -6]], np.float32)
Y = np.array([[1, 2, 4], [1, 0, 0]], np.float32)     # 3/0 = inf, 0/0 = NaN in 'div'
W = np.array([1, -2, 0.5], np.float32)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """x, y -> add(x, w) -> relu -> div(relu, y) -> to_int; outputs 'out' (div), 'out_int'."""
    needs_ops("Add", "ReLU", "Divide", "Convert")
    ov = oracle.ov
    import openvino.opset8 as o

    def named(node, name):
        node.set_friendly_name(name)
        return node

    x = o.parameter([2, 3], ov.Type.f32, name="x")
    y = o.parameter([2, 3], ov.Type.f32, name="y")
    w = named(o.constant(W), "w")
    add = named(o.add(x, w), "add")
    relu = named(o.relu(add), "relu")
    div = named(o.divide(relu, y), "div")
    to_int = named(o.convert(div, "i32"), "to_int")
    model = ov.Model([named(o.result(div), "out"), named(o.result(to_int), "out_int")], [x, y], "tiny")
    d = tmp_path_factory.mktemp("tiny")
    xml = oracle.save(model, d)
    inputs = str(d / "inputs.npz")
    np.savez(inputs, x=X, y=Y)
    return xml, inputs


def invoke(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result


# ---------------------------------------------------------------- trace

def test_trace_golden_v(tiny):
    xml, inputs = tiny
    r = invoke(xml, "-i", inputs, "-v")
    assert r.exit_code == 0, r.output
    L = {n: line_of(xml, n) for n in ("x", "y", "add", "relu", "div", "to_int")}
    expected = f"""\
Parameter-opset1 'x' (line {L['x']}): f32[2,3] in [-6, 5]
Parameter-opset1 'y' (line {L['y']}): f32[2,3] in [0, 4]
Add-opset1 'add' (line {L['add']}): f32[2,3] in [-5.5, 3.5]
ReLU-opset1 'relu' (line {L['relu']}): f32[2,3] in [0, 3.5]
Divide-opset1 'div' (line {L['div']}): f32[2,3] in [0, 2]  !! 1 NaN, 1 Inf
Convert-opset1 'to_int' (line {L['to_int']}): i32[2,3] in [-2147483648, 2]
"""
    assert r.stderr == expected
    assert "out: float32[2, 3]" in r.stdout      # the outputs still go to stdout


def test_trace_golden_vv(tiny):
    xml, inputs = tiny
    r = invoke(xml, "-i", inputs, "-vv")
    assert r.exit_code == 0, r.output
    L = {n: line_of(xml, n) for n in ("x", "y", "w", "add", "relu", "div", "to_int")}
    expected = f"""\
Parameter-opset1 'x' (line {L['x']}): f32[2,3] in [-6, 5]
    values: [[1, 2, 3], [-4, 5, -6]]
Parameter-opset1 'y' (line {L['y']}): f32[2,3] in [0, 4]
    values: [[1, 2, 4], [1, 0, 0]]
Const-opset1 'w' (line {L['w']}): f32[3] in [-2, 1]
    values: [1, -2, 0.5]
Add-opset1 'add' (line {L['add']}): f32[2,3] in [-5.5, 3.5]
    inputs: 'x':0, 'w':0
    values: [[2, 0, 3.5], [-3, 3, -5.5]]
ReLU-opset1 'relu' (line {L['relu']}): f32[2,3] in [0, 3.5]
    inputs: 'add':0
    values: [[2, 0, 3.5], [0, 3, 0]]
Divide-opset1 'div' (line {L['div']}): f32[2,3] in [0, 2]  !! 1 NaN, 1 Inf
    inputs: 'relu':0, 'y':0
    values: [[2, 0, 0.875], [0, inf, nan]]
Convert-opset1 'to_int' (line {L['to_int']}): i32[2,3] in [-2147483648, 2]
    inputs: 'div':0
    values: [[2, 0, 0], [0, -2147483648, -2147483648]]
"""
    assert r.stderr == expected


@pytest.mark.parametrize("etype, value, text", [
    ("f32", np.zeros((0, 3), np.float32), "f32[0,3] (empty)"),
    ("f32", np.array([np.nan, np.inf], np.float32), "f32[2] (no finite values)  !! 1 NaN, 1 Inf"),
    ("f32", np.array([-np.inf, 2.5, 7], np.float32), "f32[3] in [2.5, 7]  !! 1 Inf"),
    ("boolean", np.array([[True], [False]]), "boolean[2,1] in [false, true]"),
    ("i64", np.array(-3, np.int64), "i64[] in [-3, -3]"),
    ("u4", np.array([15, 0], np.uint8), "u4[2] in [0, 15]"),
    ("f16", np.array([0.1, 65504], np.float16), "f16[2] in [0.0999756, 65504]"),
])
def test_describe(etype, value, text):
    assert inspect.describe(etype, value) == text


def test_describe_bf16_counts_nan():
    import ml_dtypes
    a = np.array([1.5, np.nan, -2], dtype=ml_dtypes.bfloat16)
    assert inspect.describe("bf16", a) == "bf16[3] in [-2, 1.5]  !! 1 NaN"


# ---------------------------------------------------------------- profile

def test_profile_api(tiny):
    xml, _ = tiny
    m = irrun.read_model(xml)
    rows = m.profile({"x": X, "y": Y}, repeat=2)
    assert [r["name"] for r in sorted(rows, key=lambda r: r["line"])] == ["add", "relu", "div", "to_int"]
    seconds = [r["seconds"] for r in rows]
    assert seconds == sorted(seconds, reverse=True)
    assert all(s >= 0 for s in seconds)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    by_name = {r["name"]: r for r in rows}
    assert by_name["to_int"]["op"] == "Convert-opset1"
    assert by_name["to_int"]["type"] == "Convert" and by_name["to_int"]["version"] == "opset1"
    assert by_name["to_int"]["dtype"] == "i32" and by_name["to_int"]["shape"] == [2, 3]
    assert by_name["div"]["line"] == line_of(xml, "div")
    totals = inspect.totals_by_type(rows)
    assert {t["type"]: t["layers"] for t in totals} == {"Add": 1, "ReLU": 1, "Divide": 1, "Convert": 1}


def test_profile_table_layout():
    rows = [dict(name="conv", type="Convolution", op="Convolution-opset1", seconds=0.003,
                 outputs=[{"dtype": "f32", "shape": [1, 8, 4, 4]}]),
            dict(name="relu", type="ReLU", op="ReLU-opset1", seconds=0.001,
                 outputs=[{"dtype": "f32", "shape": [1, 8, 4, 4]}]),
            dict(name="relu2", type="ReLU", op="ReLU-opset1", seconds=0.0,
                 outputs=[{"dtype": "f32", "shape": [1, 8, 4, 4]}])]
    for r in rows:
        r["share"] = r["seconds"] / 0.004
    text = inspect.profile_table(rows)
    assert text == """\
layer  type-version        output        time ms   share
conv   Convolution-opset1  f32[1,8,4,4]    3.000   75.0%
relu   ReLU-opset1         f32[1,8,4,4]    1.000   25.0%
relu2  ReLU-opset1         f32[1,8,4,4]    0.000    0.0%

total  3 layers                            4.000  100.0%

op type      layers  time ms  share
Convolution       1    3.000  75.0%
ReLU              2    1.000  25.0%"""


def test_profile_cli(tiny):
    xml, inputs = tiny
    r = invoke(xml, "-i", inputs, "--profile")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert re.search(r"^layer\s+type-version\s+output\s+time ms\s+share$", out, re.M)
    rows = re.findall(r"^(\w+)\s+(\S+-opset1)\s+(\S+)\s+([\d.]+)\s+([\d.]+)%$", out, re.M)
    assert sorted(r[0] for r in rows) == ["add", "div", "relu", "to_int"]
    times = [float(r[3]) for r in rows]
    assert times == sorted(times, reverse=True)
    assert sum(float(r[4]) for r in rows) == pytest.approx(100, abs=0.3)
    assert ("to_int", "Convert-opset1", "i32[2,3]") == next(r[:3] for r in rows if r[0] == "to_int")
    types = re.findall(r"^(Add|ReLU|Divide|Convert)\s+1\s+[\d.]+\s+[\d.]+%$", out, re.M)
    assert sorted(types) == ["Add", "Convert", "Divide", "ReLU"]
    assert re.search(r"^total\s+4 layers\s+[\d.]+\s+100\.0%$", out, re.M)


def test_repeat_cli_times_later_runs_and_keeps_each_layers_best(tiny, tmp_path):
    xml, inputs = tiny
    r = invoke(xml, "-i", inputs, "--profile", "--repeat", "3", "--dump", tmp_path / "d")
    assert r.exit_code == 0, r.output
    assert r.stdout.count("out_int: int32[2, 3]") == 1                # the outputs, once
    assert re.search(r"^best wall time of 3 runs: [\d.]+ ms \(layer times: the best of each\)$",
                     r.stdout, re.M)
    best, median, first = map(float, re.search(
        r"^3 runs: best ([\d.]+) ms, median ([\d.]+) ms, first ([\d.]+) ms$",
        r.stderr, re.M).groups())
    assert best <= median and best <= first
    # Tracing, dumping and the NaN check belong to the first run only.
    assert len(json.loads((tmp_path / "d" / "index.json").read_text())) == 6
    assert r.stderr.count("dumped 6 tensors") == 1

    r = invoke(xml, "-i", inputs, "-n", "2")
    assert r.exit_code == 0 and "out_int: int32[2, 3]" in r.stdout
    assert re.search(r"^2 runs: best ", r.stderr, re.M) and "wall time" not in r.stdout
    r = invoke(xml, "-i", inputs, "--repeat", "0")
    assert r.exit_code == 2 and "0 is not in the range x>=1" in r.stderr


# ---------------------------------------------------------------- dump

def test_dump_cli_writes_every_intermediate(tiny, tmp_path):
    xml, inputs = tiny
    d = tmp_path / "dump"
    r = invoke(xml, "-i", inputs, "--dump", d)
    assert r.exit_code == 0, r.output
    index = json.loads((d / "index.json").read_text())
    assert [e["layer"] for e in index] == ["x", "y", "add", "relu", "div", "to_int"]
    expected = irrun.read_model(xml).infer({"x": X, "y": Y}, intermediate=True)
    for e in index:
        a = np.load(d / e["file"], allow_pickle=False)
        assert e["port"] == 0 and e["file"] == f"{e['layer']}.0.npy"
        assert list(a.shape) == e["shape"]
        assert e["line"] == line_of(xml, e["layer"])
        np.testing.assert_array_equal(a, expected[f"{e['layer']}:0"])
    by_layer = {e["layer"]: e for e in index}
    assert by_layer["to_int"]["dtype"] == "i32" and by_layer["to_int"]["type_version"] == "Convert-opset1"
    assert by_layer["add"]["dtype"] == "f32"
    assert "dumped 6 tensors" in r.stderr


def test_dump_layers_pattern(tiny, tmp_path):
    xml, inputs = tiny
    r = invoke(xml, "-i", inputs, "--dump", tmp_path, "--dump-layers", "*d*", "--dump-layers", "w")
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "index.json").read_text())
    # '*d*' matches add, div and (not to_int); 'w' names the Const, which is then dumped.
    assert sorted(e["layer"] for e in index) == ["add", "div", "w"]
    assert sorted(os.listdir(tmp_path)) == ["add.0.npy", "div.0.npy", "index.json", "w.0.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "w.0.npy"), W)


def test_dump_layers_needs_dump(tiny):
    xml, inputs = tiny
    r = invoke(xml, "-i", inputs, "--dump-layers", "add")
    assert r.exit_code == 2 and "--dump-layers needs --dump DIR" in r.output


@pytest.mark.parametrize("name, safe", [
    ("conv1/BiasAdd:0", "conv1_BiasAdd_0"),
    ("../../etc/passwd", "_.._etc_passwd"),
    ("...", "layer"),
    ("", "layer"),
    ("a b\tc", "a_b_c"),
    ("x" * 300, "x" * 100),
])
def test_safe_filename(name, safe):
    assert inspect.safe_filename(name) == safe


def test_dump_names_collide_after_sanitising(tmp_path):
    from types import SimpleNamespace as NS
    d = inspect.Dumper(str(tmp_path))
    for lid, name in (("3", "a/b"), ("4", "a:b"), ("5", "A_B")):
        layer = NS(id=lid, name=name, op_label="Relu-opset1", line=1)
        d(NS(layer=layer, kind="op", specs=None), (np.zeros(2, np.float32),), 0.0)
    d.close()
    assert sorted(os.listdir(tmp_path)) == ["A_B~5.0.npy", "a_b.0.npy", "a_b~4.0.npy", "index.json"]


def test_dump_bf16_stored_as_f32(tmp_path):
    import ml_dtypes
    from types import SimpleNamespace as NS
    d = inspect.Dumper(str(tmp_path))
    layer = NS(id="1", name="h", op_label="Convert-opset1", line=7)
    spec = NS(etype=NS(name="bf16"))
    d(NS(layer=layer, kind="op", specs=[spec]), (np.array([1.5, -2], ml_dtypes.bfloat16),), 0.0)
    d.close()
    entry = json.loads((tmp_path / "index.json").read_text())[0]
    assert entry["dtype"] == "bf16" and entry["stored_as"] == "f32"
    a = np.load(tmp_path / "h.0.npy")
    assert a.dtype == np.float32 and a.tolist() == [1.5, -2.0]


# ---------------------------------------------------------------- --check-nan, --until

def test_check_nan_stops_at_first_layer(tiny, tmp_path):
    xml, inputs = tiny
    r = invoke(xml, "-i", inputs, "--check-nan", "--dump", tmp_path)
    assert r.exit_code == 1
    errors = [ln for ln in r.stderr.splitlines() if ": error: " in ln]
    assert errors == [f"{xml}:{line_of(xml, 'div')}: error: layer 'div' (Divide-opset1): output 0 has "
                      "1 NaN and 1 Inf (first at index [1, 1]); the first layer producing "
                      "non-finite values"]
    assert "out:" not in r.stdout
    # The dump stops at (and includes) the offending layer.
    assert [e["layer"] for e in json.loads((tmp_path / "index.json").read_text())][-1] == "div"


def test_check_nan_passes_finite_run(tiny, tmp_path):
    xml, _ = tiny
    np.savez(tmp_path / "ok.npz", x=X, y=np.ones_like(Y))
    r = invoke(xml, "-i", tmp_path / "ok.npz", "--check-nan")
    assert r.exit_code == 0, r.output
    assert "out_int: int32[2, 3]" in r.stdout


def test_until_runs_up_to_a_layer(tiny, tmp_path):
    xml, inputs = tiny
    out = tmp_path / "o.npz"
    r = invoke(xml, "-i", inputs, "--until", "relu", "-o", out, "-v")
    assert r.exit_code == 0, r.output
    with np.load(out) as z:
        assert z.files == ["relu"]
        np.testing.assert_array_equal(z["relu"], np.maximum(X + W, 0))
    traced = [ln.split("'")[1] for ln in r.stderr.splitlines() if "(line" in ln]
    assert traced == ["x", "add", "relu"]        # y, div and to_int never run


def test_until_unknown_layer(tiny):
    xml, inputs = tiny
    r = invoke(xml, "-i", inputs, "--until", "nope")
    assert r.exit_code == 1
    assert r.stderr.strip().endswith("no layer named 'nope' in the model")


# ---------------------------------------------------------------- Python API

def test_infer_intermediate_keys_every_port(tiny):
    xml, _ = tiny
    m = irrun.read_model(xml)
    got = m.infer({"x": X, "y": Y}, intermediate=True)
    np.testing.assert_array_equal(got["add:0"], X + W)
    np.testing.assert_array_equal(got["relu:0"], np.maximum(X + W, 0))
    assert {"x:0", "y:0", "w:0", "add:0", "relu:0", "div:0", "to_int:0", "out", "out_int"} <= set(got)
    assert got["to_int:0"].dtype == np.int32
    np.testing.assert_array_equal(got["out_int"], got["to_int:0"])


# ---------------------------------------------------------------- progress

class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal():
    node = object()
    plain = io.StringIO()
    p = inspect.Progress(3, plain, delay=0)
    for _ in range(3):
        p(node, (), 0.0)
    p.close()
    assert plain.getvalue() == ""
    tty = FakeTTY()
    p = inspect.Progress(3, tty, delay=0)
    for _ in range(3):
        p(node, (), 0.0)
    p.close()
    assert "running" in tty.getvalue() and "3/3" in tty.getvalue()


def test_progress_bar_waits_for_a_long_run():
    tty = FakeTTY()
    p = inspect.Progress(3, tty, delay=3600)
    for _ in range(3):
        p(object(), (), 0.0)
    p.close()
    assert tty.getvalue() == ""


def test_cli_shows_no_bar_when_not_a_terminal(tiny):
    xml, inputs = tiny
    r = invoke(xml, "-i", inputs)
    assert r.exit_code == 0
    assert r.stderr == ""


# ---------------------------------------------------------------- every model in models/

MODELS = sorted(glob.glob(os.path.join(ROOT, "models", "*", "model.xml")))


def _feed_for(xml):
    path = sample_inputs_for(xml)
    return ["-i", path] if path else []


@pytest.mark.skipif(not MODELS, reason="models/ has no model.xml yet")
@pytest.mark.parametrize("xml", MODELS, ids=[os.path.basename(os.path.dirname(p)) for p in MODELS])
def test_each_model_profile_dump_trace(xml, tmp_path):
    feed = _feed_for(xml)
    if not feed and irrun.read_model(xml).inputs:
        pytest.skip("no sample inputs beside the model")
    r = invoke(xml, *feed, "--profile", "--dump", tmp_path, "-v")
    assert r.exit_code == 0, r.output
    m = irrun.read_model(xml)
    ran = set(m.run_order())
    nodes = [n for n in m.program.nodes.values() if n.layer.name in ran]
    ops = [n for n in nodes if n.kind == "op"]
    params = [n for n in nodes if n.kind == "parameter"]
    # -v: one line per Parameter and op that ran.
    traced = [ln for ln in r.stderr.splitlines() if "(line " in ln]
    assert len(traced) == len(ops) + len(params)
    # --profile: one row per op, and the total.
    if ops:
        assert re.search(rf"^total\s+{len(ops)} layers?\s", r.stdout, re.M)
    # --dump: one file per output port of every Parameter and op, but the weights (ops
    # folded into constants at load: decompression Converts).
    index = json.loads((tmp_path / "index.json").read_text())
    assert len(index) == sum(len(n.specs) for n in ops + params if n.folded is None)
    for e in index:
        assert np.load(tmp_path / e["file"]).shape == tuple(e["shape"])


@pytest.mark.skipif(not MODELS, reason="models/ has no model.xml yet")
@pytest.mark.parametrize("xml", MODELS, ids=[os.path.basename(os.path.dirname(p)) for p in MODELS])
def test_each_model_until_and_check_nan(xml, tmp_path):
    feed = _feed_for(xml)
    m = irrun.read_model(xml)
    if not feed and m.inputs:
        pytest.skip("no sample inputs beside the model")
    by_name = {n.layer.name: n for n in m.program.nodes.values()}
    ops = [name for name in m.run_order() if by_name[name].kind == "op"]
    if not ops:
        pytest.skip("the model has no op layer")
    target = ops[len(ops) // 2]
    r = invoke(xml, *feed, "--until", target, "--check-nan", "-o", tmp_path / "o.npz")
    full = m.infer(dict(np.load(feed[1])) if feed else {}, intermediate=True)
    if r.exit_code == 1:    # a layer up to the target makes NaN/Inf: it must say which, on one line
        assert len(r.stderr.strip().splitlines()) == 1 and "non-finite" in r.stderr
        return
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "o.npz") as z:
        for key in z.files:
            port = 0 if key == target else int(key.rsplit(":", 1)[1])   # several: "name:i"
            np.testing.assert_array_equal(z[key], full[f"{target}:{port}"])


def test_dump_write_errors_are_one_line(tiny, tmp_path, monkeypatch):
    xml, inputs = tiny

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(np.lib.format, "write_array", full)
    r = invoke(xml, "-i", inputs, "--dump", tmp_path)
    assert r.exit_code == 1
    assert r.stderr.splitlines()[-1] == f"{tmp_path / 'x.0.npy'}: error: cannot write the dump " \
                                        "file: No space left on device"


def test_run_help_lists_the_inspection_options():
    r = invoke("run", "--help")
    assert r.exit_code == 0
    for option in ("--profile", "-n, --repeat N", "--dump DIR", "--dump-layers PATTERN",
                   "-v, --verbose",
                   "--check-nan", "--until LAYER", "--extension FILE"):
        assert option in r.stdout
