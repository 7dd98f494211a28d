"""Hostile attributes, Consts and inputs that tests/test_fuzz_attrs.py found: each is one
located error (file, line, layer, op; no "internal error") from validate or from a run, or the
output the op defines."""
from __future__ import annotations

import numpy as np
import pytest

import irrun
from irfiles import IRBuilder
from irrun.errors import IrrunError


def assert_located(text: str, op: str, *words):
    assert "internal error" not in text and "irrun bug" not in text, text
    assert "model.xml:" in text and op in text, text
    for w in words:
        assert w in text, text


def rejected(xml, op, *words):
    """validate reports the problem as an error of the file, and read_model refuses it."""
    errors = [str(d) for d in irrun.validate(xml) if d.severity == "error"]
    assert errors and not [d for d in irrun.validate(xml) if d.code == "internal"]
    assert_located("\n".join(errors), op, *words)
    with pytest.raises(IrrunError) as e:
        irrun.read_model(xml)
    assert_located(str(e.value), op, *words)


def run_fails(xml, feed, op, *words):
    """validate passes (the problem is in the values), the run reports a located error."""
    assert not [d for d in irrun.validate(xml) if d.severity == "error"]
    with pytest.raises(IrrunError) as e:
        irrun.read_model(xml).infer(feed)
    assert_located(str(e.value), op, *words)


def u8(data: bytes):
    return np.frombuffer(data, np.uint8)


# ---------------------------------------------------------------- tokenizer ops

def test_regex_normalization_replacement_that_is_not_utf8(tmp_path):
    """The replacement's bytes go into the string as they are (openvino_tokenizers passes
    bytes to PCRE2), even where they are not UTF-8."""
    b = IRBuilder()
    s = b.parameter("s", "string", "?", [-1])
    un = b.op("StringTensorUnpack", "extension", [s], [0], [1, 2, 3], {"mode": "begins_ends"})
    pattern, replace = b.const("pattern", u8(b"a"), "u8"), b.const("replace", u8(b"\xff"), "u8")
    rn = b.op("RegexNormalization", "extension", [(un, 1), (un, 2), (un, 3), pattern, replace],
              [0, 1, 2, 3, 4], [5, 6, 7], {"global_replace": "true"})
    pk = b.op("StringTensorPack", "extension", [(rn, 5), (rn, 6), (rn, 7)], [0, 1, 2], [3],
              {"mode": "begins_ends"})
    b.result((pk, 3), "out")
    out = irrun.read_model(b.write(tmp_path)).infer({"s": np.array(["cat", "b"], object)})
    assert out["out"].tolist() == ["c\udcfft", "b"]     # the byte 0xff as a surrogate escape


def combine_segments(tmp_path, elements_shape):
    b = IRBuilder()
    ins = []
    for k, shape in enumerate([[2], elements_shape]):
        ins += [b.parameter(f"b{k}", "i32", "1", [1]), b.parameter(f"e{k}", "i32", "1", [1]),
                b.const(f"x{k}", np.ones(shape, np.int32), "i32")]
    ins.append(b.const("ids", np.array([0, 1], np.int32), "i32"))
    cs = b.op("CombineSegments", "extension", ins, list(range(7)), list(range(7, 13)),
              name="combine")
    for p in range(7, 13):
        b.result((cs, p))
    return b.write(tmp_path)


@pytest.mark.parametrize("shape", [[1, 1], [], [2, 1, 1]])
def test_combine_segments_elements_that_are_not_1d(tmp_path, shape):
    rejected(combine_segments(tmp_path, shape), "CombineSegments", "'combine'",
             "expected 1-D elements (input 5)")
