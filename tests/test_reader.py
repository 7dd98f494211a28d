"""The reader: element types, Const decoding, port resolution, MO-era files, v10/v11."""
import numpy as np
import pytest

import irrun
from irfiles import IRBuilder

ov = pytest.importorskip("openvino")


def _ov_outputs(xml):
    compiled = ov.Core().compile_model(xml, "CPU")
    return [np.array(v) for v in compiled({}).values()]


SUBBYTE = {
    "u1": np.array([1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0], np.uint8),
    "u4": np.array([1, 15, 3, 7, 9], np.uint8),
    "i4": np.array([-8, 7, -1, 0, 3, -5, 2], np.int8),
}


@pytest.mark.parametrize("et", sorted(SUBBYTE))
def test_subbyte_const_bit_order_matches_openvino(tmp_path, et):
    # u1 is most-significant-bit first, u4/i4 low nibble first (ir-format.md).
    b = IRBuilder()
    c = b.const("c", SUBBYTE[et], et)
    conv = b.op("Convert", "opset1", [c], [0], [1], {"destination_type": "i32"},
                out_dims=[[SUBBYTE[et].size]], out_precisions=["I32"])
    b.result((conv, 1))
    xml = b.write(tmp_path)
    got = irrun.read_model(xml).infer({})
    (value,) = got.values()
    np.testing.assert_array_equal(value, SUBBYTE[et].astype(np.int32))
    np.testing.assert_array_equal(value, _ov_outputs(xml)[0])


@pytest.mark.parametrize("et,dtype", [
    ("f64", np.float64), ("f32", np.float32), ("f16", np.float16), ("i64", np.int64),
    ("i32", np.int32), ("i16", np.int16), ("i8", np.int8), ("u64", np.uint64),
    ("u32", np.uint32), ("u16", np.uint16), ("u8", np.uint8), ("boolean", np.bool_),
])
def test_byte_types_read_as_numpy(tmp_path, et, dtype):
    values = np.array([[1, 0, 3], [5, 7, 0]]).astype(dtype)
    b = IRBuilder()
    # pad_before=1 makes every Const unaligned in the .bin: the reader must cope.
    c = b.const("c", values, et, pad_before=1)
    b.result(c, name="out")
    xml = b.write(tmp_path)
    model = irrun.read_model(xml)
    out = model.infer({})["out"]
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, values)


def test_bf16_const_is_the_high_half_of_f32(tmp_path):
    import ml_dtypes
    values = np.array([1.5, -2.25, 3.0, 65280.0], np.float32)
    b = IRBuilder()
    c = b.const("c", values.astype(ml_dtypes.bfloat16), "bf16")
    conv = b.op("Convert", "opset1", [c], [0], [1], {"destination_type": "f32"}, out_dims=[[4]],
                out_precisions=["FP32"])
    b.result((conv, 1))
    xml = b.write(tmp_path)
    raw = open(xml[:-4] + ".bin", "rb").read()
    assert raw == (values.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    (out,) = irrun.read_model(xml).infer({}).values()
    np.testing.assert_array_equal(out, values)
    np.testing.assert_array_equal(out, _ov_outputs(xml)[0])


def test_consts_may_share_one_offset(tmp_path):
    b = IRBuilder()
    c1 = b.const("a", np.arange(4, dtype=np.int32), "i32")
    c2 = b.const("b", np.arange(4, dtype=np.int32), "i32", offset=0)
    b.result(c1, "o1")
    b.result(c2, "o2")
    out = irrun.read_model(b.write(tmp_path)).infer({})
    np.testing.assert_array_equal(out["o1"], out["o2"])


def test_const_data_is_memory_mapped_not_copied(tmp_path):
    b = IRBuilder()
    c = b.const("c", np.arange(1000, dtype=np.float32), "f32")
    b.result(c)
    model = irrun.read_model(b.write(tmp_path))
    node = model.program.nodes[c[0]]
    assert not node.const_value.flags.owndata
    assert not node.const_value.flags.writeable


def test_model_optimizer_era_port_numbering(tmp_path):
    # Older files number ports freely: a Const output with id 1, input ids with gaps.
    # Edges resolve among the consumer's <input> and the producer's <output> ports, and the
    # input index is the port's position.
    b = IRBuilder(version=10)
    x = b.parameter("x", "f32", "2", [2], out_port=5)
    c = b.const("c", np.array([7.0, 9.0], np.float32), "f32", out_port=1)
    conv = b.op("Convert", "opset1", [x], [3], [9], {"destination_type": "i32"}, out_dims=[[2]])
    b.result((conv, 9), "o1")
    b.result(c, "o2")
    model = irrun.read_model(b.write(tmp_path))
    out = model.infer({"x": np.array([1.5, -2.5], np.float32)})
    np.testing.assert_array_equal(list(out.values())[0], [1, -2])


def test_v10_file_without_port_names_names_inputs_by_layer(tmp_path):
    b = IRBuilder(version=10)
    lid = b._id()
    b.layers.append(f'<layer id="{lid}" name="data" type="Parameter" version="opset1">'
                    '<data shape="3" element_type="i32"/><output><port id="0">'
                    "<dim>3</dim></port></output></layer>")
    b.result((lid, 0), "res")
    model = irrun.read_model(b.write(tmp_path))
    assert model.inputs[0].name == "data"
    assert model.outputs[0].name == "res"


def test_input_and_output_names_from_ov_save_model(tmp_path):
    import openvino.opset8 as o
    p = o.parameter([2], ov.Type.f32, name="features")
    r = o.result(o.convert(p, "f16"))
    r.get_output_tensor(0).set_names({"half"})
    m = ov.Model([r], [p], "names")
    xml = str(tmp_path / "m.xml")
    ov.save_model(m, xml)
    model = irrun.read_model(xml)
    assert [i.name for i in model.inputs] == ["features"]
    assert [o_.name for o_ in model.outputs] == ["half"]
    assert model.inputs[0].shape == (irrun.Dim(2, 2),)


@pytest.mark.parametrize("compress", [True, False])
def test_ov_save_model_f16_compression_runs(tmp_path, compress):
    import openvino.opset8 as o
    w = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    p = o.parameter([-1, 4], ov.Type.f32, name="x")
    # Convert(Const) alone would be folded by save_model; feed the weights through a
    # Convert to f32 of the parameter's type so the decompression Convert survives.
    out = o.convert(o.constant(w), "f32")
    m = ov.Model([o.result(out), o.result(o.convert(p, "i64"))], [p], "w")
    xml = str(tmp_path / "m.xml")
    ov.save_model(m, xml, compress_to_fp16=compress)
    text = open(xml).read()
    assert ('element_type="f16"' in text) == compress
    model = irrun.read_model(xml)
    got = model.infer({"x": np.ones((2, 4), np.float32)})
    expected = w.astype(np.float16).astype(np.float32) if compress else w
    np.testing.assert_array_equal(list(got.values())[0], expected)
