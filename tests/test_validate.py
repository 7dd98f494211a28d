"""irrun.validate: every check it makes, each on a corrupted copy of a file written by
ov.save_model, asserting the exact line and the layer named in the message.

The expected line is looked up in the corrupted text itself (never hard-coded), so a test
fails when a diagnostic points anywhere but at the line that holds the problem.
"""
from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest
from hypothesis import given, strategies as st

import irrun

ov = pytest.importorskip("openvino")
import openvino.opset8 as o  # noqa: E402


# ------------------------------------------------------------------ models written by OpenVINO

def _named(node, name):
    node.set_friendly_name(name)
    return node


def base_model():
    """x -> Convert(i32) -> out_i32;  weights (Const f32[3]) -> Convert(f16) -> out_f16."""
    x = o.parameter([-1, 3], ov.Type.f32, name="x")
    w = o.constant(np.array([1.5, 2.5, -3.25], np.float32), name="weights")
    a = _named(o.convert(x, "i32"), "to_i32")
    b = _named(o.convert(w, "f16"), "to_f16")
    return ov.Model([_named(o.result(a), "out_i32"), _named(o.result(b), "out_f16")], [x], "base")


def no_const_model():
    x = o.parameter([2, 3], ov.Type.f16, name="x")
    a = _named(o.convert(x, "f32"), "to_f32")
    return ov.Model([_named(o.result(a), "out")], [x], "no_const")


def ops_model():
    """Seed ops with bool/enum attributes and shape rules: Add, ReduceSum, Bucketize, ESS."""
    import openvino.opset3 as o3
    x = o.parameter([2, 3], ov.Type.f32, name="x")
    y = o.parameter([3], ov.Type.f32, name="y")
    total = _named(o.add(x, y), "sum")
    rsum = _named(o.reduce_sum(total, o.constant(np.array([1], np.int64), name="axes"), False),
                  "rsum")
    bounds = o.constant(np.array([1.0, 2.0, 3.0], np.float32), name="bounds")
    bk = _named(o3.bucketize(x, bounds, "i64", True), "bk")
    emb = o.constant(np.arange(10, dtype=np.float32).reshape(5, 2), name="emb")
    indices = o.parameter([4], ov.Type.i32, name="indices")
    segment_ids = o.parameter([4], ov.Type.i32, name="segment_ids")
    ess = _named(o3.embedding_segments_sum(emb, indices, segment_ids,
                                           o.constant(np.int32(3), name="num_segments"),
                                           o.constant(np.int32(0), name="default_index")), "ess")
    return ov.Model([_named(o.result(rsum), "out_rsum"), _named(o.result(bk), "out_bk"),
                     _named(o.result(ess), "out_ess")], [x, y, indices, segment_ids], "ops")


def graph_model():
    """A small CNN-like graph across many registered ops, with a dynamic batch and a
    ShapeOf -> Gather -> Concat -> Reshape chain (declared dims must agree with inference)."""
    import openvino.opset11 as o11
    rng = np.random.default_rng(0)
    x = o.parameter([-1, 3, 16, 16], ov.Type.f32, name="img")
    conv = o.convolution(x, o.constant(rng.random((4, 3, 3, 3), np.float32)),
                         [1, 1], [1, 1], [1, 1], [1, 1])
    pool = o.max_pool(o.relu(conv), [2, 2], [1, 1], [0, 0], [0, 0], [2, 2]).output(0)
    avg = o.avg_pool(pool, [1, 1], [0, 0], [0, 0], [2, 2], True)
    batch = o.gather(o.shape_of(avg), o.constant(np.array([0], np.int64)), o.constant(np.int64(0)))
    flat = o.reshape(avg, o.concat([batch, o.constant(np.array([-1], np.int64))], 0), False)
    mm = o.matmul(flat, o.constant(rng.random((196, 5), np.float32)), False, False)
    sm = o.softmax(mm, 1)
    top = o11.topk(sm, o.constant(np.int64(2)), 1, "max", "value")
    mean = o.reduce_mean(sm, o.constant(np.array([1], np.int64)), True)
    sq = o.squeeze(mean, o.constant(np.array([1], np.int64)))
    tr = o.transpose(o.unsqueeze(sq, o.constant(np.array([0], np.int64))),
                     o.constant(np.array([1, 0], np.int64)))
    i64 = lambda v: o.constant(np.array([v], np.int64))  # noqa: E731
    sl = o.slice(mm, i64(0), i64(3), i64(1), i64(1))
    sel = o.select(o.greater(sl, o.constant(np.float32(0.5))), sl, o.constant(np.float32(0)))
    split = o.split(mm, o.constant(np.int64(1)), 5)
    ones = o.broadcast(o.constant(np.float32(1)), o.shape_of(sel))
    outs = [sm, top.output(0), top.output(1), tr, sel, split.output(2), ones,
            o.convert_like(mm, o.constant(np.arange(5, dtype=np.int32))), o.clamp(mm, 0, 1),
            o.gelu(mm, "erf"), o.hswish(mm), o.sigmoid(mm), o.swish(mm), o.log_softmax(mm, 1)]
    return ov.Model([o.result(t) for t in outs], [x], "graph")


def extra_models():
    """More models for the clean-validation test: every dtype a Const can hold, scalars,
    interval dims, dynamic rank, shared Const data."""
    models = []
    for dt in (np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
               np.uint64, np.uint32, np.uint16, np.uint8, np.bool_):
        c = o.constant(np.arange(6).reshape(2, 3).astype(dt), name=f"c_{np.dtype(dt).name}")
        models.append(ov.Model([o.result(o.convert(c, "f32"))], [], f"const_{np.dtype(dt).name}"))
    s = o.constant(np.float32(2.5), name="scalar")
    p = o.parameter(ov.PartialShape([ov.Dimension(1, 5), -1]), ov.Type.i64, name="interval")
    r = o.parameter(ov.PartialShape.dynamic(), ov.Type.u8, name="any_rank")
    models.append(ov.Model([o.result(o.convert(s, "i32")), o.result(o.convert(p, "f32")),
                            o.result(o.convert(r, "boolean")), o.result(p)], [p, r], "mixed"))
    return models


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("base")
    ov.save_model(base_model(), str(d / "model.xml"), compress_to_fp16=False)
    return d / "model.xml"


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    d = tmp_path_factory.mktemp("ops")
    ov.save_model(ops_model(), str(d / "model.xml"), compress_to_fp16=False)
    return d / "model.xml"


class IR:
    """A corrupted copy of the base model: `path` and the corrupted `text`."""

    def __init__(self, path, text):
        self.path, self.text = str(path), text

    def line(self, needle, layer=None):
        """The line number of the one line containing needle (inside layer NAME if given)."""
        lines = self.text.split("\n")
        lo, hi = 0, len(lines)
        if layer is not None:
            lo = next(i for i, t in enumerate(lines) if f'name="{layer}"' in t and "<layer" in t)
            hi = next(i for i in range(lo, len(lines)) if "</layer>" in lines[i]) + 1
        hits = [i + 1 for i in range(lo, hi) if needle in lines[i]]
        assert len(hits) == 1, f"{needle!r} is on lines {hits}"
        return hits[0]

    def diags(self):
        return irrun.validate(self.path)


def layer_id(text, name):
    return re.search(rf'<layer id="(\d+)" name="{re.escape(name)}"', text).group(1)


def edge_into(text, name):
    """The <edge .../> line text that feeds layer NAME's first input."""
    lid = layer_id(text, name)
    return re.search(rf'<edge from-layer="\d+" from-port="\d+" to-layer="{lid}" to-port="\d+" />',
                     text).group(0)


def in_layer(name, old, new):
    """An edit replacing the one occurrence of `old` inside layer NAME's element."""
    def edit(text):
        start = re.search(rf'<layer id="\d+" name="{re.escape(name)}"', text).start()
        end = text.index("</layer>", start)
        block = text[start:end]
        assert block.count(old) == 1, f"{old!r} occurs {block.count(old)} times in {name}"
        return text[:start] + block.replace(old, new) + text[end:]
    return edit


def corrupt(src, tmp_path, *edits, copy_bin=True) -> IR:
    """Copy model.xml/.bin to tmp_path, applying edits: (old, new) pairs that must match
    exactly once, or functions text -> text."""
    text = open(src, encoding="utf-8").read()
    for edit in edits:
        if callable(edit):
            new = edit(text)
        else:
            old, repl = edit
            assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
            new = text.replace(old, repl)
        assert new != text, f"edit {edit!r} changed nothing"
        text = new
    xml = tmp_path / "model.xml"
    xml.write_text(text, encoding="utf-8")
    if copy_bin and os.path.exists(str(src)[:-4] + ".bin"):
        shutil.copy(str(src)[:-4] + ".bin", tmp_path / "model.bin")
    return IR(xml, text)


def poke(ir: IR, const: str, values):
    """Overwrite the .bin bytes of Const layer CONST with `values` (same byte count)."""
    m = re.search(rf'name="{const}" type="Const".*?offset="(\d+)" size="(\d+)"', ir.text, re.S)
    offset, size = int(m.group(1)), int(m.group(2))
    raw = np.asarray(values).tobytes()
    assert len(raw) == size
    with open(ir.path[:-4] + ".bin", "r+b") as f:
        f.seek(offset)
        f.write(raw)


def only(diags, code, severity="error"):
    """The single diagnostic with this code; fails listing everything otherwise."""
    found = [d for d in diags if d.code == code and d.severity == severity]
    assert len(found) == 1, "\n".join(map(str, diags))
    return found[0]


def located(d, ir: IR, line, layer=None, op=None):
    """Assert the compiler-style prefix: FILE:LINE: severity: layer 'NAME' (Type-opsetN):."""
    prefix = f"{ir.path}:{line}: {d.severity}: "
    if layer is not None:
        prefix += f"layer '{layer}' ({op}): "
    assert str(d).startswith(prefix), f"{d}\n  does not start with\n{prefix}"
    assert d.file == ir.path and d.line == line
    if layer is not None:
        assert d.layer_name == layer and d.op == op


def codes(diags):
    return sorted((d.severity, d.code) for d in diags)


# ------------------------------------------------------------------ clean files

@pytest.mark.parametrize("compress", [True, False])
def test_models_written_by_openvino_validate_clean(tmp_path, compress):
    models = [base_model(), no_const_model(), ops_model(), graph_model(), *extra_models()]
    for i, model in enumerate(models):
        xml = tmp_path / f"m{i}.xml"
        ov.save_model(model, str(xml), compress_to_fp16=compress)
        assert irrun.validate(xml) == [], f"{model.get_friendly_name()}: " + \
            "\n".join(map(str, irrun.validate(xml)))


def test_model_without_consts_needs_no_bin(tmp_path):
    ov.save_model(no_const_model(), str(tmp_path / "m.xml"))
    os.remove(tmp_path / "m.bin")
    assert irrun.validate(tmp_path / "m.xml") == []


def test_type_lookup_is_case_insensitive_like_openvino(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'type="Convert"', 'type="convert"'))
    ov.Core().read_model(ir.path)   # OpenVINO accepts it
    assert ir.diags() == []


# ------------------------------------------------------------------ structure

def test_xml_not_well_formed_reports_parser_line(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("to_f16", '<data destination_type="f16" />',
                                          '<data destination_type="f16" /><<'))
    d = only(ir.diags(), "xml")
    located(d, ir, ir.line("<<"))
    assert "not well formed" in d.message


def test_root_not_net(base, tmp_path):
    ir = corrupt(base, tmp_path, ('<net name="base"', '<model name="base"'),
                 ("</net>", "</model>"))
    d = only(ir.diags(), "not-ir")
    located(d, ir, ir.line("<model"))
    assert "<model>" in d.message and "<net>" in d.message


@pytest.mark.parametrize("version", ["12", "9", "eleven"])
def test_unsupported_ir_version(base, tmp_path, version):
    ir = corrupt(base, tmp_path, ('version="11"', f'version="{version}"'))
    d = only(ir.diags(), "ir-version")
    located(d, ir, ir.line("<net "))
    assert f"'{version}'" in d.message and "supported: 10, 11" in d.message


@pytest.mark.parametrize("attr", ["id", "type", "version"])
def test_layer_missing_id_type_or_version(base, tmp_path, attr):
    value = {"id": None, "type": ' type="Convert"', "version": ' version="opset1"'}[attr]
    text = open(base).read()
    if value is None:
        value = f' id="{layer_id(text, "to_i32")}"'
    ir = corrupt(base, tmp_path, in_layer("to_i32", value, ""))
    diags = ir.diags()
    d = only(diags, "bad-layer")
    located(d, ir, ir.line('name="to_i32"'))
    assert d.layer_name == "to_i32" and f"no {attr} attribute" in d.message
    if attr != "id":
        # The layer stays in the graph: its edges resolve, nothing else is reported.
        assert codes(diags) == [("error", "bad-layer")], "\n".join(map(str, diags))


def test_duplicate_layer_ids_point_at_both(base, tmp_path):
    text = open(base).read()
    first = layer_id(text, "to_f16")
    ir = corrupt(base, tmp_path, in_layer("to_i32", f'id="{layer_id(text, "to_i32")}"',
                                          f'id="{first}"'))
    dup = [d for d in ir.diags() if d.code == "duplicate-id"]
    assert len(dup) == 2
    lines = {d.line: d for d in dup}
    l16, l32 = ir.line('name="to_f16"'), ir.line('name="to_i32"')
    assert set(lines) == {l16, l32}
    located(lines[l32], ir, l32, "to_i32", "Convert-opset1")
    located(lines[l16], ir, l16, "to_f16", "Convert-opset1")
    assert f"line {l16}" in lines[l32].message and f"line {l32}" in lines[l16].message


def test_missing_bin_names_the_path(base, tmp_path):
    ir = corrupt(base, tmp_path, copy_bin=False)
    d = only(ir.diags(), "no-weights")
    located(d, ir, ir.line("offset=", "weights"), "weights", "Const-opset1")
    assert str(tmp_path / "model.bin") in d.message


def test_unreadable_bin_names_the_path(base, tmp_path):
    ir = corrupt(base, tmp_path, copy_bin=False)
    os.mkdir(tmp_path / "model.bin")   # a directory where the .bin should be
    d = only(ir.diags(), "no-weights")
    located(d, ir, ir.line("offset=", "weights"), "weights", "Const-opset1")
    assert str(tmp_path / "model.bin") in d.message


# ------------------------------------------------------------------ ops

@pytest.mark.parametrize("spelling", ["Convertx", "CONVERTX", "Cnvert"])
def test_unknown_type_suggests_a_near_spelling(base, tmp_path, spelling):
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'type="Convert"', f'type="{spelling}"'))
    diags = ir.diags()
    d = only(diags, "unknown-op")
    located(d, ir, ir.line('name="to_i32"'), "to_i32", f"{spelling}-opset1")
    assert f"'{spelling}'" in d.message and "did you mean Convert " in d.message
    assert "irrun ops" in d.message
    assert codes(diags) == [("error", "unknown-op")], "\n".join(map(str, diags))


def test_unknown_relux_suggests_relu(base, tmp_path):
    import irrun.ops  # noqa: F401  (registers the kernels)
    from irrun.ir import registry
    assert registry.registered_versions("ReLU")
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'type="Convert"', 'type="ReLUX"'))
    d = only(ir.diags(), "unknown-op")
    located(d, ir, ir.line('name="to_i32"'), "to_i32", "ReLUX-opset1")
    assert "did you mean ReLU" in d.message


@pytest.mark.parametrize("version", ["opset0", "opset18", "opsetx", "v1"])
def test_unknown_opset(base, tmp_path, version):
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'version="opset1"', f'version="{version}"'))
    with pytest.raises(RuntimeError):   # OpenVINO refuses these too
        ov.Core().read_model(ir.path)
    d = only(ir.diags(), "unknown-opset")
    located(d, ir, ir.line('name="to_i32"'), "to_i32", f"Convert-{version}")
    assert "Convert-1" in d.message   # what is registered


def test_newest_version_at_or_below_the_opset_is_chosen(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'version="opset1"', 'version="opset17"'))
    assert ir.diags() == []


def test_custom_op_is_noted(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'type="Convert" version="opset1"',
                                          'type="MyCustomOp" version="extension"'))
    d = only(ir.diags(), "unknown-op")
    located(d, ir, ir.line('name="to_i32"'), "to_i32", "MyCustomOp-extension")
    assert "custom op" in d.message and 'version="extension"' in d.message


def test_unknown_op_in_an_unused_layer_is_a_warning(base, tmp_path):
    # OpenVINO never builds layers that no Result needs, so the model still runs.
    text = open(base).read()
    edge = edge_into(text, "out_f16")
    ir = corrupt(base, tmp_path, in_layer("to_f16", 'type="Convert"', 'type="Convertx"'),
                 lambda t: re.sub(r'\t*<layer id="\d+" name="out_f16".*?</layer>\n', "", t,
                                  flags=re.S),
                 (edge + "\n", ""))
    diags = ir.diags()
    d = only(diags, "unknown-op", "warning")
    located(d, ir, ir.line('name="to_f16"'), "to_f16", "Convertx-opset1")
    assert not any(x.severity == "error" for x in diags), "\n".join(map(str, diags))


def test_execution_graph_dump_is_recognised(base, tmp_path):
    compiled = ov.Core().compile_model(str(base), "CPU")
    xml = tmp_path / "exec.xml"
    ov.serialize(compiled.get_runtime_model(), str(xml))
    ir = IR(xml, xml.read_text())
    d = only(ir.diags(), "exec-graph")
    located(d, ir, ir.line("<net "))
    assert "execution-graph dump" in d.message and "execTimeMcs" in d.message


# ------------------------------------------------------------------ attributes

def test_missing_required_attribute(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'destination_type="i32" ', ""))
    diags = ir.diags()
    d = only(diags, "missing-attribute")
    located(d, ir, ir.line("<data />"), "to_i32", "Convert-opset1")
    assert "'destination_type'" in d.message
    assert codes(diags) == [("error", "missing-attribute")], "\n".join(map(str, diags))


def test_unknown_attribute_is_a_warning(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'destination_type="i32"',
                                          'destination_type="i32" flavour="mild"'))
    diags = ir.diags()
    d = only(diags, "unknown-attribute", "warning")
    located(d, ir, ir.line("flavour="), "to_i32", "Convert-opset1")
    assert "'flavour'" in d.message
    assert codes(diags) == [("warning", "unknown-attribute")]


@pytest.mark.parametrize("attr,value", [("offset", "abc"), ("size", "12.5"), ("offset", "")])
def test_non_numeric_number(base, tmp_path, attr, value):
    old = {"offset": 'offset="0"', "size": 'size="12"'}[attr]
    ir = corrupt(base, tmp_path, in_layer("weights", old, f'{attr}="{value}"'))
    diags = ir.diags()
    d = only(diags, "bad-attribute")
    located(d, ir, ir.line("<data ", "weights"), "weights", "Const-opset1")
    assert f"{attr}='{value}' is not an integer" in d.message
    assert codes(diags) == [("error", "bad-attribute")], "\n".join(map(str, diags))


@pytest.mark.parametrize("layer,old,new", [
    ("to_i32", 'destination_type="i32"', 'destination_type="I32"'),
    ("x", 'element_type="f32"', 'element_type="F32"'),
])
def test_element_type_names_are_case_insensitive_like_openvino(base, tmp_path, layer, old, new):
    # OpenVINO reads these through EnumNames, which ignores case.
    ir = corrupt(base, tmp_path, in_layer(layer, old, new))
    ov.Core().read_model(ir.path)
    assert ir.diags() == []


def test_const_element_type_is_case_sensitive_like_openvino(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("weights", 'element_type="f32"', 'element_type="F32"'))
    with pytest.raises(RuntimeError, match="Unsupported element type: F32"):
        ov.Core().read_model(ir.path)
    diags = ir.diags()
    d = only(diags, "bad-attribute")
    located(d, ir, ir.line("F32", "weights"), "weights", "Const-opset1")
    assert "'f32'" in d.message
    assert codes(diags) == [("error", "bad-attribute")], "\n".join(map(str, diags))


@pytest.mark.parametrize("value", ["f33", "FP32", "bool"])
def test_unknown_element_type_in_an_attribute(base, tmp_path, value):
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'destination_type="i32"',
                                          f'destination_type="{value}"'))
    with pytest.raises(RuntimeError):   # "... is not a member of enum element::Type_t"
        ov.Core().read_model(ir.path)
    d = only(ir.diags(), "bad-attribute")
    located(d, ir, ir.line("destination_type", "to_i32"), "to_i32", "Convert-opset1")
    assert f"destination_type='{value}'" in d.message and "f32" in d.message


@pytest.mark.parametrize("layer,old", [("x", 'element_type="f32"'),
                                       ("weights", 'element_type="f32"')])
def test_unknown_element_type_of_parameter_or_const(base, tmp_path, layer, old):
    ir = corrupt(base, tmp_path, in_layer(layer, old, 'element_type="f31"'))
    d = only(ir.diags(), "bad-attribute")
    op = "Parameter-opset1" if layer == "x" else "Const-opset1"
    located(d, ir, ir.line("f31"), layer, op)
    assert "element_type='f31'" in d.message


@pytest.mark.parametrize("layer,old,new", [
    ("bk", 'with_right_bound="true"', 'with_right_bound="maybe"'),
    ("rsum", 'keep_dims="false"', 'keep_dims="no"'),
    ("rsum", 'keep_dims="false"', 'keep_dims=""'),
])
def test_bool_that_is_not_a_boolean(ops, tmp_path, layer, old, new):
    ir = corrupt(ops, tmp_path, in_layer(layer, old, new))
    ov.Core().read_model(ir.path)   # OpenVINO silently keeps the default: irrun refuses to guess
    diags = ir.diags()
    d = only(diags, "bad-attribute")
    op = {"bk": "Bucketize-opset3", "rsum": "ReduceSum-opset1"}[layer]
    located(d, ir, ir.line(new), layer, op)
    assert f"{new.replace(chr(34), chr(39))} is not a boolean (true/false)" in d.message
    assert codes(diags) == [("error", "bad-attribute")], "\n".join(map(str, diags))


@pytest.mark.parametrize("value", ["1", "0", "TRUE", "False"])
def test_bool_spellings_openvino_takes(ops, tmp_path, value):
    ir = corrupt(ops, tmp_path, in_layer("bk", 'with_right_bound="true"',
                                         f'with_right_bound="{value}"'))
    assert ir.diags() == []


@pytest.mark.parametrize("layer,old,new,allowed", [
    ("sum", 'auto_broadcast="numpy"', 'auto_broadcast="explicit"', "none, numpy, pdpd"),
    ("bk", 'output_type="i64"', 'output_type="f32"', "i32, i64"),
])
def test_enum_value_outside_its_set(ops, tmp_path, layer, old, new, allowed):
    ir = corrupt(ops, tmp_path, in_layer(layer, old, new))
    with pytest.raises(RuntimeError):
        ov.Core().read_model(ir.path)
    diags = ir.diags()
    d = only(diags, "bad-attribute")
    op = {"bk": "Bucketize-opset3", "sum": "Add-opset1"}[layer]
    located(d, ir, ir.line(new), layer, op)
    assert f"{new.replace(chr(34), chr(39))} is not one of {allowed}" in d.message
    assert codes(diags) == [("error", "bad-attribute")], "\n".join(map(str, diags))


@pytest.mark.parametrize("value", ["NUMPY", "Numpy"])
def test_enum_names_ignore_case_like_openvino(ops, tmp_path, value):
    # OpenVINO's EnumNames::as_enum compares lower-cased names.
    ir = corrupt(ops, tmp_path, in_layer("sum", 'auto_broadcast="numpy"',
                                         f'auto_broadcast="{value}"'))
    ov.Core().read_model(ir.path)
    assert ir.diags() == []


# ------------------------------------------------------------------ op rules

def _set_shape(layer, old, new):
    """Change a Parameter's shape and its declared dims together (a consistent file)."""
    def edit(text):
        text = in_layer(layer, f'shape="{old}"', f'shape="{new}"')(text)
        return in_layer(layer, f"<dim>{old}</dim>", f"<dim>{new}</dim>")(text)
    return edit


@pytest.mark.parametrize("edit,layer,op,words,also", [
    (_set_shape("y", "3", "4"), "sum", "Add-opset1", ["[2,3]", "[4]"], set()),
    (_set_shape("segment_ids", "4", "3"), "ess", "EmbeddingSegmentsSum-opset3",
     ["INDICES and SEGMENT_IDS shape must be same", "[4]", "[3]"], set()),
    (in_layer("bounds", 'shape="3"', 'shape="3, 1"'), "bk", "Bucketize-opset3",
     ["boundaries must be a 1-D tensor", "[3,1]"], set()),
    (in_layer("x", 'element_type="f32"', 'element_type="boolean"'), "bk", "Bucketize-opset3",
     ["data must be of a numeric type", "boolean"], {"sum"}),   # x feeds Add too
])
def test_shape_and_type_errors_from_op_rules(ops, tmp_path, edit, layer, op, words, also):
    ir = corrupt(ops, tmp_path, edit)
    with pytest.raises(RuntimeError):   # OpenVINO refuses these too (without a line)
        ov.Core().read_model(ir.path)
    errors = [d for d in ir.diags() if d.severity == "error"]
    assert {d.layer_name for d in errors} == {layer} | also, "\n".join(map(str, errors))
    d = next(d for d in errors if d.layer_name == layer)
    located(d, ir, ir.line(f'name="{layer}"'), layer, op)
    assert all(w in d.message for w in words), d.message


def test_constant_default_index_out_of_range_is_a_warning(ops, tmp_path):
    ir = corrupt(ops, tmp_path)
    poke(ir, "default_index", np.int32(7))
    ov.Core().read_model(ir.path)
    diags = ir.diags()
    d = only(diags, "value", "warning")
    located(d, ir, ir.line('name="ess"'), "ess", "EmbeddingSegmentsSum-opset3")
    assert "default_index 7" in d.message and "[0, 5)" in d.message
    assert codes(diags) == [("warning", "value")], "\n".join(map(str, diags))


def test_constant_boundaries_not_sorted_is_a_warning(ops, tmp_path):
    ir = corrupt(ops, tmp_path)
    poke(ir, "bounds", np.array([3.0, 1.0, 2.0], np.float32))
    diags = ir.diags()
    d = only(diags, "value", "warning")
    located(d, ir, ir.line('name="bk"'), "bk", "Bucketize-opset3")
    assert "constant" in d.message and "bound" in d.message


# ------------------------------------------------------------------ edges and ports

def test_edge_from_a_missing_layer(base, tmp_path):
    text = open(base).read()
    edge = edge_into(text, "to_i32")
    bad = re.sub(r'from-layer="\d+"', 'from-layer="99"', edge)
    ir = corrupt(base, tmp_path, (edge, bad))
    diags = ir.diags()
    d = only(diags, "bad-edge")
    located(d, ir, ir.line(bad), "to_i32", "Convert-opset1")
    assert "from-layer=99" in d.message
    # The port it was meant to feed is not reported again as unconnected.
    assert codes(diags) == [("error", "bad-edge")], "\n".join(map(str, diags))


def test_edge_to_a_missing_layer(base, tmp_path):
    text = open(base).read()
    edge = edge_into(text, "out_i32")
    bad = re.sub(r'to-layer="\d+"', 'to-layer="42"', edge)
    ir = corrupt(base, tmp_path, (edge, bad))
    diags = ir.diags()
    d = only(diags, "bad-edge")
    located(d, ir, ir.line(bad), "to_i32", "Convert-opset1")
    assert "to-layer=42" in d.message
    assert only(diags, "unconnected-input").layer_name == "out_i32"


@pytest.mark.parametrize("end", ["from-port", "to-port"])
def test_edge_to_a_missing_port(base, tmp_path, end):
    text = open(base).read()
    edge = edge_into(text, "to_i32")
    bad = re.sub(rf'{end}="\d+"', f'{end}="7"', edge)
    ir = corrupt(base, tmp_path, (edge, bad))
    diags = ir.diags()
    d = only(diags, "bad-edge")
    name, op = ("x", "Parameter-opset1") if end == "from-port" else ("to_i32", "Convert-opset1")
    located(d, ir, ir.line(bad), name, op)
    assert f"{end}=7" in d.message and "port 7" in d.message
    assert codes(diags) == [("error", "bad-edge")], "\n".join(map(str, diags))


def test_input_port_with_no_edge(base, tmp_path):
    text = open(base).read()
    edge = edge_into(text, "to_i32")
    ir = corrupt(base, tmp_path, (edge, ""))
    diags = ir.diags()
    d = only(diags, "unconnected-input")
    located(d, ir, ir.line('<port id="0"', "to_i32"), "to_i32", "Convert-opset1")
    # The Parameter x is a model input: an unused one is not a mistake.
    assert codes(diags) == [("error", "unconnected-input")], "\n".join(map(str, diags))


def test_two_edges_into_one_port(base, tmp_path):
    text = open(base).read()
    edge = edge_into(text, "out_i32")
    wid = layer_id(text, "to_f16")
    second = re.sub(r'from-layer="\d+"', f'from-layer="{wid}"', edge)
    ir = corrupt(base, tmp_path, (edge, edge + "\n\t\t" + second))
    d = only(ir.diags(), "duplicate-edge")
    located(d, ir, ir.line(second), "out_i32", "Result-opset1")
    assert f"line {ir.line(edge)}" in d.message


def test_cycle_names_its_layers(base, tmp_path):
    # weights -> to_f16 becomes out-of-to_i32 -> to_f16, and to_f16 feeds to_i32: a loop.
    text = open(base).read()
    i32, f16 = layer_id(text, "to_i32"), layer_id(text, "to_f16")
    into_f16, into_i32 = edge_into(text, "to_f16"), edge_into(text, "to_i32")
    ir = corrupt(base, tmp_path,
                 (into_f16, f'<edge from-layer="{i32}" from-port="1" to-layer="{f16}" to-port="0" />'),
                 (into_i32, f'<edge from-layer="{f16}" from-port="1" to-layer="{i32}" to-port="0" />'))
    diags = ir.diags()
    d = only(diags, "cycle")
    # Reported at the cycle's first layer in the file, naming every layer in it.
    located(d, ir, ir.line('name="to_f16"'), "to_f16", "Convert-opset1")
    assert d.message == (f"the graph has a cycle: 'to_f16' (id {f16}) -> 'to_i32' (id {i32}) "
                         f"-> 'to_f16' (id {f16})")
    # weights now feeds nothing: reported even though the graph has a cycle.
    assert only(diags, "unused-layer", "warning").layer_name == "weights"


def test_a_layer_feeding_itself_is_a_cycle(base, tmp_path):
    text = open(base).read()
    i32 = layer_id(text, "to_i32")
    ir = corrupt(base, tmp_path, (edge_into(text, "to_i32"),
                                  f'<edge from-layer="{i32}" from-port="1" to-layer="{i32}" to-port="0" />'))
    diags = ir.diags()
    d = only(diags, "cycle")
    located(d, ir, ir.line('name="to_i32"'), "to_i32", "Convert-opset1")
    assert d.message == f"the graph has a cycle: 'to_i32' (id {i32}) -> 'to_i32' (id {i32})"
    assert codes(diags) == [("error", "cycle")], "\n".join(map(str, diags))


def test_layers_no_result_needs_are_warned_about(base, tmp_path):
    text = open(base).read()
    ir = corrupt(base, tmp_path,
                 lambda t: re.sub(r'\t*<layer id="\d+" name="out_f16".*?</layer>\n', "", t,
                                  flags=re.S),
                 (edge_into(text, "out_f16") + "\n", ""))
    diags = ir.diags()
    unused = {d.layer_name: d for d in diags if d.code == "unused-layer"}
    assert set(unused) == {"weights", "to_f16"}
    located(unused["to_f16"], ir, ir.line('name="to_f16"'), "to_f16", "Convert-opset1")
    assert all(d.severity == "warning" for d in diags), "\n".join(map(str, diags))


def test_no_result_is_an_error(base, tmp_path):
    text = open(base).read()
    ir = corrupt(base, tmp_path,
                 lambda t: re.sub(r'\t*<layer id="\d+" name="out_\w+".*?</layer>\n', "", t,
                                  flags=re.S),
                 (edge_into(text, "out_f16") + "\n", ""), (edge_into(text, "out_i32") + "\n", ""))
    d = only(ir.diags(), "no-result")
    located(d, ir, ir.line("<net "))
    assert "no Result" in d.message


# ------------------------------------------------------------------ data

@pytest.mark.parametrize("layer,old,new", [
    ("x", 'shape="?,3"', 'shape="?,,3"'),
    ("x", 'shape="?,3"', 'shape="3..1,3"'),
    ("weights", 'shape="3"', 'shape="three"'),
])
def test_shape_strings_that_do_not_parse(base, tmp_path, layer, old, new):
    ir = corrupt(base, tmp_path, in_layer(layer, old, new))
    diags = ir.diags()
    d = only(diags, "bad-attribute")
    op = "Parameter-opset1" if layer == "x" else "Const-opset1"
    located(d, ir, ir.line(new), layer, op)
    assert f"shape='{new[7:-1]}' is not a partial shape" in d.message


def test_dynamic_const_shape(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("weights", 'shape="3"', 'shape="?"'))
    d = only(ir.diags(), "bad-shape")
    located(d, ir, ir.line('shape="?"'), "weights", "Const-opset1")
    assert "not static" in d.message


@pytest.mark.parametrize("dim", ["-2", "three", "", "1.5"])
def test_bad_dim(base, tmp_path, dim):
    ir = corrupt(base, tmp_path, in_layer("to_f16", "<dim>3</dim>\n\t\t\t\t</port>\n\t\t\t</output>",
                                          f"<dim>{dim}</dim>\n\t\t\t\t</port>\n\t\t\t</output>"))
    diags = ir.diags()
    d = only(diags, "bad-dim")
    located(d, ir, ir.line(f"<dim>{dim}</dim>"), "to_f16", "Convert-opset1")
    assert f"<dim>{dim}</dim>" in d.message
    assert ("below -1" if dim == "-2" else "not a number") in d.message


@pytest.mark.parametrize("precision", ["FP33", "float"])
def test_unknown_port_precision(base, tmp_path, precision):
    ir = corrupt(base, tmp_path, in_layer("to_i32", 'precision="I32"', f'precision="{precision}"'))
    diags = ir.diags()
    d = only(diags, "bad-precision")
    located(d, ir, ir.line(precision), "to_i32", "Convert-opset1")
    assert f"'{precision}'" in d.message
    assert codes(diags) == [("error", "bad-precision")], "\n".join(map(str, diags))


def test_const_past_the_end_of_the_bin(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("weights", 'offset="0"', 'offset="4"'))
    d = only(ir.diags(), "const-offset")
    located(d, ir, ir.line('offset="4"'), "weights", "Const-opset1")
    assert "offset=4 + size=12" in d.message and "12 bytes" in d.message


def test_const_size_past_the_end_even_when_the_shape_fits(base, tmp_path):
    # OpenVINO reads `size` bytes, so a size past the end fails there even though the shape
    # needs fewer.
    ir = corrupt(base, tmp_path, in_layer("weights", 'size="12"', 'size="16"'))
    diags = ir.diags()
    d = only(diags, "const-offset")
    located(d, ir, ir.line('size="16"'), "weights", "Const-opset1")
    assert codes(diags) == [("error", "const-offset")], "\n".join(map(str, diags))


def test_truncated_bin(base, tmp_path):
    ir = corrupt(base, tmp_path)
    with open(tmp_path / "model.bin", "r+b") as f:
        f.truncate(10)
    d = only(ir.diags(), "const-offset")
    located(d, ir, ir.line("offset="), "weights", "Const-opset1")
    assert "(10 bytes)" in d.message


def test_const_size_too_small(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("weights", 'size="12"', 'size="8"'))
    diags = ir.diags()
    d = only(diags, "const-size")
    located(d, ir, ir.line('size="8"'), "weights", "Const-opset1")
    assert "size=8" in d.message and "12 bytes" in d.message and "[3]" in d.message
    assert codes(diags) == [("error", "const-size")], "\n".join(map(str, diags))


def test_const_size_larger_than_needed_is_a_warning(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("weights", 'size="12"', 'size="20"'))
    with open(tmp_path / "model.bin", "ab") as f:
        f.write(bytes(8))
    ov.Core().read_model(ir.path)   # OpenVINO accepts it
    diags = ir.diags()
    d = only(diags, "const-size", "warning")
    located(d, ir, ir.line('size="20"'), "weights", "Const-opset1")
    assert "size=20" in d.message and "12 bytes" in d.message
    assert codes(diags) == [("warning", "const-size")]


def test_negative_offset(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("weights", 'offset="0"', 'offset="-4"'))
    d = only(ir.diags(), "const-offset")
    located(d, ir, ir.line('offset="-4"'), "weights", "Const-opset1")


# ------------------------------------------------------------------ declared vs inferred

def test_declared_output_dims_disagree(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("to_f16", "<dim>3</dim>\n\t\t\t\t</port>\n\t\t\t</output>",
                                          "<dim>4</dim>\n\t\t\t\t</port>\n\t\t\t</output>"))
    ov.Core().read_model(ir.path)   # OpenVINO silently accepts it
    diags = ir.diags()
    d = only(diags, "declared-mismatch", "warning")
    located(d, ir, ir.line('<port id="1"', "to_f16"), "to_f16", "Convert-opset1")
    assert "[4]" in d.message and "[3]" in d.message
    assert codes(diags) == [("warning", "declared-mismatch")], "\n".join(map(str, diags))


def test_declared_output_precision_disagrees(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("to_i32", '<port id="1" precision="I32"',
                                          '<port id="1" precision="I64"'))
    d = only(ir.diags(), "declared-mismatch", "warning")
    located(d, ir, ir.line('precision="I64"'), "to_i32", "Convert-opset1")
    assert "I64" in d.message and "i32" in d.message


@pytest.mark.parametrize("old,new,shown", [
    ('precision="FP32"', 'precision="FP16"', ("FP16", "f32")),
    ("<dim>3</dim>", "<dim>5</dim>", ("[5]", "[3]")),
])
def test_const_declared_output_disagrees(base, tmp_path, old, new, shown):
    ir = corrupt(base, tmp_path, in_layer("weights", old, new))
    d = only(ir.diags(), "declared-mismatch", "warning")
    located(d, ir, ir.line('<port id=', "weights"), "weights", "Const-opset1")
    assert all(s in d.message for s in shown), d.message


def test_declared_input_port_disagrees(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("out_f16", 'precision="FP16"', 'precision="FP32"'))
    d = only(ir.diags(), "declared-mismatch", "warning")
    located(d, ir, ir.line('precision="FP32"', "out_f16"), "out_f16", "Result-opset1")
    assert d.message == "input port 0 declares precision FP32 but receives f16"


def test_interval_and_dynamic_dims_are_declared_as_minus_one(tmp_path):
    p = o.parameter(ov.PartialShape([ov.Dimension(2, 9), -1, 4]), ov.Type.f32, name="p")
    ov.save_model(ov.Model([o.result(o.convert(p, "i8"))], [p]), str(tmp_path / "m.xml"))
    assert irrun.validate(tmp_path / "m.xml") == []


# ------------------------------------------------------------------ one pass

def test_every_independent_problem_in_one_pass(base, tmp_path):
    text = open(base).read()
    ir = corrupt(base, tmp_path,
                 in_layer("to_i32", 'destination_type="i32"', 'destination_type="f33"'),
                 in_layer("weights", 'size="12"', 'size="8"'),
                 in_layer("to_f16", 'type="Convert"', 'type="Convertx"'),
                 in_layer("out_i32", "<dim>3</dim>", "<dim>x</dim>"),
                 (edge_into(text, "to_i32"),
                  re.sub(r'from-port="\d+"', 'from-port="5"', edge_into(text, "to_i32"))),
                 in_layer("out_f16", 'precision="FP16"', 'precision="FP32"'))
    diags = ir.diags()
    got = sorted((d.severity, d.code, d.layer_name) for d in diags)
    assert got == [("error", "bad-attribute", "to_i32"), ("error", "bad-dim", "out_i32"),
                   ("error", "bad-edge", "x"), ("error", "const-size", "weights"),
                   ("error", "unknown-op", "to_f16")], "\n".join(map(str, diags))


def test_validate_never_raises_on_garbage(tmp_path):
    for i, content in enumerate([b"", b"\x00\xff" * 100, b"<net", b"<net version='11'/>",
                                 b"<net version='11'><layers><layer/></layers></net>"]):
        p = tmp_path / f"g{i}.xml"
        p.write_bytes(content)
        diags = irrun.validate(p)
        assert diags and all(d.file == str(p) for d in diags)


def test_missing_model_file(tmp_path):
    d = only(irrun.validate(tmp_path / "nope.xml"), "read")
    assert "nope.xml" in d.message


def test_invalid_model_raises_model_error_with_the_same_diagnostics(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("weights", 'size="12"', 'size="8"'))
    with pytest.raises(irrun.ModelError) as info:
        irrun.read_model(ir.path)
    assert [str(d) for d in info.value.diagnostics] == [str(d) for d in ir.diags()]


# ------------------------------------------------------------------ ports against the op

def test_more_input_ports_than_the_op_takes(base, tmp_path):
    text = open(base).read()
    x, i32 = layer_id(text, "x"), layer_id(text, "to_i32")
    edge = edge_into(text, "to_i32")
    extra = '<port id="5" precision="FP32"><dim>-1</dim><dim>3</dim></port>\n\t\t\t</input>'
    ir = corrupt(base, tmp_path, in_layer("to_i32", "</input>", extra),
                 (edge, edge + f'\n\t\t<edge from-layer="{x}" from-port="0" to-layer="{i32}" '
                  'to-port="5" />'))
    diags = ir.diags()
    d = only(diags, "input-count")
    located(d, ir, ir.line('name="to_i32"'), "to_i32", "Convert-opset1")
    assert d.message == "Convert-1 takes 1 input, the layer has 2"
    assert codes(diags) == [("error", "input-count")], "\n".join(map(str, diags))


def test_more_output_ports_than_the_op_has(base, tmp_path):
    ir = corrupt(base, tmp_path, in_layer("to_i32", "</output>",
                                          '<port id="6" precision="I32" />\n\t\t\t</output>'))
    diags = ir.diags()
    d = only(diags, "port-count")
    located(d, ir, ir.line('name="to_i32"'), "to_i32", "Convert-opset1")
    assert "declares 2 output ports but Convert-1 has 1 output" in d.message


@pytest.mark.parametrize("old,new,code,what", [
    ('<port id="0" precision="FP32">', '<port id="zero" precision="FP32">', "bad-port",
     "port id 'zero' is not an integer"),
    ('<port id="0" precision="FP32">', '<port precision="FP32">', "bad-port", "port id is missing"),
])
def test_port_id_that_is_not_a_number(base, tmp_path, old, new, code, what):
    ir = corrupt(base, tmp_path, in_layer("to_i32", old, new))
    diags = ir.diags()
    d = only(diags, code)
    located(d, ir, ir.line(new), "to_i32", "Convert-opset1")
    assert what in d.message
    # The edge that names port 0 is the same problem: not reported again.
    assert codes(diags) == [("error", code)], "\n".join(map(str, diags))


@pytest.mark.parametrize("attr,value,what", [("to-port", "x", "edge to-port 'x' is not an integer"),
                                             ("from-port", None, "no from-port attribute")])
def test_edge_attribute_missing_or_not_a_number(base, tmp_path, attr, value, what):
    text = open(base).read()
    edge = edge_into(text, "to_i32")
    bad = re.sub(rf' {attr}="\d+"', "" if value is None else f' {attr}="{value}"', edge)
    ir = corrupt(base, tmp_path, (edge, bad))
    diags = ir.diags()
    d = only(diags, "bad-edge")
    located(d, ir, ir.line(bad), "to_i32", "Convert-opset1")
    assert what in d.message
    assert codes(diags) == [("error", "bad-edge")], "\n".join(map(str, diags))


# ------------------------------------------------------------------ never a traceback

_VALUES = ["", "-1", "0", "1", "x", "99999999999999999999", "f32", "?", "1,,2", "true", "-7",
           "3..1", "opset3", "extension"]


@given(data=st.data())
def test_random_corruptions_give_located_diagnostics_never_exceptions(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("fuzz")
    ov.save_model(ops_model(), str(tmp / "src.xml"), compress_to_fp16=False)
    lines = (tmp / "src.xml").read_text().split("\n")
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["delete", "duplicate", "value"]))
        if action == "delete":
            del lines[i]
        elif action == "duplicate":
            lines.insert(i, lines[i])
        else:
            values = re.findall(r'="[^"]*"', lines[i])
            if values:
                old = data.draw(st.sampled_from(values))
                lines[i] = lines[i].replace(old, '="' + data.draw(st.sampled_from(_VALUES)) + '"', 1)
    xml = tmp / "model.xml"
    xml.write_text("\n".join(lines))
    shutil.copy(tmp / "src.bin", tmp / "model.bin")
    names = set(re.findall(r'name="([^"]*)"', "\n".join(lines)))
    for d in irrun.validate(xml):
        assert d.severity in ("error", "warning") and d.file == str(xml)
        assert d.line is None or 1 <= d.line <= len(lines), str(d)
        assert d.layer_name is None or d.layer_name in names, str(d)
        assert str(d).startswith(f"{xml}:") and d.message
