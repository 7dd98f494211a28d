"""Builds one IR of openvino_tokenizers' normalization ops side by side, made with its node
factory (no tokenizer around them), so that each can be compared with OpenVINO alone:

    text string [?] --StringTensorUnpack--> begins, ends, chars
      --> NormalizeUnicode NFC / NFD / NFKC / NFKD             -> nfc, nfd, nfkc, nfkd
      --> CaseFold encoding "utf-8" / encoding "" (ASCII only)  -> fold_utf8, fold_ascii
      --> CharsMapNormalization nfkd + case_fold, with
          remove_extra_whitespaces and add_dummy_prefix         -> charsmap_nfkd_cf
      --> RegexNormalization "(\\p{Han})" -> " $1 " (global)     -> regex_han
      --> BytesToChars (one piece per string)                   -> bytes_to_chars
            --> CharsToBytes                                    -> chars_to_bytes
      --> StringTensorPack                                      string [?] each

Writes openvino_tokenizer.xml/.bin (a name tests/test_tokenizers.py reads) and oracle.npz:
for every ORACLE text and the batch, OpenVINO's outputs (here strings). Run in a venv with
openvino and openvino-tokenizers: `python models/tok_normalizers/build.py`.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tokenizer_texts import ORACLE_BATCH, ORACLE_TEXTS  # noqa: E402


def build_model():
    import openvino as ov
    import openvino.opset15 as o
    from openvino_tokenizers import _get_factory
    from openvino_tokenizers.utils import create_string_constant_node

    factory = _get_factory()
    text = o.parameter([-1], ov.Type.string, name="text")
    unpacked = o.string_tensor_unpack(text).outputs()
    outputs = {}
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        outputs[form.lower()] = factory.create("NormalizeUnicode", unpacked,
                                               {"normalization_form": form}).outputs()
    outputs["fold_utf8"] = factory.create("CaseFold", unpacked, {"encoding": "utf-8"}).outputs()
    outputs["fold_ascii"] = factory.create("CaseFold", unpacked, {"encoding": ""}).outputs()
    outputs["charsmap_nfkd_cf"] = factory.create(
        "CharsMapNormalization", unpacked,
        {"normalization_form": "nfkd", "case_fold": True, "remove_extra_whitespaces": True,
         "add_dummy_prefix": True}).outputs()
    outputs["regex_han"] = factory.create(
        "RegexNormalization", unpacked + create_string_constant_node("(\\p{Han})")
        + create_string_constant_node(" $1 "), {"global_replace": True}).outputs()
    # GPT-2's byte alphabet, one piece per string: there and back (older byte-level files)
    count = o.gather(o.shape_of(unpacked[0], "i32"), o.constant(np.array(0, np.int32)),
                     o.constant(np.array(0, np.int32)))
    rows = o.range(o.constant(np.array(0, np.int32)), count, o.constant(np.array(1, np.int32)),
                   "i32")
    ragged = [rows.output(0), o.add(rows, o.constant(np.array(1, np.int32))).output(0)]
    as_chars = factory.create("BytesToChars", ragged + unpacked).outputs()
    outputs["bytes_to_chars"] = as_chars[2:5]
    outputs["chars_to_bytes"] = factory.create("CharsToBytes", as_chars[:5]).outputs()
    results = []
    for name, outs in outputs.items():
        packed = o.string_tensor_pack(*outs[:3])
        packed.output(0).get_tensor().set_names({name})
        results.append(o.result(packed))
    return ov.Model(results, [text], "normalizers")


def build():
    import openvino as ov
    import openvino_tokenizers  # noqa: F401

    xml = os.path.join(HERE, "openvino_tokenizer.xml")
    ov.save_model(build_model(), xml)
    compiled = ov.Core().compile_model(xml, "CPU")
    arrays = {"texts": np.array(ORACLE_TEXTS, dtype=np.str_),
              "batch_texts": np.array(ORACLE_BATCH, dtype=np.str_)}
    for i, text in enumerate(ORACLE_TEXTS):
        res = compiled([text])
        for out in compiled.outputs:
            arrays[f"text_{i}/{out.get_any_name()}"] = np.array(res[out]).astype(np.str_)
    res = compiled(ORACLE_BATCH)
    for out in compiled.outputs:
        arrays[f"batch/{out.get_any_name()}"] = np.array(res[out]).astype(np.str_)
    np.savez_compressed(os.path.join(HERE, "oracle.npz"), **arrays)


if __name__ == "__main__":
    build()
