"""Hostile values and sizes inside ops: an empty image or axis, NaN or infinite ids, offsets,
boxes and attributes, an int64 overflow. Each gives one located error line (file, line, layer,
op; no "internal error", no traceback) from `irrun validate` or from a run, or the output the
spec defines."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

ov = pytest.importorskip("openvino")


def irrun_cli(*args):
    return subprocess.run([sys.executable, "-m", "irrun", *map(str, args)],
                          capture_output=True, text=True, timeout=300, check=False)


def save(tmp_path, outputs, params, feed):
    """The model (outputs, params) as tmp_path/m.xml and `feed` as tmp_path/x.npz."""
    xml = tmp_path / "m.xml"
    ov.save_model(ov.Model(outputs, params), xml, compress_to_fp16=False)
    np.savez(tmp_path / "x.npz", **feed)
    return xml


def assert_located(done, layer, op, *words):
    """One error line naming the file, the layer and the op; no internal error, no traceback."""
    text = done.stdout + done.stderr
    assert done.returncode == 1, text
    assert "internal error" not in text and "Traceback" not in text, text
    lines = [ln for ln in text.splitlines() if ": error:" in ln]
    assert len(lines) == 1, text
    assert "m.xml:" in lines[0] and f"'{layer}'" in lines[0] and op in lines[0], text
    for w in words:
        assert w in lines[0], text


def run_fails(xml, layer, op, *words):
    """validate passes (the problem is in the data), the run reports a located error."""
    checked = irrun_cli("validate", xml)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert_located(irrun_cli(xml, "--inputs", xml.parent / "x.npz"), layer, op, *words)


def run_output(xml):
    """The outputs of a run through the CLI (saved with -o), which must succeed."""
    out = xml.parent / "out.npz"
    done = irrun_cli(xml, "--inputs", xml.parent / "x.npz", "--output", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "internal error" not in done.stdout + done.stderr
    with np.load(out) as z:
        return [z[k] for k in z.files]


# ---------------------------------------------------------------- GridSample-9


@pytest.mark.parametrize("shape", [(0, 1, 2, 2), (1, 0, 2, 2), (1, 1, 0, 2), (1, 1, 2, 0)])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_on_an_image_with_no_pixels(tmp_path, shape, padding):
    import openvino.opset9 as o9

    x = o9.parameter(list(shape), np.float32, name="x")
    g = o9.parameter([shape[0], 2, 2, 2], np.float32, name="g")
    gs = o9.grid_sample(x, g, {"mode": "bilinear", "padding_mode": padding, "align_corners": False})
    gs.set_friendly_name("gs")
    xml = save(tmp_path, [gs.output(0)], [x, g],
               {"x": np.ones(shape, np.float32), "g": np.zeros((shape[0], 2, 2, 2), np.float32)})
    want = (shape[0], shape[1], 2, 2)
    if shape[0] == 0 or shape[1] == 0 or padding == "zeros":
        # Nothing to compute, or every tap outside the image reads zeros padding's 0.
        (out,) = run_output(xml)
        assert out.shape == want and not out.any()
    else:
        # Border and reflection have no pixel to repeat (OpenVINO's CPU plugin returns
        # uninitialised memory): refused.
        run_fails(xml, "gs", "GridSample", "H or W is 0")


# ---------------------------------------------------------------- DFT-7, IDFT-7, RDFT-9


@pytest.mark.parametrize("kind,shape,axes", [
    ("dft", (0, 4, 2), [0]), ("dft", (3, 0, 2), [1]), ("idft", (3, 0, 2), [0, 1]),
    ("rdft", (0, 4), [0]), ("rdft", (3, 0), [1]), ("rdft", (3, 0), [0, 1]), ("rdft", (0, 4), [1]),
])
def test_fourier_transform_over_an_empty_axis_is_empty(tmp_path, kind, shape, axes):
    import openvino.opset9 as o9

    x = o9.parameter(list(shape), np.float32, name="x")
    t = getattr(o9, kind)(x, o9.constant(np.array(axes, np.int64)))
    t.set_friendly_name("t")
    feed = {"x": np.ones(shape, np.float32)}
    xml = save(tmp_path, [t.output(0)], [x], feed)
    checked = irrun_cli("validate", xml)
    assert checked.returncode == 0 and "0 warnings" in checked.stdout, \
        checked.stdout + checked.stderr
    want = ov.Core().compile_model(xml, "CPU")(feed)[0]
    (out,) = run_output(xml)
    assert out.shape == want.shape and out.dtype == want.dtype and out.size == 0


# ---------------------------------------------------------------- ISTFT-16


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("n,step,batch,length", [(4, 2, (), None), (5, 2, (), None),
                                                 (1, 1, (2,), None), (4, 3, (2,), 6)])
def test_istft_of_no_frames_is_silence_of_openvinos_length(tmp_path, center, n, step, batch, length):
    """No frame reaches any sample: zeros (OpenVINO's CPU plugin leaves the memory
    uninitialised), as long as OpenVINO's shape inference says (that of one frame)."""
    import openvino.opset16 as o16

    shape = [*batch, n // 2 + 1, 0, 2]
    x = o16.parameter(shape, np.float32, name="x")
    w = o16.parameter([n], np.float32, name="w")
    args = [x, w, o16.constant(np.int64(n)), o16.constant(np.int64(step))]
    signal_length = None if length is None else o16.constant(np.int64(length))
    t = o16.istft(*args, center, False, signal_length=signal_length)
    t.set_friendly_name("t")
    xml = save(tmp_path, [t.output(0)], [x, w],
               {"x": np.zeros(shape, np.float32), "w": np.ones(n, np.float32)})
    checked = irrun_cli("validate", xml)
    assert checked.returncode == 0 and "0 warnings" in checked.stdout, checked.stdout + checked.stderr
    (out,) = run_output(xml)
    assert out.shape == tuple(t.get_output_partial_shape(0).to_shape()) and not out.any()


# ---------------------------------------------------------------- GatherTree-1


def gather_tree_model(tmp_path, parents, lens):
    import openvino.opset1 as o1

    t, b, k = parents.shape
    ps = [o1.parameter(list(parents.shape), np.float32, name=n) for n in ("steps", "parents")]
    ps.append(o1.parameter([b], np.float32, name="lens"))
    g = o1.gather_tree(*ps, o1.constant(np.float32(-1)))
    g.set_friendly_name("tree")
    steps = np.arange(t * b * k, dtype=np.float32).reshape(t, b, k)
    return save(tmp_path, [g.output(0)], ps,
                {"steps": steps, "parents": parents.astype(np.float32), "lens": lens})


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_gather_tree_with_a_nan_or_infinite_parent(tmp_path, bad):
    parents = np.zeros((3, 1, 2), np.float32)
    parents[2, 0, 1] = bad
    xml = gather_tree_model(tmp_path, parents, np.float32([3]))
    run_fails(xml, "tree", "GatherTree", "parent_ids (input 1) points to beam", "[2, 0, 1]")


def test_gather_tree_with_a_nan_length(tmp_path):
    xml = gather_tree_model(tmp_path, np.zeros((3, 1, 2), np.float32), np.float32([np.nan]))
    run_fails(xml, "tree", "GatherTree", "max_seq_len (input 2) is nan")


def test_gather_tree_ignores_a_nan_parent_past_the_length(tmp_path):
    parents = np.zeros((3, 1, 2), np.float32)
    parents[2, 0, 1] = np.nan
    xml = gather_tree_model(tmp_path, parents, np.float32([2]))
    feed = dict(np.load(tmp_path / "x.npz"))
    want = ov.Core().compile_model(xml, "CPU")(feed)[0]
    (out,) = run_output(xml)
    np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- DeformableConvolution-1/8


@pytest.mark.parametrize("version,pad,masked", [(1, False, False), (8, False, True),
                                                (8, True, False)])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_deformable_convolution_with_a_nan_or_infinite_offset(tmp_path, version, pad, masked, bad):
    """The sample lands outside the input and reads 0, as OpenVINO's CPU plugin does for an
    infinite offset (and for NaN with bilinear_interpolation_pad; without it, it crashes)."""
    import openvino.opset1 as o1
    import openvino.opset8 as o8

    x = o8.parameter([1, 1, 3, 3], np.float32, name="x")
    off = o8.parameter([1, 8, 2, 2], np.float32, name="off")
    w = o8.constant(np.ones((1, 1, 2, 2), np.float32))
    params = [x, off]
    conv = ([1, 1], [0, 0], [0, 0], [1, 1])
    if version == 1:
        d = o1.deformable_convolution(x, off, w, *conv)
    elif masked:
        params.append(o8.parameter([1, 4, 2, 2], np.float32, name="mask"))
        d = o8.deformable_convolution(x, off, w, *conv, mask=params[2], bilinear_interpolation_pad=pad)
    else:
        d = o8.deformable_convolution(x, off, w, *conv, bilinear_interpolation_pad=pad)
    d.set_friendly_name("dc")
    image = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    offsets = np.zeros((1, 8, 2, 2), np.float32)
    offsets[0, 0, 0, 0] = bad    # tap (0, 0)'s y at output (0, 0)
    offsets[0, 3, 1, 1] = bad    # tap (0, 1)'s x at output (1, 1)
    feed = {"x": image, "off": offsets}
    if masked:
        feed["mask"] = np.ones((1, 4, 2, 2), np.float32)
    xml = save(tmp_path, [d.output(0)], params, feed)
    windows = np.lib.stride_tricks.sliding_window_view(image[0, 0], (2, 2)).sum(axis=(-1, -2))
    windows[0, 0] -= image[0, 0, 0, 0]
    windows[1, 1] -= image[0, 0, 1, 2]
    (out,) = run_output(xml)
    np.testing.assert_array_equal(out[0, 0], windows)
    if not np.isnan(bad) or pad:
        np.testing.assert_array_equal(out, ov.Core().compile_model(xml, "CPU")(feed)[0])


# ---------------------------------------------------------------- PriorBox-8


@pytest.mark.parametrize("attr,value", [("aspect_ratio", "nan"), ("aspect_ratio", "inf"),
                                        ("aspect_ratio", "2,-inf"), ("density", "nan"),
                                        ("density", "inf"), ("fixed_size", "nan"),
                                        ("fixed_ratio", "inf")])
def test_prior_box_with_a_nan_or_infinite_attribute(tmp_path, attr, value):
    """Refused by the shape rule, so validate says so (OpenVINO's CPU plugin crashes on NaN
    and on an infinite density)."""
    import re

    import openvino.opset8 as o8

    a = {"offset": 0.5, "min_size": [2.0], "aspect_ratio": [2.0], "flip": True, "variance": [0.1]}
    if attr != "aspect_ratio":
        a.update(fixed_size=[4.0], density=[1.0], fixed_ratio=[1.0])
    pb = o8.prior_box(o8.constant(np.int64([2, 2])), o8.constant(np.int64([8, 8])), a)
    pb.set_friendly_name("pb")
    xml = save(tmp_path, [pb.output(0)], [], {})
    text, count = re.subn(f' {attr}="[^"]*"', f' {attr}="{value}"', xml.read_text(), count=1)
    assert count == 1
    xml.write_text(text)
    for args in (("validate", xml), (xml, "--inputs", tmp_path / "x.npz")):
        assert_located(irrun_cli(*args), "pb", "PriorBox", f"{attr} values must be finite")


# ---------------------------------------------------------------- ROIAlignRotated-15


def roi_align_rotated_model(tmp_path, sampling_ratio, rois, spatial_scale=1.0):
    import openvino.opset15 as o15

    x = o15.parameter([1, 1, 4, 4], np.float32, name="x")
    r = o15.parameter([2, 5], np.float32, name="rois")
    t = o15.roi_align_rotated(x, r, o15.constant(np.int32([0, 0])), 2, 2, sampling_ratio,
                              spatial_scale, False)
    t.set_friendly_name("rar")
    return save(tmp_path, [t.output(0)], [x, r],
                {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), "rois": rois})


def one_bad_box(col, bad):
    rois = np.float32([[2, 2, 2, 2, 0], [1, 1, 2, 2, 0.3]])
    rois[1, col] = bad
    return rois


@pytest.mark.parametrize("scale", ["nan", "inf"])
def test_roi_align_rotated_with_a_nan_or_infinite_spatial_scale(tmp_path, scale):
    xml = roi_align_rotated_model(tmp_path, 2, one_bad_box(0, 1))
    xml.write_text(xml.read_text().replace('spatial_scale="1"', f'spatial_scale="{scale}"'))
    for args in (("validate", xml), (xml, "--inputs", tmp_path / "x.npz")):
        assert_located(irrun_cli(*args), "rar", "ROIAlignRotated", "finite spatial_scale > 0")


@pytest.mark.parametrize("col,bad", [(2, np.inf), (3, np.nan)])
def test_roi_align_rotated_box_of_no_finite_size_with_sampling_ratio_0(tmp_path, col, bad):
    """The samples per bin come from the box's size: refused (OpenVINO fails a check too)."""
    xml = roi_align_rotated_model(tmp_path, 0, one_bad_box(col, bad))
    run_fails(xml, "rar", "ROIAlignRotated", "box 1", "has no finite size")


@pytest.mark.parametrize("col,bad", [(2, np.inf), (0, np.inf), (4, np.nan), (3, -np.inf)])
def test_roi_align_rotated_infinite_box_with_a_fixed_sampling_ratio(tmp_path, col, bad):
    """As OpenVINO's CPU plugin: samples at NaN points give NaN, infinitely far ones 0."""
    xml = roi_align_rotated_model(tmp_path, 2, one_bad_box(col, bad))
    want = ov.Core().compile_model(xml, "CPU")(dict(np.load(tmp_path / "x.npz")))[0]
    (out,) = run_output(xml)
    np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- DeformablePSROIPooling-1


@pytest.mark.parametrize("col,bad", [(0, np.inf), (0, np.nan), (1, -np.inf), (3, np.inf),
                                     (2, np.nan), (4, -np.inf)])
def test_deformable_psroi_pooling_with_a_nan_or_infinite_box(tmp_path, col, bad):
    """Refused: OpenVINO's CPU plugin crashes on some of these and reads garbage on others."""
    import openvino.opset1 as o1

    x = o1.parameter([1, 4, 4, 4], np.float32, name="x")
    r = o1.parameter([2, 5], np.float32, name="rois")
    t = o1.deformable_psroi_pooling(x, r, 1, 1.0, group_size=2, spatial_bins_x=2, spatial_bins_y=2)
    t.set_friendly_name("dps")
    rois = np.float32([[0, 0, 0, 3, 3], [0, 1, 1, 2, 3]])
    rois[1, col] = bad
    xml = save(tmp_path, [t.output(0)], [x, r],
               {"x": np.arange(64, dtype=np.float32).reshape(1, 4, 4, 4), "rois": rois})
    run_fails(xml, "dps", "DeformablePSROIPooling", "box 1", "holds a NaN or infinite number")


# ---------------------------------------------------------------- ExperimentalDetectronROIFeatureExtractor-6


def roi_feature_model(tmp_path, sampling_ratio, rois):
    from irrun.tools.builder import GraphBuilder

    g = GraphBuilder("fe")
    r = g.parameter("rois", "f32", [2, 4])
    f = g.parameter("f", "f32", [1, 1, 8, 8])
    feat, boxes = g.op("ExperimentalDetectronROIFeatureExtractor", [r, f], name="fe", outputs=2,
                       output_size=2, sampling_ratio=sampling_ratio, pyramid_scales=[1],
                       aligned=False)
    g.result(feat, name="feat")
    g.result(boxes, name="boxes")
    xml = tmp_path / "m.xml"
    g.save(xml)
    np.savez(tmp_path / "x.npz", rois=rois, f=np.arange(64, dtype=np.float32).reshape(1, 1, 8, 8))
    return xml


@pytest.mark.parametrize("col,bad", [(2, np.inf), (3, np.inf), (0, -np.inf)])
def test_roi_feature_extractor_infinite_roi_with_sampling_ratio_0(tmp_path, col, bad):
    """The samples per bin come from the ROI's size (OpenVINO's CPU plugin crashes)."""
    rois = np.float32([[0, 0, 3, 3], [1, 1, 4, 6]])
    rois[1, col] = bad
    xml = roi_feature_model(tmp_path, 0, rois)
    run_fails(xml, "fe", "ExperimentalDetectronROIFeatureExtractor", "ROI 1", "has no finite size")


def test_roi_feature_extractor_sampling_ratio_past_int64(tmp_path):
    xml = roi_feature_model(tmp_path, 2 ** 63 - 1, np.float32([[0, 0, 3, 3], [1, 1, 4, 6]]))
    run_fails(xml, "fe", "ExperimentalDetectronROIFeatureExtractor", "overflows int64")


@pytest.mark.parametrize("bad,channel", [(np.nan, 0), (np.nan, 1), (np.inf, 0), (-np.inf, 1)])
def test_deformable_psroi_pooling_with_a_nan_or_infinite_offset(tmp_path, bad, channel):
    """The bin's samples land outside the maps and read nothing (0), as OpenVINO's CPU plugin
    gives for an infinite offset (it crashes on NaN)."""
    import openvino.opset1 as o1

    x = o1.parameter([1, 4, 4, 4], np.float32, name="x")
    r = o1.parameter([2, 5], np.float32, name="rois")
    of = o1.parameter([2, 2, 1, 1], np.float32, name="off")
    t = o1.deformable_psroi_pooling(x, r, 1, 1.0, group_size=2, spatial_bins_x=2,
                                    spatial_bins_y=2, offsets=of, trans_std=0.1)
    t.set_friendly_name("dps")
    offsets = np.zeros((2, 2, 1, 1), np.float32)
    offsets[1, channel] = bad
    feed = {"x": np.arange(64, dtype=np.float32).reshape(1, 4, 4, 4),
            "rois": np.float32([[0, 0, 0, 3, 3], [0, 1, 1, 2, 3]]), "off": offsets}
    xml = save(tmp_path, [t.output(0)], [x, r, of], feed)
    (out,) = run_output(xml)
    assert np.isfinite(out).all() and not out[1].any() and out[0].all()
    if not np.isnan(bad):
        np.testing.assert_array_equal(out, ov.Core().compile_model(xml, "CPU")(feed)[0])
