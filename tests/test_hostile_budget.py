"""Sizes that come from tensor values, not shapes, held to the memory budget before the work
starts. Each small file asks for many times the budget (IRRUN_MAX_BYTES, 1 MiB here); irrun
refuses it with one located error line, and the memory traced while it does so stays below a
few budgets (the kernel did not make first and check after)."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner

import irrun
from irrun.ui.cli import cli

ov = pytest.importorskip("openvino")

BUDGET = 1 << 20


@pytest.fixture(autouse=True)
def budget(monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(BUDGET))


def save(tmp_path, outputs, params):
    xml = tmp_path / "m.xml"
    ov.save_model(ov.Model(outputs, params), xml, compress_to_fp16=False)
    return xml


def assert_located(e, xml, layer, op, *words):
    """One FILE:LINE: error line naming the layer and the op, and the budget."""
    text = str(e)
    assert text.startswith(f"{xml}:") and f"layer '{layer}' ({op}" in text, text
    assert "IRRUN_MAX_BYTES" in text and "internal error" not in text, text
    for w in words:
        assert w in text, text


def traced(call):
    """call()'s exception and the peak of the memory traced while it ran."""
    tracemalloc.start()
    try:
        with pytest.raises(irrun.IrrunError) as info:
            call()
        return info.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refused(xml, feed, layer, op, *words):
    m = irrun.read_model(xml)
    e, peak = traced(lambda: m.infer(feed))
    assert peak < 3 * BUDGET, f"{peak} bytes traced: made before it was checked ({e})"
    assert_located(e, xml, layer, op, *words)


# ---------------------------------------------------------------- StringTensorPack-15


def pack(o15, begins, ends, symbols):
    p = o15.string_tensor_pack(begins, ends, symbols)
    p.set_friendly_name("pack")
    return p


def test_string_tensor_pack_of_overlapping_ranges(tmp_path):
    """256 strings, each the whole 64 KiB of symbols: 16 MiB of strings from 66 KiB."""
    import openvino.opset15 as o15

    n, size = 256, 1 << 16
    params = [o15.parameter([n], np.int32, name="b"), o15.parameter([n], np.int32, name="e"),
              o15.parameter([size], np.uint8, name="s")]
    xml = save(tmp_path, [pack(o15, *params).output(0)], params)
    feed = {"b": np.zeros(n, np.int32), "e": np.full(n, size, np.int32),
            "s": np.full(size, 97, np.uint8)}
    refused(xml, feed, "pack", "StringTensorPack", "the sum of ends - begins", str(n * size))


def test_string_tensor_pack_of_constants_is_refused_at_load(tmp_path):
    """Folded at load: the fold meets the same check, an error of the file for validate."""
    import openvino.opset15 as o15

    n, size = 256, 1 << 16
    p = pack(o15, o15.constant(np.zeros(n, np.int32)), o15.constant(np.full(n, size, np.int32)),
             o15.constant(np.full(size, 97, np.uint8)))
    xml = save(tmp_path, [p.output(0)], [])
    e, peak = traced(lambda: irrun.read_model(xml))
    assert peak < 3 * BUDGET, peak
    assert isinstance(e, irrun.ModelError)
    assert_located(e, xml, "pack", "StringTensorPack", "all inputs are constant")
    done = CliRunner().invoke(cli, ["validate", str(xml)])
    assert done.exit_code == 1 and "Traceback" not in done.output, done.output
    errors = [ln for ln in done.output.splitlines() if ": error: " in ln]
    assert len(errors) == 1 and "'pack' (StringTensorPack" in errors[0], done.output
    assert "1 file: 1 error" in done.output


# ---------------------------------------------------------------- StringTensorUnpack-15


@pytest.mark.parametrize("copies,length", [(256, 1 << 16), (8192, 1 << 11)])
def test_string_tensor_unpack_of_many_references_to_one_string(tmp_path, copies, length):
    """A Tile of one string: 8 bytes a copy, 16 MiB of symbols. 256 copies are few enough
    for the shape rule to see their value at run time (it counts the symbols too); 8192
    reach the kernel."""
    import openvino.opset15 as o15

    params = [o15.parameter([1], np.int32, name="b"), o15.parameter([1], np.int32, name="e"),
              o15.parameter([length], np.uint8, name="s")]
    tiled = o15.tile(pack(o15, *params), o15.constant(np.int64([copies])))
    u = o15.string_tensor_unpack(tiled)
    u.set_friendly_name("unpack")
    xml = save(tmp_path, [u.output(2)], params)
    feed = {"b": np.zeros(1, np.int32), "e": np.full(1, length, np.int32),
            "s": np.full(length, 97, np.uint8)}
    refused(xml, feed, "unpack", "StringTensorUnpack", "symbols (output 2)")


# ---------------------------------------------------------------- SparseFillEmptyRows-16


def test_sparse_fill_empty_rows_of_a_large_dense_shape(tmp_path):
    """One value, dense_shape [524288, 1]: a 512 KiB row indicator, but 8 MiB of
    output_indices for the rows it fills."""
    import openvino.opset16 as o16

    params = [o16.parameter([1], np.float32, name="v"), o16.parameter([2], np.int64, name="ds"),
              o16.parameter([1, 2], np.int64, name="ix"), o16.parameter([], np.float32, name="dv")]
    s = o16.sparse_fill_empty_rows(*params)
    s.set_friendly_name("sfer")
    xml = save(tmp_path, [s.output(i) for i in range(3)], params)
    feed = {"v": np.ones(1, np.float32), "ds": np.int64([1 << 19, 1]),
            "ix": np.zeros((1, 2), np.int64), "dv": np.float32(0)}
    refused(xml, feed, "sfer", "SparseFillEmptyRows", "output_indices")


# ---------------------------------------------------------------- RandomUniform-8, Multinomial-13


@pytest.mark.parametrize("alignment", ["tensorflow", "pytorch"])
@pytest.mark.parametrize("etype,lo,hi", [("f32", 0, 1), ("i64", 0, 2 ** 40)])
def test_random_uniform_random_bits(tmp_path, alignment, etype, lo, hi):
    """An output of 3/4 of the budget: its random words, as uint64, are twice that (one a
    value for f32, two for i64 of a range past 32 bits)."""
    import openvino.opset8 as o8

    dtype = {"f32": np.float32, "i64": np.int64}[etype]
    count = 3 * BUDGET // 4 // np.dtype(dtype).itemsize
    shape = o8.parameter([1], np.int64, name="shape")
    r = o8.random_uniform(shape, o8.constant(np.array(lo, dtype)), o8.constant(np.array(hi, dtype)),
                          etype, 1, 2, alignment)
    r.set_friendly_name("ru")
    xml = save(tmp_path, [r.output(0)], [shape])
    refused(xml, {"shape": np.int64([count])}, "ru", "RandomUniform", "random bits")


@pytest.mark.parametrize("classes,samples,words", [(4, 3 * BUDGET // 16, "samples"),
                                                   (3 * BUDGET // 16, 1, "sorted keys")])
def test_multinomial_intermediates(tmp_path, classes, samples, words):
    """An i32 output of 3/4 of the budget: its samples as int64 are twice that; or
    probabilities of as much (f32), searched as int64 keys of twice that."""
    import openvino.opset13 as o13

    probs = o13.parameter([1, classes], np.float32, name="p")
    count = o13.parameter([], np.int64, name="n")
    m = o13.multinomial(probs, count, "i32", True, False, 1, 2)
    m.set_friendly_name("mn")
    xml = save(tmp_path, [m.output(0)], [probs, count])
    feed = {"p": np.ones((1, classes), np.float32), "n": np.int64(samples)}
    refused(xml, feed, "mn", "Multinomial", words)


# ---------------------------------------------------------------- STFT-15, ISTFT-16


def stft_model(tmp_path, signal_shape, window):
    import openvino.opset15 as o15

    params = [o15.parameter(signal_shape, np.float32, name="x"),
              o15.parameter([window], np.float32, name="w"),
              o15.parameter([], np.int64, name="n"), o15.parameter([], np.int64, name="step")]
    t = o15.stft(*params, False)
    t.set_friendly_name("stft")
    return save(tmp_path, [t.output(0)], params)


def test_stft_windowed_frames(tmp_path):
    """177 frames of 1024 samples, step 1: an output of 0.7 MiB (f32 pairs of 513 bins),
    its windowed frames in f64 1.4 MiB."""
    xml = stft_model(tmp_path, [1200], 1024)
    feed = {"x": np.ones(1200, np.float32), "w": np.ones(1024, np.float32),
            "n": np.int64(1024), "step": np.int64(1)}
    refused(xml, feed, "stft", "STFT", "windowed frames")


def test_stft_of_an_empty_batch_makes_nothing(tmp_path):
    """No signal, however long its rows say they are: an empty output of OpenVINO's shape,
    without a window of frame_size (10**7 samples) or anything else."""
    length, n = 2 * 10 ** 7, 10 ** 7
    xml = stft_model(tmp_path, [0, length], 4)
    feed = {"x": np.zeros((0, length), np.float32), "w": np.ones(4, np.float32),
            "n": np.int64(n), "step": np.int64(1)}
    m = irrun.read_model(xml)
    tracemalloc.start()
    try:
        out = m.infer(feed)[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    want = ov.Core().compile_model(xml, "CPU")(feed)[0]
    assert out.shape == want.shape == (0, length - n + 1, n // 2 + 1, 2)
    assert out.dtype == np.float32 and peak < BUDGET, peak


def istft_model(tmp_path, data_shape, n, step):
    import openvino.opset16 as o16

    params = [o16.parameter(data_shape, np.float32, name="x"),
              o16.parameter([n], np.float32, name="w")]
    t = o16.istft(*params, o16.constant(np.int64(n)), o16.constant(np.int64(step)), False, False)
    t.set_friendly_name("istft")
    return save(tmp_path, [t.output(0)], params)


def test_istft_frames(tmp_path):
    """160 frames of 1024 samples from 0.6 MiB of f32 data: 1.25 MiB of frames in f64."""
    shape = [513, 160, 2]
    xml = istft_model(tmp_path, shape, 1024, 16)
    refused(xml, {"x": np.ones(shape, np.float32), "w": np.ones(1024, np.float32)},
            "istft", "ISTFT", "ISTFT's frames")


def test_istft_of_an_empty_batch_is_empty(tmp_path):
    """No data, however many frames it says it has: an empty output of OpenVINO's shape
    (the overlap-add positions of 10**6 frames are not made; it was an internal error)."""
    shape = [0, 3, 10 ** 6, 2]
    xml = istft_model(tmp_path, shape, 4, 1)
    feed = {"x": np.zeros(shape, np.float32), "w": np.ones(4, np.float32)}
    m = irrun.read_model(xml)
    tracemalloc.start()
    try:
        out = m.infer(feed)[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    want = ov.Core().compile_model(xml, "CPU")(feed)[0]
    assert out.shape == want.shape and out.dtype == want.dtype and peak < BUDGET, peak


# ---------------------------------------------------------------- --output of strings


def test_output_of_strings_too_wide_for_an_npz(tmp_path):
    """1000 strings, one of them 1000 characters: NumPy's fixed-width unicode array of them
    is 4 MB. Refused at the Result, saying what to do, and nothing is written."""
    import openvino.opset15 as o15

    n, size = 1000, 1000
    params = [o15.parameter([n], np.int32, name="b"), o15.parameter([n], np.int32, name="e"),
              o15.parameter([size], np.uint8, name="s")]
    p = pack(o15, *params)
    p.output(0).get_tensor().set_names({"text"})
    xml = save(tmp_path, [p.output(0)], params)
    ends = np.zeros(n, np.int32)
    ends[-1] = size
    np.savez(tmp_path / "x.npz", b=np.zeros(n, np.int32), e=ends, s=np.full(size, 97, np.uint8))
    out = tmp_path / "out.npz"
    done = CliRunner().invoke(cli, [str(xml), "--inputs", str(tmp_path / "x.npz"), "-o", str(out)])
    assert done.exit_code == 1 and "Traceback" not in done.output, done.output
    errors = [ln for ln in done.output.splitlines() if ": error: " in ln]
    assert len(errors) == 1, done.output
    assert errors[0].startswith(f"{xml}:") and "(Result" in errors[0], done.output
    for words in ("'text' holds 1000 strings", "'<U1000'", "4000000 bytes", "IRRUN_MAX_BYTES",
                  ".infer(...)"):
        assert words in errors[0], done.output
    assert not out.exists()


def test_dump_of_a_string_tensor(tmp_path):
    """--dump writes a string tensor as --output does (it was an internal error: NumPy does
    not save object arrays without pickling), and refuses one too wide as --output does."""
    import json

    import openvino.opset15 as o15

    params = [o15.parameter([3], np.int32, name="b"), o15.parameter([3], np.int32, name="e"),
              o15.parameter([1000], np.uint8, name="s")]
    xml = save(tmp_path, [pack(o15, *params).output(0)], params)
    symbols = np.frombuffer(b"ab" + b"c" * 998, np.uint8)
    for ends, fits in (([1, 2, 2], True), ([1, 2, 1000], False)):
        np.savez(tmp_path / "x.npz", b=np.int32([0, 1, 2]), e=np.int32(ends), s=symbols)
        dump = tmp_path / f"dump{len(ends) * ends[-1]}"
        args = [str(xml), "--inputs", str(tmp_path / "x.npz"), "--dump", str(dump)]
        budget = "1M" if fits else "8000"    # 3 strings as wide as 998 characters: 11976 bytes
        done = CliRunner().invoke(cli, args, env={"IRRUN_MAX_BYTES": budget})
        assert "Traceback" not in done.output, done.output
        if fits:
            assert done.exit_code == 0, done.output
            entry = next(e for e in json.loads((dump / "index.json").read_text())
                         if e["layer"] == "pack")
            assert entry["dtype"] == "string" and entry["stored_as"] == "unicode"
            assert np.load(dump / entry["file"]).tolist() == ["a", "b", ""]
        else:
            errors = [ln for ln in done.output.splitlines() if ": error: " in ln]
            assert done.exit_code == 1 and len(errors) == 1, done.output
            assert errors[0].startswith(f"{xml}:") and "'pack' (StringTensorPack" in errors[0]
            assert "'output 0' holds 3 strings" in errors[0] and "'<U998'" in errors[0]


# ---------------------------------------------------------------- openvino_tokenizers' own


def _extension_model(tmp_path, op, inputs, outputs):
    """One openvino_tokenizers layer (version "extension") between Parameters and Results;
    `inputs` and `outputs` are (name, precision, element_type) with rank-1 dynamic shapes."""
    layers, edges = [], []
    for i, (name, precision, etype) in enumerate(inputs):
        layers.append(f'<layer id="{i}" name="{name}" type="Parameter" version="opset1">'
                      f'<data shape="?" element_type="{etype}"/><output><port id="0" '
                      f'precision="{precision}" names="{name}"><dim>-1</dim></port></output>'
                      '</layer>')
        edges.append(f'<edge from-layer="{i}" from-port="0" to-layer="100" to-port="{i}"/>')
    ports_in = "".join(f'<port id="{i}" precision="{p}"><dim>-1</dim></port>'
                       for i, (_, p, _) in enumerate(inputs))
    ports_out = "".join(f'<port id="{len(inputs) + j}" precision="{p}" names="{n}"><dim>-1'
                        '</dim></port>' for j, (n, p, _) in enumerate(outputs))
    layers.append(f'<layer id="100" name="tok" type="{op}" version="extension"><data '
                  f'mode="begins_ends"/><input>{ports_in}</input><output>{ports_out}</output>'
                  '</layer>')
    for j, (n, p, _) in enumerate(outputs):
        layers.append(f'<layer id="{200 + j}" name="{n}_r" type="Result" version="opset1">'
                      f'<input><port id="0" precision="{p}"><dim>-1</dim></port></input>'
                      '</layer>')
        edges.append(f'<edge from-layer="100" from-port="{len(inputs) + j}" '
                     f'to-layer="{200 + j}" to-port="0"/>')
    xml = tmp_path / "tok.xml"
    xml.write_text('<?xml version="1.0"?>\n<net name="tok" version="11"><layers>'
                   + "\n".join(layers) + "</layers><edges>" + "\n".join(edges)
                   + "</edges></net>\n")
    return xml


def test_tokenizers_string_tensor_pack_of_overlapping_ranges(tmp_path):
    """1,000 strings each spanning all 64 KiB of the chars: 64 MB of strings from 72 KB."""
    xml = _extension_model(tmp_path, "StringTensorPack",
                           [("b", "I32", "i32"), ("e", "I32", "i32"), ("c", "U8", "u8")],
                           [("s", "STRING", "string")])
    feed = {"b": np.zeros(1000, np.int32), "e": np.full(1000, 1 << 16, np.int32),
            "c": np.full(1 << 16, 97, np.uint8)}
    refused(xml, feed, "tok", "StringTensorPack", "ranges may overlap")


def test_tokenizers_string_tensor_unpack_of_many_references_to_one_string(tmp_path):
    """8,192 references to one 2 KiB string (64 KiB of feed): 16 MiB of chars."""
    xml = _extension_model(tmp_path, "StringTensorUnpack", [("s", "STRING", "string")],
                           [("b", "I32", "i32"), ("e", "I32", "i32"), ("c", "U8", "u8")])
    one = "a" * (1 << 11)
    feed = {"s": np.array([one] * 8192, dtype=object)}
    refused(xml, feed, "tok", "StringTensorUnpack", "chars")
