"""Hostile attributes, Consts and inputs that tests/test_fuzz_attrs.py found: each is one
located error (file, line, layer, op; no "internal error") from validate or from a run, or the
output the op defines."""
from __future__ import annotations

import re
from pathlib import Path

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


# ---------------------------------------------------------------- detection ops

@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", str(16 << 20))


@pytest.mark.parametrize("op,data", [
    ("PriorBox", {"offset": "0.5", "variance": "0.1"}),                  # no size: no box
    ("PriorBoxClustered", {"offset": "0.5", "width": "", "height": ""}),
])
@pytest.mark.parametrize("grid", [[2**40, 3], [3, 2**40], [2**40, 0]])
def test_prior_boxes_of_a_huge_grid_with_no_box(tmp_path, small_budget, op, data, grid):
    """No box per grid point: an empty output, without the grid's centres (2**40 of them)."""
    b = IRBuilder()
    pb = b.op(op, "opset1", [b.const("grid", np.array(grid, np.int64), "i64"),
                             b.const("image", np.array([8, 8], np.int64), "i64")],
              [0, 1], [2], data, name="priors")
    b.result((pb, 2), "out")
    xml = b.write(tmp_path)
    assert not [d for d in irrun.validate(xml) if d.severity == "error"]
    (out,) = irrun.read_model(xml).infer({}).values()
    assert out.shape == (2, 0) and out.dtype == np.float32


def prior_box(tmp_path, **data):
    b = IRBuilder()
    pb = b.op("PriorBox", "opset8", [b.const("grid", np.array([2, 2], np.int64), "i64"),
                                     b.const("image", np.array([8, 8], np.int64), "i64")],
              [0, 1], [2], {"offset": "0.5", **data}, name="pb")
    b.result((pb, 2), "out")
    return b.write(tmp_path)


@pytest.mark.parametrize("density", ["1e30", "9.2233720368547758e18", "100000"])
def test_prior_box_density_past_the_budget(tmp_path, small_budget, density):
    """A density asks for its square of boxes per grid point: held to the memory budget
    before any is made (a Python loop over them never ended)."""
    rejected(prior_box(tmp_path, fixed_size="2.0", density=density), "PriorBox", "'pb'",
             "PriorBox's boxes per grid point: shape [")


def test_prior_box_fixed_size_past_float32(tmp_path):
    rejected(prior_box(tmp_path, fixed_size="2.0,3.5e38", density="1,1"), "PriorBox", "'pb'",
             "fixed_size values must be finite f32 numbers")


def psroi_pooling(tmp_path, scale):
    b = IRBuilder()
    x = b.parameter("x", "f32", "1,8,6,6", [1, 8, 6, 6])
    rois = b.parameter("rois", "f32", "2,5", [2, 5])
    ps = b.op("PSROIPooling", "opset1", [x, rois], [0, 1], [2],
              {"output_dim": 2, "group_size": 2, "spatial_scale": scale, "mode": "average"},
              name="ps")
    b.result((ps, 2), "out")
    feed = {"x": np.ones((1, 8, 6, 6), np.float32),
            "rois": np.array([[0, 1, 1, 4, 4], [0, 0, 2, 5, 3]], np.float32)}
    return b.write(tmp_path), feed


@pytest.mark.parametrize("scale", ["nan", "inf", "-inf"])
def test_psroi_pooling_with_a_nan_or_infinite_spatial_scale(tmp_path, scale):
    rejected(psroi_pooling(tmp_path, scale)[0], "PSROIPooling", "'ps'", "finite spatial_scale")


@pytest.mark.parametrize("scale", ["-1e38", "3e38"])
def test_psroi_pooling_bins_past_float32(tmp_path, scale):
    """Bin edges that overflow (inf - inf: NaN) make empty bins, 0, as outside the map."""
    xml, feed = psroi_pooling(tmp_path, scale)
    (out,) = irrun.read_model(xml).infer(feed).values()
    assert out.shape == (2, 2, 2, 2) and np.isfinite(out).all()


@pytest.mark.parametrize("col", [1, 3])
def test_psroi_pooling_box_with_a_nan(tmp_path, col):
    xml, feed = psroi_pooling(tmp_path, "1.0")
    feed["rois"][0, col] = np.nan
    (out,) = irrun.read_model(xml).infer(feed).values()
    assert np.isfinite(out).all() and (out[1] == 1).all()


# ---------------------------------------------------------------- tokenizer models, edited

MODELS = Path(__file__).resolve().parent.parent / "models"


def edited(tmp_path, folder, *edits):
    """models/<folder>/openvino_tokenizer.xml with each (old, new) text replaced (once)."""
    text = (MODELS / folder / "openvino_tokenizer.xml").read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (tmp_path / "model.xml").write_text(text)
    (tmp_path / "model.bin").write_bytes((MODELS / folder / "openvino_tokenizer.bin").read_bytes())
    return tmp_path / "model.xml"


def const_data(name, old, new):
    """An edit of the <data> of Const `name`."""
    head = f'name="{name}" type="Const" version="opset1">\n\t\t\t<data '
    return head + old + " />", head + new + " />"


def postprocess_feed():
    with np.load(MODELS / "tok_postprocess" / "openvino_tokenizer.inputs.npz") as z:
        return {k: z[k] for k in z.files}


def test_truncate_begins_and_ends_of_other_lengths(tmp_path):
    xml = edited(tmp_path, "tok_postprocess", ('name="first_ends" type="Parameter" '
                                               'version="opset1">\n\t\t\t<data shape="?"',
                                               'name="first_ends" type="Parameter" '
                                               'version="opset1">\n\t\t\t<data shape=""'))
    feed = postprocess_feed()
    feed["first_ends"] = feed["first_ends"][0]
    run_fails(xml, feed, "Truncate", "'Truncate_11'",
              "expected ragged begins and ends of one shape, got [4] and []")


def test_ragged_to_dense_pad_right_with_no_value(tmp_path):
    xml = edited(tmp_path, "tok_postprocess",
                 ('<data shape="" element_type="boolean" />',
                  '<data shape="0" element_type="boolean" />'))
    feed = postprocess_feed()
    feed["pad_right"] = np.zeros(0, bool)
    run_fails(xml, feed, "RaggedToDense", "'RaggedToDense_42'", "expected one pad_right, got 0")


def test_ragged_to_dense_pad_value_of_two_values(tmp_path):
    xml = edited(tmp_path, "tok_postprocess",
                 const_data("Constant_41", 'element_type="i32" shape="" offset="0" size="4"',
                            'element_type="i32" shape="2" offset="0" size="8"'))
    run_fails(xml, postprocess_feed(), "RaggedToDense", "'RaggedToDense_42'",
              "expected one pad value, got 2 values")


def test_wordpiece_unknown_token_id_of_no_value(tmp_path):
    xml = edited(tmp_path, "tok_wordpiece",
                 const_data("Constant_113", 'element_type="i64" shape="" offset="21" size="8"',
                            'element_type="i64" shape="0" offset="21" size="0"'))
    run_fails(xml, {"Parameter_1": np.array(["hello world"], object)}, "WordpieceTokenizer",
              "'WordpieceTokenizer_114'", "expected one unknown-token id, got 0 values")


@pytest.mark.parametrize("value", ["1000000000000", "-2147483649"])
def test_unigram_unknown_token_id_past_i32(tmp_path, value):
    """The ids are i32: an unk_token_id no i32 holds is refused where it is read (it was an
    OverflowError once a word was unknown)."""
    xml = edited(tmp_path, "tok_unigram", ('unk_token_id="2"', f'unk_token_id="{value}"'))
    rejected(xml, "UnigramTokenizer", "'UnigramTokenizer_102'",
             f"unk_token_id must be an i32 id, got {value}")


@pytest.mark.parametrize("shape", [(1, 2, 0, 6), (1, 2, 6, 0)])
@pytest.mark.parametrize("method", ["bilinear", "max"])
def test_roi_pooling_on_a_map_with_no_pixels(tmp_path, shape, method):
    """Every bin is outside a map of no pixels: 0."""
    b = IRBuilder()
    x = b.parameter("x", "f32", ",".join(map(str, shape)), list(shape))
    rois = b.parameter("rois", "f32", "2,5", [2, 5])
    rp = b.op("ROIPooling", "opset2", [x, rois], [0, 1], [2],
              {"pooled_h": 2, "pooled_w": 3, "spatial_scale": "1.0", "method": method})
    b.result((rp, 2), "out")
    feed = {"x": np.ones(shape, np.float32),
            "rois": np.array([[0, 0.1, 0.1, 0.5, 0.5], [0, 0, 0, 1, 1]], np.float32)}
    (out,) = irrun.read_model(b.write(tmp_path)).infer(feed).values()
    assert out.shape == (2, 2, 2, 3) and not out.any()


@pytest.mark.parametrize("shape", [(1, 8, 0, 6), (1, 8, 6, 0)])
def test_deformable_psroi_pooling_on_a_map_with_no_pixels(tmp_path, shape):
    """A map of no pixels has nothing to sample: every bin is 0, as for ROIPooling (a sample
    at -0.5, the edge of an empty map, read index -1 of it)."""
    b = IRBuilder()
    x = b.parameter("x", "f32", ",".join(map(str, shape)), list(shape))
    rois = b.parameter("rois", "f32", "2,5", [2, 5])
    dp = b.op("DeformablePSROIPooling", "opset1", [x, rois], [0, 1], [2],
              {"output_dim": 2, "spatial_scale": "1.0", "group_size": 2,
               "mode": "bilinear_deformable", "spatial_bins_x": 2, "spatial_bins_y": 2,
               "trans_std": "0.1", "part_size": 2})
    b.result((dp, 2), "out")
    feed = {"x": np.ones(shape, np.float32),
            "rois": np.array([[0, 0, 0, 3, 3], [0, 1, 1, 2, 4]], np.float32)}
    (out,) = irrun.read_model(b.write(tmp_path)).infer(feed).values()
    assert out.shape == (2, 2, 2, 2) and not out.any()


def test_group_convolution_of_scalar_filters(tmp_path):
    """Scalar filters are refused by the rank check (the rule read their groups dim first:
    an IndexError the file fuzz found)."""
    b = IRBuilder()
    x = b.parameter("x", "f32", "1,4,5,5", [1, 4, 5, 5])
    f = b.const("f", np.float32(1), "f32")
    gc = b.op("GroupConvolution", "opset1", [x, f], [0, 1], [2],
              {"strides": "1,1", "dilations": "1,1", "pads_begin": "0,0", "pads_end": "0,0"},
              name="gc")
    b.result((gc, 2), "out")
    rejected(b.write(tmp_path), "GroupConvolution", "'gc'", "filters")


def test_grid_sample_of_string_data(tmp_path):
    b = IRBuilder()
    x = b.parameter("x", "string", "1,2,4,4", [1, 2, 4, 4])
    g = b.parameter("g", "f32", "1,3,3,2", [1, 3, 3, 2])
    gs = b.op("GridSample", "opset9", [x, g], [0, 1], [2], {"mode": "nearest"}, name="gs")
    b.result((gs, 2), "out")
    rejected(b.write(tmp_path), "GridSample", "'gs'", "does not accept string data")


def test_bpe_merges_fed_a_string_tensor(tmp_path):
    """The merges' chars wired to the string Parameter: refused by the shape rule where it
    is read (the kernel met the strings' text as offsets: a ValueError)."""
    text = (MODELS / "genai_llama" / "openvino_tokenizer.xml").read_text()
    old = '<edge from-layer="28" from-port="0" to-layer="36" to-port="10" />'
    assert text.count(old) == 1
    (tmp_path / "model.xml").write_text(text.replace(old, old.replace('"28"', '"0"')))
    (tmp_path / "model.bin").write_bytes(
        (MODELS / "genai_llama" / "openvino_tokenizer.bin").read_bytes())
    rejected(tmp_path / "model.xml", "BPETokenizer", "expected u8 merges chars",
             "got string")


def test_truncate_side_that_is_not_bytes(tmp_path):
    xml = edited(tmp_path, "tok_postprocess", ('name="side" type="Parameter" version="opset1">\n'
                                               '\t\t\t<data shape="?" element_type="u8"',
                                               'name="side" type="Parameter" version="opset1">\n'
                                               '\t\t\t<data shape="?" element_type="string"'))
    feed = postprocess_feed()
    feed["side"] = np.array(["right"], object)
    run_fails(xml, feed, "Truncate", "'Truncate_11'", "expected a string as u8 bytes")


@pytest.mark.parametrize("declared", ["4,3", "4,?"])
def test_ed_detection_output_rois_that_are_not_boxes(tmp_path, declared):
    b = IRBuilder()
    rois = b.parameter("rois", "f32", declared, [4, -1 if "?" in declared else 3])
    ins = [rois] + [b.parameter(n, "f32", s, list(map(int, s.split(","))))
                    for n, s in (("deltas", "4,12"), ("scores", "4,3"), ("im_info", "1,3"))]
    do = b.op("ExperimentalDetectronDetectionOutput", "opset6", ins, [0, 1, 2, 3], [4, 5, 6],
              {"score_threshold": 0.05, "nms_threshold": 0.5, "max_delta_log_wh": 4.135,
               "num_classes": 3, "post_nms_count": 10, "max_detections_per_image": 5,
               "class_agnostic_box_regression": "false", "deltas_weights": "10,10,5,5"},
              name="do")
    for p in (4, 5, 6):
        b.result((do, p))
    xml = b.write(tmp_path)
    if "?" not in declared:
        rejected(xml, "ExperimentalDetectronDetectionOutput", "'do'", "rois must be [N, 4] boxes")
    else:
        feed = {"rois": np.ones((4, 3), np.float32), "deltas": np.zeros((4, 12), np.float32),
                "scores": np.ones((4, 3), np.float32), "im_info": np.array([[9, 9, 1]], np.float32)}
        run_fails(xml, feed, "ExperimentalDetectronDetectionOutput", "'do'",
                  "rois must be [N, 4] boxes, got")


def test_region_yolo_with_no_classes(tmp_path):
    b = IRBuilder()
    x = b.parameter("x", "f32", "1,15,2,2", [1, 15, 2, 2])
    ry = b.op("RegionYolo", "opset1", [x], [0], [1],
              {"axis": 1, "coords": 4, "classes": 0, "end_axis": 3, "num": 3,
               "do_softmax": "true", "anchors": "1,2,3,4,5,6", "mask": ""})
    b.result((ry, 1), "out")
    feed = {"x": np.zeros((1, 15, 2, 2), np.float32)}
    (out,) = irrun.read_model(b.write(tmp_path)).infer(feed).values()
    assert out.shape == (1, 60) and (out == 0.5).sum() == 36   # x, y, objectness: sigmoid(0)


@pytest.mark.parametrize("shape", [(1, 2, 0, 8), (1, 2, 8, 0)])
def test_roi_feature_extractor_on_a_level_with_no_pixels(tmp_path, shape):
    """Every sample on a map of no pixels is outside it: 0."""
    b = IRBuilder()
    rois = b.parameter("rois", "f32", "3,4", [3, 4])
    f0 = b.parameter("f0", "f32", ",".join(map(str, shape)), list(shape))
    fe = b.op("ExperimentalDetectronROIFeatureExtractor", "opset6", [rois, f0], [0, 1], [2, 3],
              {"output_size": 2, "sampling_ratio": 2, "pyramid_scales": "4", "aligned": "false"})
    b.result((fe, 2), "out")
    b.result((fe, 3), "rois_out")
    feed = {"rois": np.array([[0, 0, 8, 8], [1, 1, 3, 5], [2, 2, 4, 4]], np.float32),
            "f0": np.ones(shape, np.float32)}
    out = irrun.read_model(b.write(tmp_path)).infer(feed)
    assert out["out"].shape == (3, 2, 2, 2) and not out["out"].any()


@pytest.mark.parametrize("declared", ["0,2,8,8", "?,2,8,8"])
def test_roi_feature_extractor_on_a_map_with_no_image(tmp_path, declared):
    """The spec's feature maps are [1, C, H, W] and the reference reads image 0: a map of
    batch 0 has none to read (it was an IndexError)."""
    b = IRBuilder()
    rois = b.parameter("rois", "f32", "3,4", [3, 4])
    f0 = b.parameter("f0", "f32", declared,
                     [-1 if d == "?" else int(d) for d in declared.split(",")])
    fe = b.op("ExperimentalDetectronROIFeatureExtractor", "opset6", [rois, f0], [0, 1], [2, 3],
              {"output_size": 2, "sampling_ratio": 2, "pyramid_scales": "4", "aligned": "false"},
              name="fe")
    b.result((fe, 2), "out")
    b.result((fe, 3), "rois_out")
    xml = b.write(tmp_path)
    if "?" not in declared:
        rejected(xml, "ExperimentalDetectronROIFeatureExtractor", "'fe'",
                 "feature map 0 has no image")
    else:
        feed = {"rois": np.array([[0, 0, 8, 8], [1, 1, 3, 5], [2, 2, 4, 4]], np.float32),
                "f0": np.ones((0, 2, 8, 8), np.float32)}
        run_fails(xml, feed, "ExperimentalDetectronROIFeatureExtractor", "'fe'",
                  "feature map 0 has no image")


def test_roi_pooling_max_bins_at_once_equal_bin_by_bin():
    """ROIPooling's max over every bin at once (a pooled_h of 65536 looped in Python for
    seconds) equals the max of each bin's slice; an empty bin is 0."""
    from irrun.ops.detection import _bin_max

    rng = np.random.default_rng(0)
    f = rng.standard_normal((3, 7, 5)).astype(np.float32)
    f[1, 2, 3] = np.nan
    for ph, pw in ((4, 3), (9, 1), (1, 6)):
        y0 = rng.integers(0, 8, ph)
        y1 = np.minimum(y0 + rng.integers(-1, 4, ph), 7).clip(0)
        x0 = rng.integers(0, 6, pw)
        x1 = np.minimum(x0 + rng.integers(-1, 4, pw), 5).clip(0)
        want = np.zeros((3, ph, pw), np.float32)
        for a in range(ph):
            for b in range(pw):
                if y1[a] > y0[a] and x1[b] > x0[b]:
                    want[:, a, b] = f[:, y0[a]:y1[a], x0[b]:x1[b]].max(axis=(1, 2))
        np.testing.assert_array_equal(_bin_max(f, y0, y1, x0, x1), want)


# ---------------------------------------------------------------- signal ops

@pytest.mark.parametrize("declared", ["0,4", "?,4"])
def test_istft_window_that_is_not_1d(tmp_path, declared):
    b = IRBuilder()
    x = b.parameter("x", "f32", "3,5,2", [3, 5, 2])
    w = b.parameter("w", "f32", declared, [0 if declared[0] == "0" else -1, 4])
    t = b.op("ISTFT", "opset16", [x, w, b.const("n", np.array(4, np.int64), "i64"),
                                  b.const("step", np.array(2, np.int64), "i64")],
             [0, 1, 2, 3], [4], {"center": "true", "normalized": "false"}, name="istft")
    b.result((t, 4), "out")
    rejected(b.write(tmp_path), "ISTFT", "'istft'", "window (input 1) must be 1-D")


# ---------------------------------------------------------------- bodies

def test_loop_body_condition_of_no_value(tmp_path):
    """A body condition Result fed by an empty Const: a located error of the Loop's shape
    rule (its value was read before its shape was checked)."""
    import openvino as ov
    import openvino.opset8 as o

    x = o.parameter([3], np.float32, name="x")
    bacc = o.parameter([3], np.float32, name="bacc")
    r, rc = o.result(o.add(bacc, bacc)), o.result(o.constant(np.array(True)))
    loop = o.loop(o.constant(np.int64(3)), o.constant(True))
    loop.set_function(ov.Model([r, rc], [bacc]))
    loop.set_special_body_ports([-1, 1])
    loop.set_merged_input(bacc, x.output(0), r.output(0))
    loop.set_friendly_name("loop")
    xml = tmp_path / "model.xml"
    ov.save_model(ov.Model([loop.get_iter_value(r.output(0), -1)], [x]), xml)
    # (OpenVINO makes no empty Const: the body's condition Const is made one in the file)
    text = xml.read_text()
    body = text.index("<body>")
    head, tail = text[:body], text[body:]
    m = re.search(r'element_type="boolean" shape="" offset="(\d+)" size="1"', tail)
    tail = tail[:m.start()] + f'element_type="boolean" shape="0" offset="{m.group(1)}" size="0"' \
        + tail[m.end():]
    xml.write_text(head + tail)
    rejected(xml, "Loop", "'loop'", "the body's condition Result must be a scalar")
