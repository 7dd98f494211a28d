"""Hostile and broken input: XML attacks, memory bombs, bad feeds, bad values.

Every case ends in one of irrun's documented error types, located where possible; nothing
reads a local file or the network, nothing allocates without bound, nothing crashes.
"""
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from lxml import etree

import irrun
from irrun.ir import weights as irrun_weights
from irrun.ui.cli import cli
from irrun.errors import (FeedError, IrrunError, ModelError, OpError, ReadError, ResourceError)
from irrun.ir.etypes import element_type
from irrun.ir.reader import hardened_parser

ATTACKS = Path(__file__).parent / "attacks"
SECRET = "irrun-secret-7f3a9c"


# ------------------------------------------------------------------ helpers

def write_ir(tmp_path, layers: str, edges: str, blob: bytes = b"", name="model"):
    """A small IR v11 file from layer and edge XML; returns the .xml path."""
    xml = tmp_path / f"{name}.xml"
    xml.write_text(f'<?xml version="1.0"?>\n<net name="{name}" version="11">\n<layers>\n'
                   f'{layers}\n</layers>\n<edges>\n{edges}\n</edges>\n</net>\n')
    (tmp_path / f"{name}.bin").write_bytes(blob)
    return xml


def port(pid, et, dims, names=None):
    n = f' names="{names}"' if names else ""
    d = "".join(f"<dim>{x}</dim>" for x in dims)
    return f'<port id="{pid}" precision="{et}"{n}>{d}</port>'


def parameter(lid, name, et, shape, dims):
    return (f'<layer id="{lid}" name="{name}" type="Parameter" version="opset1">'
            f'<data shape="{shape}" element_type="{et}"/>'
            f'<output>{port(0, et.upper(), dims, name)}</output></layer>')


def const(lid, name, et, shape, offset, size, dims):
    return (f'<layer id="{lid}" name="{name}" type="Const" version="opset1">'
            f'<data element_type="{et}" shape="{shape}" offset="{offset}" size="{size}"/>'
            f'<output>{port(0, et.upper(), dims)}</output></layer>')


def result(lid, name, et, dims):
    return (f'<layer id="{lid}" name="{name}" type="Result" version="opset1">'
            f'<input>{port(0, et.upper(), dims)}</input></layer>')


def edge(a, b):
    return f'<edge from-layer="{a}" from-port="0" to-layer="{b}" to-port="0"/>'


def identity_model(tmp_path, et="f32", shape="2,?", dims=(2, -1), name="x"):
    """Parameter -> Result."""
    return write_ir(tmp_path, parameter(0, name, et, shape, dims) + result(1, "out", et, dims),
                    edge(0, 1))


def line_of(path, needle):
    for i, text in enumerate(Path(path).read_text().splitlines(), 1):
        if needle in text:
            return i
    raise AssertionError(f"{needle!r} not in {path}")


def run_cli(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# ------------------------------------------------------------------ XML attacks

class Watcher(http.server.BaseHTTPRequestHandler):
    """An HTTP server that records every request an attack file might make."""

    requests: list = []

    def do_GET(self):
        Watcher.requests.append(self.path)
        body = f'<!ENTITY leak "{SECRET}">'.encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def http_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Watcher)
    Watcher.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/evil"
    server.shutdown()
    server.server_close()


@pytest.fixture
def secret_url(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    return secret.as_uri()


def instantiate(template: str, url: str, tmp_path) -> Path:
    out = tmp_path / template.replace(".xml.in", ".xml")
    out.write_text((ATTACKS / template).read_text().replace("{URL}", url))
    return out


def assert_refused(path):
    """validate() reports the DOCTYPE at its line; read_model raises a located ModelError."""
    text = Path(path).read_bytes()
    enc = "utf-16" if text.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8"
    want_line = next(i for i, t in enumerate(text.decode(enc).splitlines(), 1) if "<!DOCTYPE" in t)
    diags = irrun.validate(path)
    assert [(d.code, d.line, d.severity) for d in diags] == [("xml-dtd", want_line, "error")]
    with pytest.raises(ModelError) as info:
        irrun.read_model(path)
    assert str(info.value).startswith(f"{path}:{want_line}: error: the file declares a DTD")
    assert SECRET not in str(info.value) and "root:" not in str(info.value)
    return diags


STATIC_ATTACKS = ["xxe_etc_passwd.xml", "xxe_etc_passwd_utf16.xml", "doctype_after_comment.xml",
                  "billion_laughs.xml", "billion_laughs_attribute.xml", "quadratic_blowup.xml"]
TEMPLATES = ["xxe_local_file.xml.in", "xxe_http.xml.in", "xxe_parameter_entity.xml.in",
             "external_dtd.xml.in"]


@pytest.mark.parametrize("name", STATIC_ATTACKS)
def test_static_attack_files_are_refused(name):
    assert_refused(ATTACKS / name)


@pytest.mark.parametrize("name", TEMPLATES)
def test_attacks_on_a_local_file_read_nothing(name, tmp_path, secret_url):
    path = instantiate(name, secret_url, tmp_path)
    assert_refused(path)
    # Defence in depth: even the raw hardened parser, without irrun's prolog check,
    # never pulls the secret into the tree.
    try:
        root = etree.fromstring(path.read_bytes(), hardened_parser())
    except etree.XMLSyntaxError as e:
        assert SECRET not in str(e)
    else:
        assert SECRET.encode() not in etree.tostring(root)


@pytest.mark.parametrize("name", TEMPLATES)
def test_attacks_over_http_make_no_request(name, tmp_path, http_url):
    path = instantiate(name, http_url, tmp_path)
    assert_refused(path)
    try:
        etree.fromstring(path.read_bytes(), hardened_parser())
    except etree.XMLSyntaxError:
        pass
    assert Watcher.requests == []


def test_the_watcher_would_see_a_request(http_url):
    """The HTTP check above can fail: an ordinary parser that loads DTDs does fetch."""
    import urllib.request
    urllib.request.urlopen(http_url, timeout=5).read()
    assert Watcher.requests == ["/evil"]


_CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from lxml import etree
    import irrun
    from irrun.ir.reader import hardened_parser
    irrun.validate(sys.argv[2])          # warm up: import the ops, the registry, ...
    content = open(sys.argv[1], "rb").read()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if sys.argv[3] == "irrun":
        outcome = [d.code for d in irrun.validate(sys.argv[1])]
    else:
        try:
            etree.fromstring(content, hardened_parser())
            outcome = "parsed"
        except etree.XMLSyntaxError as e:
            outcome = "XMLSyntaxError"
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"kib": after - before, "seconds": seconds, "outcome": outcome}))
""")


@pytest.mark.parametrize("name", ["billion_laughs.xml", "billion_laughs_attribute.xml",
                                  "quadratic_blowup.xml"])
@pytest.mark.parametrize("how", ["irrun", "raw-parser"])
def test_entity_bombs_fail_fast_in_little_memory(name, how, tmp_path):
    """In a fresh process with a CPU limit: the peak memory hardly moves and it ends at once.

    Expanded, billion_laughs is 3 GB of text and quadratic_blowup 400 MB.
    """
    plain = identity_model(tmp_path)
    limit = "import resource; resource.setrlimit(resource.RLIMIT_CPU, (30, 30))\n"
    proc = subprocess.run([sys.executable, "-c", limit + _CHILD, str(ATTACKS / name), str(plain), how],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    if how == "irrun":
        assert report["outcome"] == ["xml-dtd"]
    assert report["kib"] < 20 * 1024, report      # growth of peak RSS, KiB
    assert report["seconds"] < 5, report


def test_fifo_target_is_never_opened(tmp_path):
    """An XXE that names a FIFO: opening it would block, so a hang would show a read attempt."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    path = instantiate("xxe_local_file.xml.in", fifo.as_uri(), tmp_path)
    code = ("import sys, irrun\nfrom lxml import etree\nfrom irrun.ir.reader import hardened_parser\n"
            "print([d.code for d in irrun.validate(sys.argv[1])])\n"
            "try:\n    etree.fromstring(open(sys.argv[1], 'rb').read(), hardened_parser())\n"
            "except etree.XMLSyntaxError:\n    pass\nprint('done')\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.split() == ["['xml-dtd']", "done"], proc.stderr


def test_dtd_attack_through_the_cli_is_one_line(tmp_path):
    r = run_cli(ATTACKS / "xxe_etc_passwd.xml")
    assert r.exit_code == 1
    assert r.output.strip().count("\n") == 0
    assert f"{ATTACKS / 'xxe_etc_passwd.xml'}:2: error:" in r.output
    assert "root:" not in r.output


def test_model_that_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "model.xml"
    os.mkfifo(fifo)
    diags = irrun.validate(fifo)
    assert [d.code for d in diags] == ["read"] and "not a regular file" in diags[0].message


# ------------------------------------------------------------------ bad feeds

@pytest.fixture
def two_inputs(tmp_path):
    """x: f32[2,?], ids: i32[3] -> two Results."""
    layers = (parameter(0, "x", "f32", "2,?", (2, -1)) + parameter(1, "ids", "i32", "3", (3,))
              + result(2, "out_x", "f32", (2, -1)) + result(3, "out_ids", "i32", (3,)))
    xml = write_ir(tmp_path, layers, edge(0, 2) + edge(1, 3))
    return irrun.read_model(xml), xml


def feed_error(model, feed) -> str:
    with pytest.raises(FeedError) as info:
        model.infer(feed)
    text = str(info.value)
    assert "\n" not in text
    return text


X = np.zeros((2, 4), np.float32)
IDS = np.array([1, 2, 3], np.int32)


def test_good_feed_runs(two_inputs):
    m, _ = two_inputs
    out = m.infer({"x": X, "ids": IDS})
    np.testing.assert_array_equal(out["x"], X)
    np.testing.assert_array_equal(out["ids"], IDS)


@pytest.fixture
def static_inputs(tmp_path):
    """x: f32[2,4], ids: i32[3], both static: the feeds that fit take Model._feeds' short
    path, which must say no more and no less than the checks."""
    layers = (parameter(0, "x", "f32", "2,4", (2, 4)) + parameter(1, "ids", "i32", "3", (3,))
              + result(2, "out_x", "f32", (2, 4)) + result(3, "out_ids", "i32", (3,)))
    return irrun.read_model(write_ir(tmp_path, layers, edge(0, 2) + edge(1, 3)))


def test_feeds_that_fit_are_used_as_given(static_inputs):
    out = static_inputs.infer({"ids": IDS, "x": X})
    assert out["x"] is X and out["ids"] is IDS      # no copy, in either order


@pytest.mark.parametrize("feed, problem", [
    ({"x": X.astype(np.float64), "ids": IDS}, None),                  # cast, silently
    ({"x": X.tolist(), "ids": IDS}, None),
    ({"x": np.zeros((2, 5), np.float32), "ids": IDS}, "dim 1 is 5, expected 4"),
    ({"x": np.zeros(8, np.float32), "ids": IDS}, "got rank 1 (shape [8])"),
    ({"x": X, "ids": np.array([1.5, 2, 3], np.float32)}, "got float32 values for an integer"),
    ({"x": X, "idz": IDS}, "unknown input name 'idz'"),
    ({"x": X}, "missing input: ids: i32[3]"),
])
def test_feeds_that_do_not_fit_are_checked(static_inputs, feed, problem):
    if problem is None:
        out = static_inputs.infer(feed)
        np.testing.assert_array_equal(out["x"], np.asarray(feed["x"], np.float32))
        assert out["x"].dtype == np.float32
    else:
        assert problem in feed_error(static_inputs, feed)


def test_unknown_input_name(two_inputs):
    m, xml = two_inputs
    text = feed_error(m, {"x": X, "ids": IDS, "idz": IDS})
    assert "unknown input name 'idz'" in text and "x: f32[2,?]" in text and "ids: i32[3]" in text


def test_missing_input(two_inputs):
    text = feed_error(two_inputs[0], {"x": X})
    assert "missing input: ids: i32[3]" in text


def test_wrong_rank(two_inputs):
    m, xml = two_inputs
    text = feed_error(m, {"x": np.zeros(8, np.float32), "ids": IDS})
    line = line_of(xml, 'name="x" type="Parameter"')
    assert text.startswith(f"{xml}:{line}: error: layer 'x' (Parameter-opset1): input 'x': "
                           "got rank 1 (shape [8]), expected rank 2; expected f32[2,?]")


def test_wrong_dim(two_inputs):
    text = feed_error(two_inputs[0], {"x": np.zeros((3, 4), np.float32), "ids": IDS})
    assert "input 'x': got shape [3, 4]: dim 0 is 3, expected 2; expected f32[2,?]" in text


@pytest.mark.parametrize("value, problem", [
    (np.array(["a", "b", "c"]), "got <U1 values"),
    (np.array([b"a", b"b", b"c"]), "got |S1 values"),
    (np.array([1, None, 3], dtype=object), "got object values"),
    (np.array([1 + 2j, 2, 3]), "got complex128 values"),
    (np.zeros(3, dtype=[("a", "i4")]), "values"),
    (np.array([1.0, 2.0, 3.0]), "got float64 values for an integer input (it would truncate them)"),
    (np.array([1.7, 2, 3], np.float32), "got float32 values for an integer input"),
    (np.array([1, 2, 2**40]), "value 1099511627776 is out of the range of i32"),
    (np.array([-2**31 - 1, 0, 0]), "value -2147483649 is out of the range of i32"),
    (np.array([True, False, True]), "got bool values"),
    (np.array([1, 2, 3], ml_dtypes.bfloat16), "got bfloat16 values for an integer input"),
    ([[1, 2], [3]], "cannot make an array of the value"),
])
def test_lossy_or_foreign_values_for_an_integer_input(two_inputs, value, problem):
    text = feed_error(two_inputs[0], {"x": X, "ids": value})
    assert "input 'ids': " in text and problem in text and text.endswith("expected i32[3]")


@pytest.mark.parametrize("value", [np.array([1, 2, 3], np.int64), np.array([1, 2, 3], np.int8),
                                   np.array([1, 2, 3], np.uint64), [1, 2, 3], (4, 5, 6),
                                   np.array([1, 2, 3], ">i4")])
def test_same_kind_integer_casts_are_silent(two_inputs, value):
    out = two_inputs[0].infer({"x": X, "ids": value})["ids"]
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.asarray(value))


@pytest.mark.parametrize("value", [X.astype(np.float64), X.astype(np.float16), X.tolist(),
                                   X.astype(ml_dtypes.bfloat16), X.astype(">f8"),
                                   np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.int64)])
def test_same_kind_float_casts_are_silent(two_inputs, value):
    out = two_inputs[0].infer({"x": value, "ids": IDS})["x"]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.asarray(value).astype(np.float32))


def test_f64_precision_rounds_silently_but_overflow_is_an_error(two_inputs):
    m = two_inputs[0]
    fine = np.full((2, 1), 0.1)
    assert m.infer({"x": fine, "ids": IDS})["x"][0, 0] == np.float32(0.1)
    text = feed_error(m, {"x": np.full((2, 1), 1e300), "ids": IDS})
    assert "value 1e+300 overflows f32 (it would become inf)" in text
    # inf and nan stay what they are
    special = np.array([[np.inf], [np.nan]])
    out = m.infer({"x": special, "ids": IDS})["x"]
    assert np.isinf(out[0, 0]) and np.isnan(out[1, 0])


def test_integers_for_a_float_input_must_be_exact(two_inputs):
    text = feed_error(two_inputs[0], {"x": np.array([[2**24 + 1], [0]]), "ids": IDS})
    assert "int64 values are not exactly representable in f32" in text


@pytest.mark.parametrize("et", ["f16", "bf16"])
def test_half_float_inputs(tmp_path, et):
    m = irrun.read_model(identity_model(tmp_path, et=et, shape="3", dims=(3,)))
    want = element_type(et).dtype
    for value in (np.array([1.5, -2, 3], np.float32), np.array([1.5, -2, 3], want), [1.5, -2, 3]):
        out = m.infer({"x": value})["x"]
        assert out.dtype == want
        np.testing.assert_array_equal(out, np.array([1.5, -2, 3], want))
    assert "overflows" in feed_error(m, {"x": np.array([1e6, 0, 0])}) if et == "f16" else True
    text = feed_error(m, {"x": np.zeros(3, "V2")})
    assert "an .npz cannot hold bfloat16" in text


def test_boolean_input(tmp_path):
    m = irrun.read_model(identity_model(tmp_path, et="boolean", shape="2", dims=(2,)))
    assert m.infer({"x": [True, False]})["x"].tolist() == [True, False]
    assert "got int64 values for a boolean input" in feed_error(m, {"x": [1, 0]})
    assert "got float64 values for a boolean input" in feed_error(m, {"x": [1.0, 0.0]})


def test_feed_given_twice_under_two_names(tmp_path):
    layers = (f'<layer id="0" name="x" type="Parameter" version="opset1">'
              f'<data shape="2" element_type="f32"/><output>{port(0, "FP32", (2,), "x,alias")}'
              f'</output></layer>' + result(1, "out", "f32", (2,)))
    m = irrun.read_model(write_ir(tmp_path, layers, edge(0, 1)))
    text = feed_error(m, {"x": [1.0, 2.0], "alias": [1.0, 2.0]})
    # Known by the least of its names, as OpenVINO's get_any_name() gives it.
    assert "input 'alias' is given twice (as 'x' and 'alias')" in text


# ---- input files through the CLI: one line, exit 1

def cli_error(*args) -> str:
    r = run_cli(*args)
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1, r.output
    assert "Traceback" not in r.output
    return lines[0]


def test_cli_runs_a_good_npz(two_inputs, tmp_path):
    _, xml = two_inputs
    np.savez(tmp_path / "in.npz", x=X, ids=IDS)
    r = run_cli(xml, "--inputs", tmp_path / "in.npz", "--output", tmp_path / "out.npz")
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_array_equal(z["ids"], IDS)


def test_cli_npz_with_unknown_and_missing_names(two_inputs, tmp_path):
    _, xml = two_inputs
    np.savez(tmp_path / "in.npz", x=X, idz=IDS)
    assert "unknown input name 'idz'" in cli_error(xml, "--inputs", tmp_path / "in.npz")
    np.savez(tmp_path / "in2.npz", x=X)
    assert "missing input: ids: i32[3]" in cli_error(xml, "--inputs", tmp_path / "in2.npz")


def test_cli_npz_with_lossy_dtype(two_inputs, tmp_path):
    _, xml = two_inputs
    np.savez(tmp_path / "in.npz", x=X, ids=IDS.astype(np.float64))
    line = cli_error(xml, "--inputs", tmp_path / "in.npz")
    assert f"{xml}:" in line and "input 'ids': got float64 values for an integer input" in line


def test_cli_npz_object_array_is_never_unpickled(two_inputs, tmp_path):
    _, xml = two_inputs
    marker = tmp_path / "unpickled"
    np.savez(tmp_path / "in.npz", x=X, ids=np.array([Boom(marker)], dtype=object))
    line = cli_error(xml, "--inputs", tmp_path / "in.npz")
    assert "input 'ids' is an object array" in line and "never unpickles" in line
    assert not marker.exists()


class Boom:
    """Unpickling this would create a file: proof that nothing was unpickled."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_cli_truncated_npz(two_inputs, tmp_path):
    _, xml = two_inputs
    np.savez(tmp_path / "in.npz", x=np.zeros((2, 1000), np.float32), ids=IDS)
    data = (tmp_path / "in.npz").read_bytes()
    for cut in (len(data) // 2, len(data) - 30, 100):
        (tmp_path / "cut.npz").write_bytes(data[:cut])
        line = cli_error(xml, "--inputs", tmp_path / "cut.npz")
        assert line.startswith(f"{tmp_path / 'cut.npz'}: error: ") and "inputs file" in line


def test_cli_truncated_member_inside_a_valid_zip(two_inputs, tmp_path):
    _, xml = two_inputs
    np.savez(tmp_path / "in.npz", x=X, ids=IDS)
    with zipfile.ZipFile(tmp_path / "in.npz") as z:
        members = {n: z.read(n) for n in z.namelist()}
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as z:
        z.writestr("x.npy", members["x.npy"][:-5])
        z.writestr("ids.npy", members["ids.npy"])
    line = cli_error(xml, "--inputs", tmp_path / "bad.npz")
    assert "input 'x' is truncated" in line


@pytest.mark.parametrize("content", [b"", b"hello, world\n", b"PK\x03\x04garbage" * 3,
                                     b"\x93NUMPY\x01\x00"])
def test_cli_not_an_npz(two_inputs, tmp_path, content):
    _, xml = two_inputs
    (tmp_path / "in.npz").write_bytes(content)
    line = cli_error(xml, "--inputs", tmp_path / "in.npz")
    assert "not an .npz" in line


def test_cli_npy_instead_of_npz(two_inputs, tmp_path):
    _, xml = two_inputs
    np.save(tmp_path / "in.npy", X)
    assert "not an .npz" in cli_error(xml, "--inputs", tmp_path / "in.npy")


def test_cli_npz_header_declaring_a_huge_array(two_inputs, tmp_path):
    """A 100-byte member whose header claims 8 EB: refused before anything is allocated."""
    _, xml = two_inputs
    np.savez(tmp_path / "in.npz", x=X, ids=IDS)
    with zipfile.ZipFile(tmp_path / "in.npz") as z:
        ids = z.read("ids.npy")
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w") as z:
        z.writestr("x.npy", ids.replace(b"(3,)", b"(1000000000000000000,)".ljust(4)))
    line = cli_error(xml, "--inputs", tmp_path / "bomb.npz")
    assert "input 'x' declares shape [1000000000000000000]" in line and "limit" in line


def test_cli_missing_inputs_file(two_inputs, tmp_path):
    _, xml = two_inputs
    assert "no such inputs file" in cli_error(xml, "--inputs", tmp_path / "nope.npz")


def test_cli_missing_model_file(tmp_path):
    line = cli_error(tmp_path / "nope.xml", "--inputs", tmp_path / "in.npz")
    assert f"{tmp_path / 'nope.xml'}: error: no such model file" in line
    with pytest.raises(ReadError):
        irrun.read_model(tmp_path / "nope.xml")


def test_missing_bin_file(tmp_path):
    blob = np.array([1, 2], np.float32).tobytes()
    xml = write_ir(tmp_path, const(0, "w", "f32", "2", 0, 8, (2,)) + result(1, "out", "f32", (2,)),
                   edge(0, 1), blob)
    assert irrun.read_model(xml).infer({})["out"].tolist() == [1.0, 2.0]
    (tmp_path / "model.bin").unlink()
    line = cli_error(xml)
    assert line.startswith(f"{xml}:") and "error:" in line
    assert f"cannot read the weights file '{tmp_path / 'model.bin'}'" in line
    with pytest.raises(ModelError):
        irrun.read_model(xml)


# ------------------------------------------------------------------ memory and CPU bombs

def test_max_tensor_bytes_default_and_env(monkeypatch):
    monkeypatch.delenv("IRRUN_MAX_BYTES", raising=False)
    default = irrun_weights.max_tensor_bytes()
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < default <= ram // 2
    for text, want in [("1000", 1000), ("64M", 64 << 20), ("2G", 2 << 30), ("1.5k", 1536),
                       ("512MiB", 512 << 20)]:
        monkeypatch.setenv("IRRUN_MAX_BYTES", text)
        assert irrun_weights.max_tensor_bytes() == want
    for bad in ("lots", "-5", "inf", "nan"):
        monkeypatch.setenv("IRRUN_MAX_BYTES", bad)
        with pytest.raises(ResourceError, match="is not a byte count"):
            irrun_weights.max_tensor_bytes()


def test_check_alloc(monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1M")
    check = irrun_weights.check_alloc
    assert check((256, 1024), np.float32, "out") == 256 * 1024
    assert check((0, 10**18), np.float32, "out") == 0
    with pytest.raises(ResourceError, match=r"^<model>: error: output 0 \(num_segments=1000000\): "
                       r"shape \[1000000, 4\] of float32 needs 16000000 bytes, more than the limit "
                       r"of 1048576 bytes"):
        check((1000000, 4), np.float32, "output 0 (num_segments=1000000)")
    with pytest.raises(ResourceError, match="overflows int64"):
        check((2**32, 2**32), np.uint8, "out")
    with pytest.raises(ResourceError, match="overflows int64"):
        check((10**200, 10**200), "f32", "out")
    with pytest.raises(ResourceError, match="has a dimension that overflows int64"):
        check((2**64, 0), np.float32, "out")
    with pytest.raises(ResourceError, match="negative dimension"):
        check((3, -1), np.float32, "out")
    assert check((8 * 2**20,), "u1", "bits") == 8 * 2**20     # packed sub-byte types


def test_const_larger_than_its_bin_slice(tmp_path):
    xml = write_ir(tmp_path, const(0, "w", "f32", "1000,1000", 0, 16, (1000, 1000))
                   + result(1, "out", "f32", (1000, 1000)), edge(0, 1), b"\0" * 16)
    [d] = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert (d.layer_name, d.code) == ("w", "const-size")
    assert "size=16 bytes is smaller than the 4000000 bytes that shape [1000, 1000] of f32 " \
           "needs" in d.message


def test_const_running_past_the_end_of_the_bin(tmp_path):
    xml = write_ir(tmp_path, const(0, "w", "f32", "4", 8, 16, (4,)) + result(1, "out", "f32", (4,)),
                   edge(0, 1), b"\0" * 16)
    [d] = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert (d.layer_name, d.code) == ("w", "const-offset") and "runs past the end" in d.message


def test_const_over_the_limit_is_refused_before_allocating(tmp_path, monkeypatch):
    """A 4 GB Const whose size= and .bin would be big enough: refused, and nothing allocated."""
    import tracemalloc
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1M")
    need = 100000 * 10000 * 4
    xml = write_ir(tmp_path, const(0, "w", "f32", "100000,10000", 0, need, (100000, 10000))
                   + result(1, "out", "f32", (100000, 10000)), edge(0, 1))
    with open(tmp_path / "model.bin", "wb") as f:    # sparse file: no disk used
        f.truncate(need)
    tracemalloc.start()
    try:
        diags = irrun.validate(xml)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    [d] = [d for d in diags if d.severity == "error"]
    assert (d.layer_name, d.code, d.line) == ("w", "too-large", 4)
    assert f"shape [100000, 10000] of f32 needs {need} bytes, more than the limit of 1048576" \
        in d.message
    assert peak < 8 << 20


def test_const_shape_overflowing_int64(tmp_path):
    xml = write_ir(tmp_path, const(0, "w", "i64", "4294967296,4294967296,4", 0, 8, (1,))
                   + result(1, "out", "i64", (1,)), edge(0, 1), b"\0" * 8)
    [d] = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert d.layer_name == "w" and "73786976294838206464 elements, which overflows int64" in d.message


@pytest.mark.parametrize("shape, dims", [("100000,100000,100000", (100000,) * 3),
                                         ("100000..,100000,100000", (-1, 100000, 100000))])
def test_parameter_with_a_huge_shape_is_refused_at_load_time(tmp_path, shape, dims):
    xml = identity_model(tmp_path, shape=shape, dims=dims)
    with pytest.raises(ModelError) as info:
        irrun.read_model(xml)
    d = info.value.diagnostics[0]
    assert (d.layer_name, d.code) == ("x", "too-large")
    assert "shape [100000, 100000, 100000] of f32 needs 4000000000000000 bytes" in d.message
    line = cli_error(xml, "--inputs", tmp_path / "unused.npz")
    assert line.startswith(f"{xml}:") and "layer 'x' (Parameter-opset1)" in line


# ------------------------------------------------------------------ run-time values

EXTENSION = '''
"""Test ops for tests/test_robust.py: a kernel bug, and a Range-like op with a value-dependent size."""
import numpy as np
from irrun.ir.registry import register
from irrun.ir.shapes import TensorSpec
from irrun.ir.weights import check_alloc

CALLS = []


@register("IrrunTestIndexBug", since=1, category="test")
class IndexBug1:
    @staticmethod
    def infer(attrs, x):
        return [x]

    @staticmethod
    def run(attrs, x):
        return (x[np.array([10**6])],)     # IndexError from deep inside NumPy


@register("IrrunTestAlloc", since=1, category="test")
class Alloc1:
    """out = zeros(n) of f32: the output size comes from a value, like Range or num_segments."""

    @staticmethod
    def infer(attrs, n):
        if n.value is not None:
            return [TensorSpec.make("f32", [int(n.value)])]
        return [TensorSpec.make("f32", [None])]

    @staticmethod
    def run(attrs, n):
        CALLS.append(int(n))
        count = int(n)
        check_alloc((count,), np.float32, f"output 0 (n={count})")
        return (np.zeros(count, np.float32),)
'''


@pytest.fixture(scope="module")
def test_ops(tmp_path_factory):
    path = tmp_path_factory.mktemp("ext") / "robust_test_ops.py"
    path.write_text(EXTENSION)
    from irrun.ir.registry import load_extension, registered_versions, unregister
    loaded = not registered_versions("IrrunTestAlloc")
    if loaded:
        load_extension(path)
    yield path
    if loaded:      # the registry is global: leave it as the other test files expect it
        for op_type in ("IrrunTestIndexBug", "IrrunTestAlloc"):
            unregister(op_type, 1)


def op_layer(lid, name, type_, in_et, in_dims, out_et, out_dims):
    return (f'<layer id="{lid}" name="{name}" type="{type_}" version="opset1">'
            f'<input>{port(0, in_et, in_dims)}</input>'
            f'<output>{port(1, out_et, out_dims)}</output></layer>')


def chain(tmp_path, first: str, type_, in_et, in_dims, out_dims, blob=b""):
    """first (layer 0) -> type_ (layer 1) -> Result (layer 2)."""
    layers = first + op_layer(1, "op", type_, in_et, in_dims, "FP32", out_dims) + \
        result(2, "out", "f32", out_dims)
    return write_ir(tmp_path, layers, edge(0, 1) + '<edge from-layer="1" from-port="1" '
                    'to-layer="2" to-port="0"/>', blob)


def test_kernel_index_error_is_an_internal_op_error(tmp_path, test_ops):
    xml = chain(tmp_path, parameter(0, "x", "f32", "3", (3,)), "IrrunTestIndexBug", "FP32",
                (3,), (3,))
    m = irrun.read_model(xml)
    with pytest.raises(OpError) as info:
        m.infer({"x": np.zeros(3, np.float32)})
    assert not isinstance(info.value, IndexError)
    op_line = line_of(xml, 'name="op"')
    assert str(info.value).startswith(f"{xml}:{op_line}: error: layer 'op' "
                                      "(IrrunTestIndexBug-opset1): internal error in the kernel: "
                                      "IndexError")
    np.savez(tmp_path / "in.npz", x=np.zeros(3, np.float32))
    r = run_cli("--extension", test_ops, xml, "--inputs", tmp_path / "in.npz")
    assert r.exit_code == 1
    assert r.output.count("\n") == 1 and "internal error in the kernel: IndexError" in r.output
    assert "Traceback" not in r.output


def test_traceback_flag_shows_the_stack(tmp_path, test_ops):
    xml = chain(tmp_path, parameter(0, "x", "f32", "3", (3,)), "IrrunTestIndexBug", "FP32",
                (3,), (3,))
    np.savez(tmp_path / "in.npz", x=np.zeros(3, np.float32))
    args = [sys.executable, "-m", "irrun", "--extension", str(test_ops), "--traceback", str(xml),
            "--inputs", str(tmp_path / "in.npz")]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert "IndexError" in proc.stderr and "return (x[np.array([10**6])],)" in proc.stderr
    plain = subprocess.run([a for a in args if a != "--traceback"], capture_output=True,
                           text=True, timeout=120)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    assert plain.stderr.strip().count("\n") == 0


def test_value_dependent_size_refused_at_run_time(tmp_path, test_ops, monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1M")
    from irrun.ir.registry import registered_versions
    calls = sys.modules[registered_versions("IrrunTestAlloc")[0].impl.__module__].CALLS
    xml = chain(tmp_path, parameter(0, "n", "i64", "", ()), "IrrunTestAlloc", "I64", (), (-1,))
    m = irrun.read_model(xml)
    assert m.infer({"n": 5})["out"].tolist() == [0.0] * 5
    with pytest.raises(ResourceError) as info:
        m.infer({"n": 10**9})
    op_line = line_of(xml, 'name="op"')
    # The executor runs the shape rule on the real inputs first, so the kernel is not even
    # called (its own check_alloc would say the same).
    assert str(info.value).startswith(f"{xml}:{op_line}: error: layer 'op' "
                                      "(IrrunTestAlloc-opset1): output 0")
    assert "shape [1000000000] of f32 needs 4000000000 bytes" in str(info.value)
    assert 10**9 not in calls
    np.savez(tmp_path / "in.npz", n=np.int64(10**9))
    assert "needs 4000000000 bytes" in cli_error("--extension", test_ops, xml, "--inputs",
                                                 tmp_path / "in.npz")
    calls.clear()
    # The same op on a constant n: refused at load time, before constant folding runs it.
    blob = np.int64(10**9).tobytes()
    (tmp_path / "const").mkdir()
    xml2 = chain(tmp_path / "const", const(0, "n", "i64", "", 0, 8, ()),
                 "IrrunTestAlloc", "I64", (), (10**9,), blob)
    [d] = [d for d in irrun.validate(xml2) if d.severity == "error"]
    assert (d.layer_name, d.code) == ("op", "too-large") and "4000000000 bytes" in d.message
    assert calls == []


# ---- bad values in the real seed ops: irrun's OpError with the layer and the position

MODELS = Path(__file__).resolve().parent.parent / "models"


def test_out_of_range_index_in_embedding_segments_sum(tmp_path):
    xml = MODELS / "ess_spec" / "model.xml"
    with np.load(MODELS / "ess_spec" / "inputs.npz") as z:
        feed = {k: z[k] for k in z.files}
    feed["indices"] = np.array([0, 2, 7, 4], np.int32)
    with pytest.raises(OpError) as info:
        irrun.read_model(xml).infer(feed)
    d = info.value.diagnostic
    assert (d.file, d.layer_name, d.op) == (str(xml), "ess", "EmbeddingSegmentsSum-opset3")
    assert d.line == line_of(xml, 'name="ess"')
    assert "indices[2] is 7" in d.message
    np.savez(tmp_path / "in.npz", **feed)
    line = cli_error(xml, "--inputs", tmp_path / "in.npz")
    assert line.startswith(f"{xml}:{d.line}: error: layer 'ess'") and "indices[2] is 7" in line


def test_sequence_length_beyond_the_data_in_ctc_greedy_decoder(tmp_path):
    xml = MODELS / "ctc_spec" / "model.xml"
    with np.load(MODELS / "ctc_spec" / "inputs.npz") as z:
        feed = {k: z[k] for k in z.files}
    feed["sequence_length"] = feed["sequence_length"].copy()
    feed["sequence_length"][3] = 21
    with pytest.raises(OpError) as info:
        irrun.read_model(xml).infer(feed)
    d = info.value.diagnostic
    assert d.op == "CTCGreedyDecoderSeqLen-opset6" and d.line is not None
    assert "sequence_length[3] = 21" in d.message


def test_unsorted_boundaries_in_bucketize(tmp_path):
    layers = (parameter(0, "data", "f32", "3", (3,)) + parameter(1, "b", "f32", "3", (3,)) +
              '<layer id="2" name="bucketize" type="Bucketize" version="opset3">'
              '<data output_type="i64" with_right_bound="true"/>'
              f'<input>{port(0, "FP32", (3,))}{port(1, "FP32", (3,))}</input>'
              f'<output>{port(2, "I64", (3,))}</output></layer>' + result(3, "out", "i64", (3,)))
    edges = ('<edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>'
             '<edge from-layer="1" from-port="0" to-layer="2" to-port="1"/>'
             '<edge from-layer="2" from-port="2" to-layer="3" to-port="0"/>')
    m = irrun.read_model(write_ir(tmp_path, layers, edges))
    data = np.array([0.5, 2.5, 9], np.float32)
    assert m.infer({"data": data, "b": np.array([1, 2, 3], np.float32)})["out"].tolist() == [0, 2, 3]
    for bad, where in ((np.array([1, 3, 2], np.float32), "boundaries[1]"),
                       (np.array([1, np.nan, 3], np.float32), "boundaries[1] is NaN")):
        with pytest.raises(OpError) as info:
            m.infer({"data": data, "b": bad})
        d = info.value.diagnostic
        assert (d.layer_name, d.op) == ("bucketize", "Bucketize-opset3") and where in d.message


# ---- shapes only known at run time: the op's shape rule runs on the real inputs first

def test_dynamic_rank_input_of_the_wrong_rank_is_a_shape_error(tmp_path):
    text = (MODELS / "ctc_spec" / "model.xml").read_text()
    assert 'shape="8,20,128"' in text
    xml = tmp_path / "model.xml"
    xml.write_text(text.replace('shape="8,20,128"', 'shape="..."'))
    shutil_copy(MODELS / "ctc_spec" / "model.bin", tmp_path / "model.bin")
    m = irrun.read_model(xml)
    with pytest.raises(IrrunError) as info:
        m.infer({"data": np.zeros(4, np.float32), "sequence_length": np.ones(8, np.int32)})
    d = info.value.diagnostic
    assert d.op == "CTCGreedyDecoderSeqLen-opset6" and d.line == line_of(xml, "CTCGreedyDecoderSeqLen")
    assert d.code == "shape" and "data must be 3-D [N, T, C]; got shape [4]" in d.message


def shutil_copy(a, b):
    Path(b).write_bytes(Path(a).read_bytes())


def test_range_with_an_absurd_size_is_refused_before_allocating(tmp_path, monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1M")
    layers = (parameter(0, "start", "i64", "", ()) + parameter(1, "stop", "i64", "", ()) +
              parameter(2, "step", "i64", "", ()) +
              '<layer id="3" name="range" type="Range" version="opset4">'
              '<data output_type="i64"/>'
              f'<input>{port(0, "I64", ())}{port(1, "I64", ())}{port(2, "I64", ())}</input>'
              f'<output>{port(3, "I64", (-1,))}</output></layer>' + result(4, "out", "i64", (-1,)))
    edges = "".join(f'<edge from-layer="{i}" from-port="0" to-layer="3" to-port="{i}"/>'
                    for i in range(3)) + '<edge from-layer="3" from-port="3" to-layer="4" to-port="0"/>'
    xml = write_ir(tmp_path, layers, edges)
    m = irrun.read_model(xml)
    assert m.infer({"start": 0, "stop": 5, "step": 2})["out"].tolist() == [0, 2, 4]
    with pytest.raises(ResourceError) as info:
        m.infer({"start": 0, "stop": 10**12, "step": 1})
    d = info.value.diagnostic
    assert (d.layer_name, d.op) == ("range", "Range-opset4")
    assert "shape [1000000000000] of i64 needs 8000000000000 bytes" in d.message


@pytest.mark.parametrize("body", ["<a>" * 100000 + "</a>" * 100000,
                                  '<layer id="1" name="%s"/>' % ("A" * 20_000_000)])
def test_deep_nesting_and_huge_text_hit_the_parser_limits(tmp_path, body):
    """No huge-tree mode: libxml2's depth and node-size limits stay on."""
    xml = tmp_path / "model.xml"
    xml.write_text(f'<?xml version="1.0"?>\n<net name="d" version="11"><layers>{body}</layers></net>')
    [d] = irrun.validate(xml)
    assert (d.code, d.line) == ("xml", 2) and "\n" not in str(d)
    assert "XML is not well formed" in d.message and "XML_PARSE_HUGE" in d.message
    assert cli_error(xml).startswith(f"{xml}:2: error: XML is not well formed")


def test_validate_command_on_attack_files():
    files = [ATTACKS / n for n in STATIC_ATTACKS]
    r = run_cli("validate", *files)
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == len(files) + 1 and lines[-1] == f"{len(files)} files: {len(files)} errors, 0 warnings"
    assert all(": error: the file declares a DTD" in line for line in lines[:-1])
    assert "root:" not in r.output


def test_weights_that_are_not_a_regular_file(tmp_path):
    xml = write_ir(tmp_path, const(0, "w", "f32", "2", 0, 8, (2,)) + result(1, "out", "f32", (2,)),
                   edge(0, 1), b"\0" * 8)
    fifo = tmp_path / "fifo.bin"
    os.mkfifo(fifo)
    errors = [d for d in irrun.validate(xml, fifo) if d.severity == "error"]
    assert len(errors) == 1 and "not a regular file" in errors[0].message
    line = cli_error(xml, "--weights", fifo)
    assert "cannot read the weights file" in line and "not a regular file" in line


@pytest.mark.parametrize("where", ["version", "id", "dim", "shape", "ir-version"])
def test_numbers_with_thousands_of_digits(tmp_path, where):
    """int() refuses strings over 4300 digits with a ValueError: each place reports it."""
    big = "9" * 5000
    xml = identity_model(tmp_path, shape="2", dims=(2,))
    text = xml.read_text()
    text = {"version": text.replace('version="opset1"', f'version="opset{big}"', 1),
            "id": text.replace('<layer id="0"', f'<layer id="{big}"'),
            "dim": text.replace("<dim>2</dim>", f"<dim>{big}</dim>", 1),
            "shape": text.replace('shape="2"', f'shape="{big}"'),
            "ir-version": text.replace('version="11"', f'version="{big}"')}[where]
    xml.write_text(text)
    errors = [d for d in irrun.validate(xml) if d.severity == "error"]
    assert errors and all(d.line is not None for d in errors)
    with pytest.raises(ModelError):
        irrun.read_model(xml)
