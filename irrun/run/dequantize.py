"""Weight decompression subgraphs computed in f32, as OpenVINO's CPU plugin computes them.

NNCF writes compressed weights (int4/int8/nf4, u4/i4/u8/i8 Consts) as
`Convert(-> f16) [-> Subtract(zero point)] -> Multiply(scale) [-> Reshape] -> Convert(-> f32)`,
the zero point and scale f16. Read literally, the Subtract and Multiply are f16 ops and
round to f16; OpenVINO's plugin instead decompresses into f32 inside its MatMul
(`(w - zp) * scale`, each operand exact in f32, one rounding), and so gives different
logits: on models/genai_llama_int4 the literal f16 chain is 7.1e-3 (max abs, logits up to
3.3) away from the CPU plugin, the f32 one 4.3e-6. irrun follows the plugin when it folds
the chain at load (the final Convert recomputes it from the Consts); with folding off
(`read_model(..., fold=False)`, IRRUN_FOLD=0) every layer runs as written, in f16.
"""
from __future__ import annotations

import numpy as np

_INTEGER = frozenset(("u4", "i4", "u8", "i8", "nf4"))


def _value(node, out: int = 0):
    """A Const's or a folded layer's array, or None."""
    if node.kind == "const":
        v = node.const_value
    elif node.folded is not None:
        v = node.folded[out]
    else:
        return None
    return v if type(v) is np.ndarray else None


def _producer(node, position: int):
    src, out = node.inputs[position]
    return node.program.nodes[src], out


def _etype(node, out: int = 0) -> str | None:
    return node.specs[out].etype.name if node.specs and len(node.specs) > out else None


def _integer_weights(node, out: int) -> np.ndarray | None:
    """The integer values behind a Convert(u4/i4/u8/i8 Const -> f16), as f32, or None."""
    if node.layer.type != "Convert" or _etype(node, out) != "f16" or len(node.inputs) != 1:
        return None
    src, src_out = _producer(node, 0)
    if src.kind != "const" or _etype(src, src_out) not in _INTEGER - {"nf4"}:
        return None
    v = _value(src, src_out)
    return None if v is None else v.astype(np.float32)


def decompressed_in_f32(node) -> np.ndarray | None:
    """The f32 output of a decompression Convert(f16 -> f32) computed in f32 from the
    chain's Consts, or None when `node` ends no such chain (or a link is not folded)."""
    if node.layer.type != "Convert" or _etype(node) != "f32" or len(node.inputs) != 1:
        return None
    top, top_out = _producer(node, 0)
    if _etype(top, top_out) != "f16":
        return None
    shape = None
    if top.layer.type == "Reshape":
        folded = _value(top, top_out)
        if folded is None:
            return None
        shape = folded.shape
        top, top_out = _producer(top, 0)
    if top.layer.type != "Multiply" or len(top.inputs) != 2:
        return None
    for w_pos in (0, 1):
        x, x_out = _producer(top, w_pos)
        s, s_out = _producer(top, 1 - w_pos)
        scale = _value(s, s_out)
        if scale is None or scale.dtype != np.float16:
            continue
        weights = _integer_weights(x, x_out)
        if weights is None and x.layer.type == "Subtract" and len(x.inputs) == 2:
            c, c_out = _producer(x, 0)
            z, z_out = _producer(x, 1)
            zero = _value(z, z_out)
            ints = _integer_weights(c, c_out)
            if ints is not None and zero is not None and zero.dtype == np.float16:
                weights = ints - zero.astype(np.float32)
        if weights is None:
            continue
        try:
            out = weights * scale.astype(np.float32)
            expected = _value(top, top_out)
            if expected is None or out.shape != expected.shape:
                return None
            return out.reshape(shape) if shape is not None else out
        except ValueError:      # shapes that do not broadcast: the kernels report that
            return None
    return None
