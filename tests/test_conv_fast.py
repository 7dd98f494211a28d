"""The f32/f64 fast paths of Convolution (one batched im2col matmul) and depthwise GroupConvolution
(per-tap multiply-add), against textbook loops and OpenVINO's CPU plugin."""
from __future__ import annotations

import numpy as np
import pytest

from irrun.ir import registry

from oracle import compare
from test_ops_vision import naive_conv

CASES = [   # x shape, kernel, strides, dilations, pads_begin, pads_end
    ((2, 5, 11, 9), (3, 2), (2, 1), (1, 2), (1, 0), (2, 1)),
    ((1, 3, 16, 16), (7, 7), (2, 2), (1, 1), (3, 3), (3, 3)),
    ((1, 4, 9), (3,), (1,), (2,), (0,), (1,)),
    ((1, 2, 5, 6, 4), (2, 3, 1), (1, 2, 1), (1, 1, 1), (1, 0, 0), (0, 1, 0)),
    ((3, 8, 4, 4), (1, 1), (1, 1), (1, 1), (0, 0), (0, 0)),
    ((1, 4, 5, 6), (1, 1), (1, 1), (1, 1), (1, 2), (2, 0)),     # 1x1 over pads: x padded, as is
    # Many taps on a small map: depthwise as one product over patches (dilated, strided).
    ((2, 6, 6, 7), (5, 4), (1, 2), (2, 1), (2, 1), (3, 2)),
    # Stride 1 on maps whose padded rows are little wider: im2col over flat rows.
    ((2, 5, 12, 14), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((1, 4, 9, 16), (2, 3), (1, 1), (2, 1), (0, 2), (1, 0)),
]
FLAT_ROWS = CASES[-2:]
GATHERED = [   # output rows of at most 4 positions: patches gathered from the flat input
    ((2, 6, 4, 4), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((1, 3, 7, 5), (2, 3), (2, 1), (1, 2), (1, 0), (0, 2)),
    ((1, 4, 3, 5, 4), (2, 1, 3), (1, 2, 1), (1, 1, 2), (1, 0, 2), (0, 1, 1)),
]
CASES += GATHERED


def _attrs(op, strides, dil, pb, pe):
    text = lambda v: ",".join(map(str, v))  # noqa: E731
    a, problems, _ = registry.parse_attrs(op.attrs, dict(
        strides=text(strides), dilations=text(dil), pads_begin=text(pb), pads_end=text(pe)))
    assert not problems
    return a


# Few output channels and many (6 and 40): both products of shapes BLAS blocks differently.
@pytest.mark.parametrize("out_channels", [6, 40])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, k, strides, dil, pb, pe", CASES)
def test_fast_paths_match_textbook_loops(shape, k, strides, dil, pb, pe, dtype, out_channels):
    rng = np.random.default_rng(len(shape) + sum(k))
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((out_channels, shape[1]) + k).astype(dtype)
    conv = registry.lookup("Convolution", "opset1")
    (got,) = conv.run(_attrs(conv, strides, dil, pb, pe), x, w)
    assert got.dtype == dtype and got.flags.c_contiguous
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, naive_conv(x, w, strides, dil, pb, pe), rtol=tol, atol=tol * 10)
    # Non-contiguous data (a transposed view) gives the same result.
    xt = np.ascontiguousarray(np.swapaxes(x, 0, 1)).swapaxes(0, 1)
    np.testing.assert_array_equal(conv.run(_attrs(conv, strides, dil, pb, pe), xt, w)[0], got)
    # Depthwise: one channel per group, each channel its own filter.
    gconv = registry.lookup("GroupConvolution", "opset1")
    wd = rng.standard_normal((shape[1], 1, 1) + k).astype(dtype)
    (dw,) = gconv.run(_attrs(gconv, strides, dil, pb, pe), x, wd)
    want = np.concatenate([naive_conv(x[:, c:c + 1], wd[c], strides, dil, pb, pe)
                           for c in range(shape[1])], axis=1)
    np.testing.assert_allclose(dw, want, rtol=tol, atol=tol * 10)


# Each path's cases above take that path (else the comparisons would not test it).
@pytest.mark.parametrize("path, case", [("_conv_flat_rows", c) for c in FLAT_ROWS]
                         + [("_gathered_patches", c) for c in GATHERED])
def test_the_cases_of_a_path_take_it(monkeypatch, path, case):
    from irrun.ops import convolution

    shape, k, strides, dil, pb, pe = case
    calls = []
    real = getattr(convolution, path)
    monkeypatch.setattr(convolution, path, lambda *a: calls.append(1) or real(*a))
    conv = registry.lookup("Convolution", "opset1")
    conv.run(_attrs(conv, strides, dil, pb, pe), np.ones(shape, np.float32),
             np.ones((3, shape[1]) + k, np.float32))
    assert calls


@pytest.mark.oracle
@pytest.mark.parametrize("shape, k, strides, dil, pb, pe", CASES[:3] + CASES[-6:])
def test_fast_paths_match_openvino(shape, k, strides, dil, pb, pe):
    import openvino as ov
    import openvino.opset8 as ops

    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    p = ops.parameter(shape, np.float32, name="x")
    w = ops.constant(rng.standard_normal((6, shape[1]) + k).astype(np.float32))
    wd = ops.constant(rng.standard_normal((shape[1], 1, 1) + k).astype(np.float32))
    y = ops.convolution(p, w, list(strides), list(pb), list(pe), list(dil))
    z = ops.group_convolution(p, wd, list(strides), list(pb), list(pe), list(dil))
    # Up to 147-term f32 sums of unit normals (|sum| ~ 12) in another order than the plugin's:
    # an output near 0 from cancellation differs by a few f32 ulps of 12, not of itself.
    compare(ov.Model([y, z], [p]), {"x": x}, atol=1e-5)


def test_pads_from_the_file_are_held_to_the_memory_budget(monkeypatch):
    # A dilation of 1e8 with pads of 5e7 a side: an 8-element output over a 400 MB padded row.
    conv = registry.lookup("Convolution", "opset1")
    attrs = _attrs(conv, (1, 1), (1, 100_000_000), (0, 50_000_000), (0, 50_000_000))
    x, w = np.ones((1, 1, 1, 8), np.float32), np.ones((1, 1, 1, 2), np.float32)
    monkeypatch.setenv("IRRUN_MAX_BYTES", "100M")
    from irrun.errors import ResourceError

    with pytest.raises(ResourceError, match=r"the zero-padded input: shape \[1, 1, 1, 100000008\]"):
        conv.run(attrs, x, w)
    monkeypatch.setenv("IRRUN_MAX_BYTES", "1G")
    np.testing.assert_array_equal(conv.run(attrs, x, w)[0], np.zeros((1, 1, 1, 8), np.float32))
    # Output rows of 4 gather their patches from the input itself: no padded copy to refuse.
    monkeypatch.setenv("IRRUN_MAX_BYTES", "100M")
    np.testing.assert_array_equal(conv.run(attrs, x[..., :4], w)[0],
                                  np.zeros((1, 1, 1, 4), np.float32))


@pytest.mark.parametrize("shape, k", [((0, 3, 8, 8), (3, 3)), ((0, 16, 2, 2), (5, 5)),
                                      ((2, 0, 8, 8), (3, 3)), ((0, 2, 40, 40), (1, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_empty_batches_and_channels_give_empty_outputs(shape, k, dtype):
    # Fuzzing found it: a batch of 0 made the im2col reshape's -1 undefined (an internal
    # error). Every path (im2col both ways, per tap, depthwise taps and patches) now copes.
    x = np.zeros(shape, dtype)
    conv = registry.lookup("Convolution", "opset1")
    gconv = registry.lookup("GroupConvolution", "opset1")
    pads = tuple(d // 2 for d in k)
    for op, w in ((conv, np.ones((4, shape[1]) + k, dtype)),
                  (gconv, np.ones((shape[1], 1, 1) + k, dtype)),
                  (gconv, np.ones((1, 4, shape[1]) + k, dtype))):
        (got,) = op.run(_attrs(op, (1, 1), (1, 1), pads, pads), x, w)
        out_channels = w.shape[0] * w.shape[1] if op is gconv else w.shape[0]
        assert got.shape == (shape[0], out_channels) + shape[2:] and got.dtype == dtype


# Depthwise GroupConvolution through its compiled loop (ops/depthwise_loop.py): planar for
# maps at least 3x wider than their channels, channel-last otherwise; 1-D runs as 2-D.
DEPTHWISE = [   # x shape, kernel, strides, dilations, pads_begin, pads_end
    ((1, 4, 20, 24), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),      # the loop of a fixed kernel
    ((2, 3, 9, 40), (5, 5), (1, 1), (2, 2), (3, 1), (0, 4)),       # fixed, dilated, uneven pads
    ((1, 20, 12, 17), (7, 3), (1, 1), (1, 3), (3, 0), (3, 6)),     # fixed, many channels
    ((1, 2, 6, 15), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),       # planar (rows of 15)
    ((2, 3, 17, 19), (5, 5), (2, 2), (1, 1), (2, 2), (2, 2)),      # planar, stride 2
    ((1, 2, 13, 23), (3, 4), (3, 3), (2, 1), (1, 0), (2, 3)),      # planar, stride 3, dilated
    ((1, 2, 6, 11), (3, 3), (1, 40), (1, 1), (1, 1), (1, 1)),      # stride wider than the map
    ((1, 24, 10, 10), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),     # channel-last
    ((2, 40, 9, 7), (5, 5), (2, 2), (1, 1), (2, 2), (2, 2)),       # channel-last, stride 2
    ((1, 17, 6, 8), (2, 3), (1, 2), (2, 2), (0, 3), (1, 0)),       # channel-last, dilated
    ((1, 32, 1, 1), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),       # every tap but one in pads
    ((2, 3, 30), (5,), (2,), (1,), (2,), (1,)),                    # 1-D
    ((1, 9, 7), (3,), (1,), (3,), (3,), (0,)),                     # 1-D, dilated
]


def _depthwise_tap_loop(x, w, strides, dil, pb, pe):
    """The NumPy tap loop the compiled loop replaced: zero-padded input, per tap a
    multiply and an add over the whole output, taps in row-major order."""
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pb, pe)))
    kernel = w.shape[1:]
    counts = [(xp.shape[2 + i] - (kernel[i] - 1) * dil[i] - 1) // strides[i] + 1
              for i in range(len(kernel))]
    acc = np.zeros(x.shape[:2] + tuple(counts), x.dtype)
    for tap in np.ndindex(*kernel):
        view = xp[(slice(None), slice(None)) + tuple(
            slice(t * d, t * d + (n - 1) * s + 1, s)
            for t, d, n, s in zip(tap, dil, counts, strides))]
        acc += view * w[(slice(None),) + tap].reshape((1, -1) + (1,) * len(kernel))
    return acc


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, k, strides, dil, pb, pe", DEPTHWISE)
def test_depthwise_loop_sums_as_the_tap_loop(shape, k, strides, dil, pb, pe, dtype):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((shape[1], 1, 1) + k).astype(dtype)
    gconv = registry.lookup("GroupConvolution", "opset1")
    (got,) = gconv.run(_attrs(gconv, strides, dil, pb, pe), x, w)
    assert got.dtype == dtype and got.flags.c_contiguous
    # The same sums in the same order: the same bits.
    np.testing.assert_array_equal(got, _depthwise_tap_loop(x, w[:, 0, 0], strides, dil, pb, pe))
    want = np.concatenate([naive_conv(x[:, c:c + 1], w[c], strides, dil, pb, pe)
                           for c in range(shape[1])], axis=1)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)
    # A non-contiguous input (a transposed view) gives the same result.
    xt = np.ascontiguousarray(np.swapaxes(x, 0, 1)).swapaxes(0, 1)
    np.testing.assert_array_equal(gconv.run(_attrs(gconv, strides, dil, pb, pe), xt, w)[0], got)


def test_depthwise_cases_take_both_layouts(monkeypatch):
    from irrun.ops import depthwise_loop

    seen = set()
    for name in ("_depthwise", "_depthwise_last", "_depthwise_fixed"):
        real = getattr(depthwise_loop, name)
        monkeypatch.setattr(depthwise_loop, name,
                            lambda *a, _real=real, _name=name: seen.add(_name) or _real(*a))
    gconv = registry.lookup("GroupConvolution", "opset1")
    for shape, k, strides, dil, pb, pe in DEPTHWISE[:1] + DEPTHWISE[3:4] + DEPTHWISE[7:8]:
        gconv.run(_attrs(gconv, strides, dil, pb, pe), np.ones(shape, np.float32),
                  np.ones((shape[1], 1, 1) + k, np.float32))
    assert seen == {"_depthwise", "_depthwise_last", "_depthwise_fixed"}


def test_depthwise_work_splits_over_the_pool(monkeypatch):
    # Small MIN_WORK_PER_THREAD: the planes (planar) and output rows (channel-last) are cut
    # into parts; the parts together give the whole result.
    from irrun.ops import depthwise_loop

    gconv = registry.lookup("GroupConvolution", "opset1")
    rng = np.random.default_rng(3)
    for shape, k, strides, dil, pb, pe in DEPTHWISE[:2] + DEPTHWISE[4:5] + DEPTHWISE[8:9]:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((shape[1], 1, 1) + k).astype(np.float32)
        attrs = _attrs(gconv, strides, dil, pb, pe)
        monkeypatch.setattr(depthwise_loop, "MIN_WORK_PER_THREAD", 1 << 40)
        whole = gconv.run(attrs, x, w)[0]
        monkeypatch.setattr(depthwise_loop, "MIN_WORK_PER_THREAD", 1)
        np.testing.assert_array_equal(gconv.run(attrs, x, w)[0], whole)


@pytest.mark.oracle
@pytest.mark.parametrize("shape, k, strides, dil, pb, pe", DEPTHWISE)
def test_depthwise_loop_matches_openvino(shape, k, strides, dil, pb, pe):
    import openvino as ov
    import openvino.opset8 as ops

    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape).astype(np.float32)
    p = ops.parameter(shape, np.float32, name="x")
    wd = ops.constant(rng.standard_normal((shape[1], 1, 1) + k).astype(np.float32))
    z = ops.group_convolution(p, wd, list(strides), list(pb), list(pe), list(dil))
    compare(ov.Model([z], [p]), {"x": x}, atol=1e-5)


@pytest.mark.parametrize("split_macs", [0, 1 << 62])
def test_products_of_few_output_channels_either_way(monkeypatch, split_macs):
    # Few output channels: the transposed product where it would be split over the pool
    # (here forced with _SPLIT_MACS = 0), the direct one below that; both the convolution.
    from irrun.ops import convolution

    monkeypatch.setattr(convolution, "_SPLIT_MACS", split_macs)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 20, 18)).astype(np.float32)
    w = rng.standard_normal((5, 3, 7, 7)).astype(np.float32)
    conv = registry.lookup("Convolution", "opset1")
    (got,) = conv.run(_attrs(conv, (2, 2), (1, 1), (3, 3), (3, 3)), x, w)
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, naive_conv(x, w, (2, 2), (1, 1), (3, 3), (3, 3)),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prepared_convolutions_give_the_kernels_bits(dtype):
    # Layers of static shapes with Const filters run a function prepared once per plan
    # (irrun.opkit.prepared): every fast path, with the kernels' results bit for bit.
    # Grouped filters of more than one channel a group keep the kernel.
    from irrun.run.executor import Plan
    from irrun.tools.builder import GraphBuilder

    rng = np.random.default_rng(5)
    cases = [c for c in CASES + DEPTHWISE if len(c[0]) == 4]
    g = GraphBuilder("convs")
    feed, expect = {}, set()
    for i, (shape, k, strides, dil, pb, pe) in enumerate(cases):
        x = g.parameter(f"x{i}", "f32" if dtype == np.float32 else "f64", list(shape))
        feed[f"x{i}"] = rng.standard_normal(shape).astype(dtype)
        geometry = dict(strides=list(strides), dilations=list(dil), pads_begin=list(pb),
                        pads_end=list(pe))
        c = shape[1]
        w = g.constant(rng.standard_normal((5, c) + k).astype(dtype))
        wd = g.constant(rng.standard_normal((c, 1, 1) + k).astype(dtype))
        g.result(g.op("Convolution", [x, w], name=f"conv{i}", **geometry), name=f"conv{i}")
        g.result(g.op("GroupConvolution", [x, wd], name=f"dw{i}", **geometry), name=f"dw{i}")
        expect |= {f"conv{i}", f"dw{i}"}
        if c % 2 == 0:
            wg = g.constant(rng.standard_normal((2, 3, c // 2) + k).astype(dtype))
            g.result(g.op("GroupConvolution", [x, wg], name=f"grouped{i}", **geometry),
                     name=f"grouped{i}")
    m = g.model()
    plan = Plan(m.program, m._targets(None)[0])
    assert {s.node.layer.name for s in plan.steps if s.bare is not None} == expect
    got = m.infer(feed)
    want = m.infer(feed, listener=lambda node, outputs, seconds: None)
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        assert got[name].tobytes() == want[name].tobytes(), name
