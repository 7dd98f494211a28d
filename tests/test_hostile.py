"""Hostile and broken input: no crash, no unbounded work, nothing lost.

Output and dump files written safely, weights changed under a loaded model, duplicate input
names, npz bombs, the whole-run memory budget, huge counts from tiny files, and errors that
say what happened (never "an irrun bug" for the user's own disk or keyboard).
"""
from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
from irrun.ui.cli import cli
from irrun.errors import ModelError, ReadError, ResourceError
from irrun.run.feed import load_npz


# ------------------------------------------------------------------ helpers

def port(pid, et, dims, names=None):
    n = f' names="{names}"' if names else ""
    return f'<port id="{pid}" precision="{et.upper()}"{n}>' + \
        "".join(f"<dim>{d}</dim>" for d in dims) + "</port>"


def parameter(lid, name, et="f32", dims=(2,), names=None):
    shape = ",".join(map(str, dims))
    return (f'<layer id="{lid}" name="{name}" type="Parameter" version="opset1">'
            f'<data shape="{shape}" element_type="{et}"/>'
            f'<output>{port(0, et, dims, names or name)}</output></layer>')


def const(lid, name, et, dims, offset, size):
    shape = ",".join(map(str, dims))
    return (f'<layer id="{lid}" name="{name}" type="Const" version="opset1">'
            f'<data element_type="{et}" shape="{shape}" offset="{offset}" size="{size}"/>'
            f'<output>{port(0, et, dims)}</output></layer>')


def op(lid, name, type_, n_in, et="f32", dims=(2,), data=None, version="opset1"):
    d = "<data " + " ".join(f'{k}="{v}"' for k, v in data.items()) + "/>" if data else ""
    ins = "".join(port(i, et, dims) for i in range(n_in))
    return (f'<layer id="{lid}" name="{name}" type="{type_}" version="{version}">{d}'
            f'<input>{ins}</input><output>{port(n_in, et, dims)}</output></layer>')


def result(lid, name, et="f32", dims=(2,)):
    return (f'<layer id="{lid}" name="{name}" type="Result" version="opset1">'
            f'<input>{port(0, et, dims)}</input></layer>')


def edge(a, b, fp=0, tp=0):
    return f'<edge from-layer="{a}" from-port="{fp}" to-layer="{b}" to-port="{tp}"/>'


def write_ir(tmp_path, layers, edges, blob=b"", name="model"):
    xml = Path(tmp_path) / f"{name}.xml"
    xml.write_text('<?xml version="1.0"?>\n<net name="m" version="11">\n<layers>\n'
                   + "\n".join(layers) + "\n</layers>\n<edges>\n" + "\n".join(edges)
                   + "\n</edges>\n</net>\n")
    (Path(tmp_path) / f"{name}.bin").write_bytes(blob)
    return xml


def line_of(path, needle):
    for i, text in enumerate(Path(path).read_text().splitlines(), 1):
        if needle in text:
            return i
    raise AssertionError(f"{needle!r} not in {path}")


def run_cli(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def passthrough(tmp_path, names):
    """One Parameter -> Result per name; the output names are `names`."""
    layers, edges = [], []
    for i, n in enumerate(names):
        layers += [parameter(2 * i, f"p{i}", names=n), result(2 * i + 1, f"r{i}")]
        edges.append(edge(2 * i, 2 * i + 1))
    return write_ir(tmp_path, layers, edges)


def feed_file(tmp_path, arrays, name="in.npz"):
    """An .npz written member by member (np.savez cannot take names such as `file`)."""
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as z:
        for key, a in arrays.items():
            with z.open(key + ".npy", "w") as f:
                np.lib.format.write_array(f, np.asarray(a), allow_pickle=False)
    return path


# ------------------------------------------------------------------ --output

def test_output_names_that_np_savez_cannot_take(tmp_path):
    names = ["allow_pickle", "file", "args", "kwds"]
    xml = passthrough(tmp_path, names)
    given = {n: np.array([i, -i], np.float32) for i, n in enumerate(names)}
    out = tmp_path / "out.npz"
    r = run_cli(xml, "--inputs", feed_file(tmp_path, given), "--output", out)
    assert r.exit_code == 0, r.output
    assert "wrote 4 outputs" in r.output
    with np.load(out, allow_pickle=False) as z:
        assert sorted(z.files) == sorted(names)
        for n in names:
            np.testing.assert_array_equal(z[n], given[n])
    assert load_npz(str(out)).keys() == given.keys()


def test_output_name_clash_is_an_error_before_the_run(tmp_path):
    xml = passthrough(tmp_path, ["a", "b"])
    # Result output_names make two outputs share a name while the inputs differ.
    text = Path(xml).read_text()
    for r in ("r0", "r1"):
        text = text.replace(f'name="{r}" type="Result"', f'name="{r}" type="Result" output_names="y"')
    Path(xml).write_text(text)
    out = tmp_path / "out.npz"
    inputs = feed_file(tmp_path, {"a": np.zeros(2, np.float32), "b": np.ones(2, np.float32)})
    r = run_cli(xml, "--inputs", inputs, "--output", out)
    assert r.exit_code == 1
    assert "two outputs are named 'y'" in r.output
    assert not out.exists()


def test_output_path_checked_before_the_run(tmp_path):
    xml = passthrough(tmp_path, ["x"])
    inputs = feed_file(tmp_path, {"x": np.zeros(2, np.float32)})
    r = run_cli(xml, "--inputs", inputs, "--output", tmp_path / "nodir" / "out.npz")
    assert r.exit_code == 1
    assert "does not exist" in r.output and "nodir" in r.output
    assert "irrun bug" not in r.output


def test_output_in_a_read_only_directory(tmp_path, monkeypatch):
    xml = passthrough(tmp_path, ["x"])
    inputs = feed_file(tmp_path, {"x": np.zeros(2, np.float32)})
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    real_access = os.access
    # Root may write anywhere: let the check see what an ordinary user would.
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == ro
                        else real_access(p, mode, **kw))
    r = run_cli(xml, "--inputs", inputs, "--output", ro / "out.npz")
    assert r.exit_code == 1
    assert "not writable" in r.output and "irrun bug" not in r.output
    assert not (ro / "out.npz").exists()


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    xml = passthrough(tmp_path, ["x"])
    inputs = feed_file(tmp_path, {"x": np.zeros(2, np.float32)})
    out = tmp_path / "out.npz"
    out.write_bytes(b"previous good file")

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np.lib.format, "write_array", disk_full)
    r = run_cli(xml, "--inputs", inputs, "--output", out)
    assert r.exit_code == 1
    assert "No space left on device" in r.output and str(out) in r.output
    assert "irrun bug" not in r.output
    assert out.read_bytes() == b"previous good file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npz", "model.bin", "model.xml",
                                                          "out.npz"]


def test_interrupted_write_leaves_no_partial_file(tmp_path, monkeypatch):
    out = tmp_path / "out.npz"
    out.write_bytes(b"previous")

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np.lib.format, "write_array", interrupt)
    from irrun.run.feed import save_npz
    with pytest.raises(KeyboardInterrupt):
        save_npz(str(out), {"x": np.zeros(2)})
    assert out.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]


def test_output_is_written_at_exactly_the_given_path(tmp_path):
    xml = passthrough(tmp_path, ["x"])
    inputs = feed_file(tmp_path, {"x": np.ones(2, np.float32)})
    out = tmp_path / "result.data"          # np.savez would have written result.data.npz
    r = run_cli(xml, "--inputs", inputs, "--output", out)
    assert r.exit_code == 0, r.output
    assert out.exists() and not (tmp_path / "result.data.npz").exists()


# ------------------------------------------------------------------ --dump

def dump_model(tmp_path):
    """Names that clash through the old `.idN` suffix: 'a.id2' and two layers named 'a'."""
    layers = [parameter(0, "a.id2", names="p"), parameter(1, "a", names="q"),
              op(2, "a", "Relu", 1), result(3, "r0"), result(4, "r1")]
    edges = [edge(0, 3), edge(1, 2), edge(2, 4, fp=1)]
    xml = write_ir(tmp_path, layers, edges)
    inputs = feed_file(tmp_path, {"p": np.array([1, 2], np.float32),
                                  "q": np.array([-3, 4], np.float32)})
    return xml, inputs


def test_dump_file_names_are_unique_and_index_matches_the_files(tmp_path):
    xml, inputs = dump_model(tmp_path)
    out = tmp_path / "dump"
    r = run_cli(xml, "--inputs", inputs, "--dump", out)
    assert r.exit_code == 0, r.output
    index = json.loads((out / "index.json").read_text())
    files = [e["file"] for e in index]
    assert len(files) == 3 and len(set(files)) == 3
    assert sorted(os.listdir(out)) == sorted(files + ["index.json"])
    want = {("0", 0): [1, 2], ("1", 0): [-3, 4], ("2", 0): [0, 4]}
    for e in index:
        np.testing.assert_array_equal(np.load(out / e["file"]), want[(e["id"], e["port"])])


def test_dump_never_follows_a_planted_link(tmp_path):
    xml, inputs = dump_model(tmp_path)
    out = tmp_path / "dump"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for planted in ("a.id2.0.npy", "a.0.npy", "a~2.0.npy", "index.json"):
        (out / planted).symlink_to(victim)
    (out / "dangling.0.npy").symlink_to(tmp_path / "nowhere")
    r = run_cli(xml, "--inputs", inputs, "--dump", out)
    assert r.exit_code == 0, r.output
    assert victim.read_text() == "precious"
    for planted in ("a.id2.0.npy", "a.0.npy", "a~2.0.npy", "index.json"):
        assert not (out / planted).is_symlink()
    assert not (tmp_path / "nowhere").exists()
    assert len(json.loads((out / "index.json").read_text())) == 3


def test_dump_write_failure_names_the_file_and_leaves_no_partial_file(tmp_path, monkeypatch):
    xml, inputs = dump_model(tmp_path)
    out = tmp_path / "dump"
    real = np.lib.format.write_array

    def fail_on_relu(f, a, **kw):
        if a.tolist() == [0, 4]:
            f.write(b"partial")
            raise OSError(28, "No space left on device")
        return real(f, a, **kw)

    monkeypatch.setattr(np.lib.format, "write_array", fail_on_relu)
    r = run_cli(xml, "--inputs", inputs, "--dump", out)
    assert r.exit_code == 1
    assert "No space left on device" in r.output and "a~2.0.npy" in r.output
    assert "irrun bug" not in r.output
    index = json.loads((out / "index.json").read_text())
    assert sorted(os.listdir(out)) == sorted([e["file"] for e in index] + ["index.json"])


# ------------------------------------------------------------------ weights changed after read_model

def const_model(tmp_path, values=(10.0, 20.0)):
    """x + c, with c read from the .bin."""
    blob = np.array(values, np.float32).tobytes() * 1024     # several pages: truncation bites
    layers = [parameter(0, "x"), const(1, "c", "f32", (2,), 0, 8), op(2, "add", "Add", 2),
              result(3, "out")]
    edges = [edge(0, 2), edge(1, 2, tp=1), edge(2, 3, fp=2)]
    return write_ir(tmp_path, layers, edges, blob)


def test_truncated_bin_after_read_model_is_a_read_error_not_sigbus(tmp_path):
    import subprocess
    import sys
    import textwrap

    xml = const_model(tmp_path)
    script = textwrap.dedent(f"""
        import os, numpy as np, irrun
        m = irrun.read_model({str(xml)!r})
        print(m.infer({{"x": np.ones(2, np.float32)}})["out"].tolist())
        os.truncate({str(xml.with_suffix(".bin"))!r}, 0)
        try:
            m.infer({{"x": np.ones(2, np.float32)}})
        except irrun.ReadError as e:
            print("ReadError:", e)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)     # -7 would be SIGBUS
    first, second = r.stdout.splitlines()
    assert first == "[11.0, 21.0]"
    assert second.startswith(f"ReadError: {xml.with_suffix('.bin')}: error: weights file changed "
                             "since it was read")


def test_bin_rewritten_in_place_is_refused(tmp_path):
    xml = const_model(tmp_path)
    m = irrun.read_model(xml)
    binp = xml.with_suffix(".bin")
    st = os.stat(binp)
    with open(binp, "r+b") as f:              # same size, other values
        f.write(np.array([1, 2], np.float32).tobytes())
    os.utime(binp, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # past the clock's granularity
    with pytest.raises(ReadError, match="weights file changed since it was read"):
        m.infer({"x": np.ones(2, np.float32)})


def test_bin_replaced_by_another_file_is_refused(tmp_path):
    xml = const_model(tmp_path)
    m = irrun.read_model(xml)
    binp = xml.with_suffix(".bin")
    new = tmp_path / "new.bin"
    new.write_bytes(binp.read_bytes())
    os.replace(new, binp)
    with pytest.raises(ReadError, match="weights file changed since it was read"):
        m.infer({"x": np.ones(2, np.float32)})


def test_no_mmap_reads_a_private_copy(tmp_path):
    xml = const_model(tmp_path)
    m = irrun.read_model(xml, mmap=False)
    os.truncate(xml.with_suffix(".bin"), 0)
    assert m.infer({"x": np.ones(2, np.float32)})["out"].tolist() == [11.0, 21.0]
    const = m.program.nodes["1"].const_value
    assert not const.flags.writeable


def test_no_mmap_on_the_command_line(tmp_path):
    xml = const_model(tmp_path)
    inputs = feed_file(tmp_path, {"x": np.ones(2, np.float32)})
    r = run_cli(xml, "--no-mmap", "--inputs", inputs)
    assert r.exit_code == 0, r.output
    assert "[11. 21.]" in r.output


# ------------------------------------------------------------------ duplicate input names

def test_two_parameters_with_one_tensor_name_is_a_validation_error_at_both(tmp_path):
    xml = write_ir(tmp_path, [parameter(0, "a", names="x"), parameter(1, "b", names="y,x"),
                              op(2, "add", "Add", 2), result(3, "out")],
                   [edge(0, 2), edge(1, 2, tp=1), edge(2, 3, fp=2)])
    errors = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert [(d.line, d.layer_name, d.code) for d in errors] == [
        (line_of(xml, 'name="a"'), "a", "duplicate-input-name"),
        (line_of(xml, 'name="b"'), "b", "duplicate-input-name")]
    assert "input name 'x' is also a name of Parameter 'b'" in errors[0].message
    with pytest.raises(ModelError) as e:
        irrun.read_model(xml)
    assert "internal" not in str(e.value) and len(e.value.diagnostics) == 2


# ------------------------------------------------------------------ memory: npz bombs, whole-run budget

def bomb(path, members, shape=(1 << 20,)):
    """An .npz of `members` compressed all-zero f32 arrays: 4 MiB each, a few KiB on disk."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                   "shape": shape})
    zeros = bytes(4 * int(np.prod(shape)))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in members:
            z.writestr(name + ".npy", header.getvalue() + zeros)
    return path


def test_npz_member_for_no_input_is_refused_before_decompression(tmp_path, monkeypatch):
    xml = passthrough(tmp_path, ["x"])
    path = bomb(tmp_path / "bomb.npz", ["junk"])
    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open",
                        lambda self, name, *a, **k: opened.append(name) or real_open(self, name, *a, **k))
    m = irrun.read_model(xml)
    with pytest.raises(irrun.FeedError, match="unknown input name 'junk' in the inputs file"):
        load_npz(str(path), m.inputs)
    assert opened == []
    r = run_cli(xml, "--inputs", path)
    assert r.exit_code == 1 and "unknown input name 'junk'" in r.output


def test_npz_bomb_is_bounded_for_all_members_together(tmp_path, monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(10 << 20))      # 10 MiB: each member passes
    names = [f"m{i}" for i in range(8)]                      # 8 x 4 MiB = 32 MiB
    path = bomb(tmp_path / "bomb.npz", names)
    assert path.stat().st_size < 1 << 20
    with pytest.raises(ResourceError, match="limit of 10485760 bytes"):
        load_npz(str(path))


def test_npz_decompression_stops_at_the_declared_shape(tmp_path, monkeypatch):
    # The member holds 64 MiB of zeros behind a header declaring 4 bytes.
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                   "shape": (1,)})
    path = tmp_path / "lying.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.npy", header.getvalue() + bytes(64 << 20))
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(1 << 20))
    with pytest.raises(ResourceError, match="declare"):        # declared 64 MiB: refused unread
        load_npz(str(path))


def fan_model(tmp_path, n=1024):
    """x -> relu a, x -> relu b, a + b: four f32[n] tensors alive at the Add."""
    dims = (n,)
    layers = [parameter(0, "x", dims=dims), op(1, "a", "Relu", 1, dims=dims),
              op(2, "b", "Relu", 1, dims=dims), op(3, "c", "Add", 2, dims=dims),
              result(4, "out", dims=dims)]
    edges = [edge(0, 1), edge(0, 2), edge(1, 3, fp=1), edge(2, 3, fp=1, tp=1), edge(3, 4, fp=2)]
    return write_ir(tmp_path, layers, edges)


def test_the_budget_is_for_all_live_tensors_of_a_run(tmp_path, monkeypatch):
    m = irrun.read_model(fan_model(tmp_path))
    x = np.ones(1024, np.float32)              # 4096 bytes a tensor
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(10240))        # each tensor fits, three do not
    with pytest.raises(ResourceError) as e:
        m.infer({"x": x})
    d = e.value.diagnostic
    assert d.layer_name == "b" and d.line == line_of(m.path, 'name="b"')
    assert "live tensors would need 12288 bytes (8192 alive" in d.message
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(3 * 4096))      # x is freed before c runs
    np.testing.assert_array_equal(m.infer({"x": x})["out"], 2 * x)


def test_freed_tensors_leave_the_budget(tmp_path, monkeypatch):
    n, dims = 1024, (1024,)
    layers = [parameter(0, "x", dims=dims)]
    edges = []
    for i in range(1, 30):
        layers.append(op(i, f"r{i}", "Relu", 1, dims=dims))
        edges.append(edge(i - 1, i, fp=0 if i == 1 else 1))
    layers.append(result(30, "out", dims=dims))
    edges.append(edge(29, 30, fp=1))
    m = irrun.read_model(write_ir(tmp_path, layers, edges))
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(3 * 4 * n))    # 29 tensors, never 3 at once
    assert m.infer({"x": np.ones(n, np.float32)})["out"].shape == (n,)


# ------------------------------------------------------------------ huge counts from tiny files

def split_model(tmp_path, n, dims=(0, 4)):
    layers = [parameter(0, "x", dims=dims), const(1, "ax", "i64", (), 0, 8),
              f'<layer id="2" name="s" type="Split" version="opset1"><data num_splits="{n}"/>'
              f'<input>{port(0, "f32", dims)}{port(1, "i64", ())}</input>'
              f'<output>{port(2, "f32", dims)}</output></layer>',
              result(3, "out", dims=dims)]
    return write_ir(tmp_path, layers, [edge(0, 2), edge(1, 2, tp=1), edge(2, 3, fp=2)],
                    np.array(0, np.int64).tobytes())


def test_split_with_ten_million_outputs_is_refused_at_once(tmp_path):
    xml = split_model(tmp_path, 10_000_000)
    assert xml.stat().st_size < 1200
    errors = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert len(errors) == 1 and errors[0].layer_name == "s"
    assert errors[0].line == line_of(xml, 'name="s"')
    assert "num_splits=10000000 would make 10000000 outputs" in errors[0].message


def test_split_output_count_is_checked_against_the_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1M")
    errors = [d for d in irrun.validate(split_model(tmp_path, 4096)) if d.severity == "error"]
    assert len(errors) == 1 and "IRRUN_MAX_BYTES" in errors[0].message


def test_split_into_many_empty_outputs_still_runs(tmp_path):
    m = irrun.read_model(split_model(tmp_path, 1000))
    assert m.infer({"x": np.zeros((0, 4), np.float32)})["out"].shape == (0, 4)


def test_port_lookup_reads_each_port_once_not_once_per_edge(monkeypatch):
    from irrun.ir import reader

    reads = [0]

    class CountingPort(reader.Port):
        @property
        def id(self):
            reads[0] += 1
            return self.__dict__["_id"]

        @id.setter
        def id(self, value):
            self.__dict__["_id"] = value

    n = 3000
    layer = reader.Layer("1", "c", "Concat", "opset1", 1)
    layer.inputs = [CountingPort(i, i, "FP32", [1], [], 1) for i in range(n)]
    assert [layer.input_position(i) for i in range(n)] == list(range(n))
    assert layer.input_position(n) is None
    assert reads[0] <= 2 * n          # a scan per lookup read n * n / 2 ids


# ------------------------------------------------------------------ errors that lie

def test_const_of_rank_65_is_a_located_error(tmp_path):
    dims = (1,) * 65
    xml = write_ir(tmp_path, [const(0, "c", "f32", dims, 0, 4), result(1, "out", dims=dims)],
                   [edge(0, 1)], b"\0" * 4)
    errors = [d for d in irrun.validate(xml) if d.severity == "error"]   # never raises
    assert [(d.line, d.layer_name) for d in errors] == [(line_of(xml, 'name="c"'), "c")]
    assert "rank 65" in errors[0].message and "at most 64 dims" in errors[0].message
    with pytest.raises(ModelError, match="rank 65"):
        irrun.read_model(xml)


def test_parameter_of_rank_65_is_a_located_error(tmp_path):
    dims = (1,) * 65
    xml = write_ir(tmp_path, [parameter(0, "p", dims=dims), result(1, "out", dims=dims)],
                   [edge(0, 1)])
    errors = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert errors and errors[0].layer_name == "p" and "rank 65" in errors[0].message


@pytest.mark.parametrize("lid", ["1_6", "\u0661\u0666", "\uff11\uff16", "1.5", "16 ", "0x10",
                                 "-3", "99999999999999999999", "1e3"])
def test_layer_ids_follow_openvinos_integer_grammar(tmp_path, lid):
    xml = write_ir(tmp_path, [parameter(0, "x"), result(lid, "out")], [edge(0, lid)])
    errors = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert any(f"layer id '{lid}' is not a non-negative integer" in d.message for d in errors)
    assert any(f"edge to-layer='{lid}' is not a non-negative integer" in d.message for d in errors)


@pytest.mark.parametrize("lid", ["16", " 16", "+16", "016"])
def test_ids_openvino_reads_are_accepted_as_the_number(tmp_path, lid):
    xml = write_ir(tmp_path, [parameter(0, "x"), result(lid, "out")], [edge(0, 16)])
    assert [d for d in irrun.validate(xml) if d.severity == "error"] == []


def test_port_ids_follow_the_grammar_too(tmp_path):
    xml = write_ir(tmp_path, [parameter(0, "x"), result(1, "out")], [edge(0, 1)])
    Path(xml).write_text(Path(xml).read_text().replace('to-port="0"', 'to-port="0_0"'))
    errors = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert any("edge to-port '0_0' is not an integer" in d.message for d in errors)


SELF_INTERRUPT = '''\
import os, signal, time
from dataclasses import dataclass
from irrun.opkit import TensorSpec, register


@dataclass(frozen=True)
class NoAttrs:
    pass


@register("CtrlC", version="extension", attrs=NoAttrs, category="activation")
class CtrlC:
    @staticmethod
    def infer(attrs, x):
        return [TensorSpec(x.etype, x.shape)]

    @staticmethod
    def run(attrs, x):
        os.kill(os.getpid(), signal.SIGINT)     # the user presses Ctrl-C mid-run
        time.sleep(30)
        return (x,)
'''


def test_ctrl_c_exits_130_with_one_line_and_no_partial_files(tmp_path):
    import subprocess
    import sys

    layers = [parameter(0, "x"), op(1, "relu", "Relu", 1),
              op(2, "stop", "CtrlC", 1, version="extension"), result(3, "out")]
    xml = write_ir(tmp_path, layers, [edge(0, 1), edge(1, 2, fp=1), edge(2, 3, fp=1)])
    ext = tmp_path / "ctrlc.py"
    ext.write_text(SELF_INTERRUPT)
    inputs = feed_file(tmp_path, {"x": np.array([-1, 2], np.float32)})
    out = tmp_path / "out.npz"
    r = subprocess.run([sys.executable, "-m", "irrun", "run", str(xml), "--extension", str(ext),
                        "-i", str(inputs), "-o", str(out), "--dump", str(tmp_path / "dump")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 130, r.stderr
    assert r.stderr.splitlines() == ["irrun: interrupted"]
    # No out.npz, no temp file (importing the extension may leave Python's __pycache__).
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == [
        "ctrlc.py", "dump", "in.npz", "model.bin", "model.xml"]
    index = json.loads((tmp_path / "dump" / "index.json").read_text())
    assert sorted(os.listdir(tmp_path / "dump")) == sorted([e["file"] for e in index]
                                                           + ["index.json"])


def test_a_directory_in_validates_file_list_is_reported_and_the_run_goes_on(tmp_path):
    good = passthrough(tmp_path, ["x"])
    (tmp_path / "adir").mkdir()
    r = run_cli("validate", tmp_path / "adir", good)
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0] == f"{tmp_path / 'adir'}: error: this is a directory, not a model file: pass its model.xml"
    assert lines[-1] == "2 files: 1 error, 0 warnings"


def test_io_failures_are_ordinary_errors_naming_the_path(tmp_path, monkeypatch):
    xml = passthrough(tmp_path, ["x"])
    inputs = feed_file(tmp_path, {"x": np.zeros(2, np.float32)})
    import irrun.run.feed

    def broken_read(*args, **kwargs):
        raise OSError(5, "Input/output error", str(xml))

    monkeypatch.setattr(irrun.run.feed, "load_npz", broken_read)   # the CLI imports it per run
    r = run_cli(xml, "--inputs", inputs)
    assert r.exit_code == 1
    assert r.output.strip() == f"{xml}: error: Input/output error"

    def too_big(*args, **kwargs):
        raise ValueError("array is too big; `arr.size * arr.dtype.itemsize` is larger than "
                         "the maximum possible size.")

    monkeypatch.setattr(irrun.run.feed, "load_npz", too_big)
    r = run_cli(xml, "--inputs", inputs)
    assert r.exit_code == 1
    assert r.output.startswith("error: out of memory") and "irrun bug" not in r.output


def test_terminal_escape_codes_in_names_are_escaped(tmp_path):
    xml = passthrough(tmp_path, ["x"])
    evil = "\x1b]0;owned\x07\x1b[2J"
    path = feed_file(tmp_path, {evil: np.zeros(2, np.float32)})
    r = run_cli(xml, "--inputs", path)
    assert r.exit_code == 1
    assert "\x1b" not in r.output and "\x07" not in r.output
    assert "\\x1b]0;owned\\x07\\x1b[2J" in r.output
    # XML cannot hold ESC, but it can hold the C1 control CSI (U+009B, ESC [ on many
    # terminals) and a right-to-left override that reorders what follows.
    name = "\u009b2J\u202eevil"
    bad = write_ir(tmp_path, [parameter(0, "x"), f'<layer id="1" name="{name}"'
                              ' type="Nope" version="opset1"/>', result(2, "out")],
                   [edge(0, 2)], name="bad")
    r = run_cli("validate", bad)
    assert "layer '\\x9b2J\\u202eevil'" in r.output
    assert "\u009b" not in r.output and "\u202e" not in r.output


def test_numpy_array_is_too_big_in_a_kernel_is_a_located_resource_error(tmp_path):
    from irrun.ir import registry
    from irrun.opkit import TensorSpec, register

    @register("TooBig", version="extension", category="activation")
    class TooBig:
        @staticmethod
        def infer(attrs, x):
            return [TensorSpec(x.etype, x.shape)]

        @staticmethod
        def run(attrs, x):
            return (np.empty((1 << 62, 1 << 62), np.float32),)

    try:
        xml = write_ir(tmp_path, [parameter(0, "x"), op(1, "big", "TooBig", 1, version="extension"),
                                  result(2, "out")], [edge(0, 1), edge(1, 2, fp=1)])
        with pytest.raises(ResourceError) as e:
            irrun.read_model(xml).infer({"x": np.zeros(2, np.float32)})
        assert e.value.diagnostic.layer_name == "big" and "internal" not in str(e.value)
    finally:
        registry.unregister("TooBig", version="extension")


@pytest.mark.parametrize("text, value", [("9" * 5000, None), ("0" * 5000 + "7", 7),
                                          ("-" + "0" * 30 + "5", -5), ("9223372036854775807",
                                          (1 << 63) - 1), ("9223372036854775808", None),
                                          ("-9223372036854775808", -(1 << 63))])
def test_the_integer_grammar_on_long_numbers(text, value):
    from irrun.ir.reader import ov_int
    assert ov_int(text) == value


def test_small_buffers_go_uncounted_only_where_they_cannot_add_up():
    from irrun.errors import ResourceError
    from irrun.ir.weights import LiveBudget

    tight = LiveBudget(limit=200_000, slots=8)     # 8 x 64 KiB > limit / 4: all counted
    with pytest.raises(ResourceError, match="live tensors would need"):
        for slot in range(4):
            tight.hold([slot], [np.zeros(60_000, np.uint8)])
    roomy = LiveBudget(limit=1 << 30, slots=8)
    for slot in range(8):
        roomy.hold([slot], [np.zeros(60_000, np.uint8)])
    assert roomy.live == 0
    roomy.hold([8], [np.zeros(1 << 20, np.uint8)[:10]])   # a small view of a large buffer
    assert roomy.live == 1 << 20
