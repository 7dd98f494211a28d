"""Writing IR v11 (model.xml + model.bin): from a model irrun read, a subgraph cut from one, or
a network built in Python (irrun.tools.builder).

The writer works on a neutral description, `Net`: layers with their `<data>` attributes as
text, their ports (precision, dims, tensor names) and, for a Const, its bytes. A model read
from a file is described layer for layer as the file has it (attributes as written, port ids,
names), so reading an OpenVINO-written file and writing it again gives the same graph. What
irrun does not model is copied from the source file verbatim: each layer's and the net's
`<rt_info>`, and the bodies of Loop/TensorIterator/If (port maps, back edges, body networks;
their Consts get new offsets into the new .bin).

Const bytes are deduplicated (one copy of equal bytes) and each blob starts at a multiple of
`ALIGN` bytes in the .bin. The XML and the .bin are written to temporary files and renamed.
"""
from __future__ import annotations

import copy
import hashlib
import os
import tempfile
from dataclasses import dataclass, field

import numpy as np
from lxml import etree

from ..errors import IrrunError
from .etypes import element_type

ALIGN = 64

# IR port precisions by element type (the names OpenVINO's serializer writes).
PRECISION = {
    "f64": "FP64", "f32": "FP32", "f16": "FP16", "bf16": "BF16",
    "i64": "I64", "i32": "I32", "i16": "I16", "i8": "I8",
    "u64": "U64", "u32": "U32", "u16": "U16", "u8": "U8",
    "boolean": "BOOL", "u1": "U1", "u4": "U4", "i4": "I4",
    "u2": "U2", "u3": "U3", "u6": "U6", "nf4": "NF4", "f8e4m3": "F8E4M3",
    "f8e5m2": "F8E5M2", "f8e8m0": "F8E8M0", "f4e2m1": "F4E2M1", "string": "STRING",
}


@dataclass
class WPort:
    id: int
    precision: str | None
    dims: list[int] | None          # -1 for a dynamic dim; None: write no <dim>
    names: list[str] = field(default_factory=list)


@dataclass
class WLayer:
    id: str
    name: str
    type: str
    version: str | None
    data: dict[str, str] = field(default_factory=dict)
    inputs: list[WPort] = field(default_factory=list)
    outputs: list[WPort] = field(default_factory=list)
    const_bytes: bytes | None = None        # a Const's data
    # Verbatim lxml elements (rt_info, bodies), each as (after the ports?, element).
    extras: list = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)   # other <layer> attributes


@dataclass
class WEdge:
    from_layer: str
    from_port: int
    to_layer: str
    to_port: int


@dataclass
class Net:
    name: str
    layers: list[WLayer]
    edges: list[WEdge]
    extras: list = field(default_factory=list)   # the net's own <rt_info>
    source_bin: str | None = None                # for Consts inside copied bodies


# ---------------------------------------------------------------- from a model irrun read

def _source_elements(xml_path: str) -> tuple[dict, list]:
    """{layer id: [verbatim children irrun does not model]} and {layer id: {other layer
    attributes}} of the top-level layers, and the net's <rt_info>, re-read from the source
    file with the hardened parser."""
    from .reader import hardened_parser

    try:
        with open(xml_path, "rb") as f:
            root = etree.fromstring(f.read(), hardened_parser())
    except (OSError, etree.XMLSyntaxError) as e:
        raise IrrunError(f"cannot re-read the source model to copy what irrun does not "
                         f"model (rt_info, bodies): {e}", file=xml_path, code="read") from None
    extras: dict[str, list] = {}
    attributes: dict[str, dict] = {}
    layers = root.find("layers")
    for el in (layers if layers is not None else ()):
        if el.tag != "layer":
            continue
        # Each kept child remembers whether it stood before the ports (OpenVINO writes a
        # layer's <rt_info> there) or after them (port maps, bodies).
        kept, seen_ports = [], False
        for c in el:
            if not isinstance(c.tag, str):
                continue
            if c.tag in ("input", "output"):
                seen_ports = True
            elif c.tag != "data":
                kept.append((seen_ports, copy.deepcopy(c)))
        if kept:
            extras[el.get("id")] = kept
        more = {k: v for k, v in el.attrib.items() if k not in ("id", "name", "type", "version")}
        if more:     # a Result's output_names, ...
            attributes[el.get("id")] = more
    net_extras = [copy.deepcopy(c) for c in root if isinstance(c.tag, str)
                  and c.tag not in ("layers", "edges")]
    return extras, attributes, net_extras


def join_names(names) -> str:
    """A `names` attribute, commas inside a name escaped as OpenVINO writes them (`\\,`)."""
    return ",".join(n.replace(",", "\\,") for n in names)


def _wport(port) -> WPort:
    return WPort(port.id, port.precision, list(port.dims) if port.dims is not None else None,
                 list(port.names))


def net_from_program(program) -> Net:
    """The Net of a model irrun read (its top-level network; bodies are copied verbatim)."""
    doc = program.doc
    extras, attributes, net_extras = _source_elements(program.path)
    layers = []
    for layer in doc.layers:
        w = WLayer(layer.id, layer.name, layer.type, layer.version, dict(layer.data),
                   [_wport(p) for p in layer.inputs], [_wport(p) for p in layer.outputs],
                   extras=extras.get(layer.id, []), attributes=attributes.get(layer.id, {}))
        if layer.type.lower() == "const":
            w.const_bytes = _const_bytes(program, layer)
        layers.append(w)
    edges = [WEdge(e.from_layer, e.from_port, e.to_layer, e.to_port) for e in doc.edges
             if not e.broken]
    return Net(doc.name, layers, edges, net_extras, source_bin=program.bin_path)


def _const_bytes(program, layer) -> bytes:
    """The bytes the Const reads from the .bin (its `size`, as OpenVINO reads them)."""
    node = program.nodes.get(layer.id)
    size = int(layer.data.get("size", "0") or 0)
    if size == 0:
        return b""
    if program.weights is not None:
        offset = int(layer.data.get("offset", "0"))
        return bytes(program.weights.slice(offset, size))
    if node is not None and node.const_value is not None:
        return encode(np.asarray(node.const_value), node.attrs.element_type)
    raise IrrunError(f"the bytes of Const '{layer.name}' are not available (no .bin)",
                     file=program.path, line=layer.line, code="write")


# ---------------------------------------------------------------- encoding values

def encode(value: np.ndarray, etype) -> bytes:
    """A tensor's bytes as OpenVINO stores them in the .bin (sub-byte types packed: u1 most
    significant bit first, u4/i4 low nibble first, as irrun's reader unpacks them)."""
    et = element_type(etype)
    a = np.ascontiguousarray(value)
    if et.name == "boolean":
        return a.astype(np.uint8).tobytes()
    if et.name == "u1":
        return np.packbits(a.reshape(-1).astype(np.uint8) & 1).tobytes()
    if et.name in ("u4", "i4"):
        v = a.reshape(-1).astype(np.int64) & 0xF
        if v.size % 2:
            v = np.append(v, 0)
        return (v[0::2] | (v[1::2] << 4)).astype(np.uint8).tobytes()
    if et.bits < 8:
        raise IrrunError(f"writing {et.name} Consts is not supported", code="write")
    return a.astype(et.dtype, copy=False).tobytes()


def format_dims(shape) -> str:
    """A partial shape as OpenVINO writes a Parameter's shape attribute: 1,3,?,2..10."""
    if shape is None:
        return "..."
    out = []
    for d in shape:
        if d.is_static:
            out.append(str(d.lo))
        elif d.lo == 0 and d.hi is None:
            out.append("?")
        else:
            out.append(f"{d.lo}..{'' if d.hi is None else d.hi}")
    return ",".join(out)


def port_dims(shape) -> list[int] | None:
    """<dim> values of a port: -1 for every dynamic or interval dim, as OpenVINO writes."""
    if shape is None:
        return None
    return [d.lo if d.is_static else -1 for d in shape]


def precision_of(etype_name: str) -> str:
    return PRECISION.get(etype_name, etype_name.upper())


# ---------------------------------------------------------------- writing

class _Bin:
    def __init__(self):
        self.chunks: list[bytes] = []
        self.size = 0
        self.seen: dict[bytes, int] = {}

    def add(self, data: bytes) -> int:
        key = hashlib.sha256(data).digest() + len(data).to_bytes(8, "little")
        if key in self.seen:
            return self.seen[key]
        pad = (-self.size) % ALIGN
        if pad:
            self.chunks.append(b"\0" * pad)
            self.size += pad
        offset = self.size
        self.chunks.append(data)
        self.size += len(data)
        self.seen[key] = offset
        return offset


def _port_el(parent, port: WPort):
    attrs = {"id": str(port.id)}
    if port.precision:
        attrs["precision"] = port.precision
    if port.names:
        attrs["names"] = join_names(port.names)
    el = etree.SubElement(parent, "port", attrs)
    for d in port.dims or ():
        etree.SubElement(el, "dim").text = str(d)
    return el


def _rebase_body_consts(element, source, blob: _Bin) -> None:
    """Consts inside a copied body: their bytes move from the source .bin to the new one."""
    for data in element.iter("data"):
        layer = data.getparent()
        if layer is None or layer.tag != "layer" or (layer.get("type") or "").lower() != "const":
            continue
        size = int(data.get("size", "0") or 0)
        offset = int(data.get("offset", "0") or 0)
        if size == 0:
            data.set("offset", "0")
            continue
        if source is None:
            raise IrrunError("a body Const's bytes are not available (no source .bin)",
                             code="write")
        data.set("offset", str(blob.add(bytes(source[offset:offset + size]))))


def to_xml(net: Net) -> tuple[bytes, bytes]:
    """The XML document and the .bin bytes of `net`."""
    blob = _Bin()
    source = None
    if net.source_bin and os.path.exists(net.source_bin) and \
            any(w.extras for w in net.layers):
        source = np.memmap(net.source_bin, np.uint8, "r") if os.path.getsize(net.source_bin) \
            else np.zeros(0, np.uint8)
    root = etree.Element("net", {"name": net.name, "version": "11"})
    layers_el = etree.SubElement(root, "layers")
    for w in net.layers:
        attrs = {"id": w.id, "name": w.name, "type": w.type}
        if w.version is not None:
            attrs["version"] = w.version
        attrs.update(w.attributes)
        el = etree.SubElement(layers_el, "layer", attrs)
        data = dict(w.data)
        if w.const_bytes is not None:
            data["offset"] = str(blob.add(w.const_bytes)) if w.const_bytes else "0"
            data["size"] = str(len(w.const_bytes))
        if data or w.type.lower() in ("parameter", "const"):
            etree.SubElement(el, "data", data)
        for after_ports in (False, True):
            if after_ports:
                for tag, ports in (("input", w.inputs), ("output", w.outputs)):
                    if ports:
                        group = etree.SubElement(el, tag)
                        for p in ports:
                            _port_el(group, p)
            for where, extra in w.extras:
                if where == after_ports:
                    extra = copy.deepcopy(extra)
                    _rebase_body_consts(extra, source, blob)
                    el.append(extra)
    edges_el = etree.SubElement(root, "edges")
    for e in net.edges:
        etree.SubElement(edges_el, "edge", {"from-layer": e.from_layer,
                                            "from-port": str(e.from_port),
                                            "to-layer": e.to_layer, "to-port": str(e.to_port)})
    for extra in net.extras:
        root.append(copy.deepcopy(extra))
    etree.indent(root, space="\t")
    xml = etree.tostring(root, xml_declaration=True, encoding="utf-8")
    return xml, b"".join(blob.chunks)


def _atomic_write(path: str, data: bytes) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_net(net: Net, xml_path, bin_path=None) -> tuple[str, str]:
    """Write `net` as IR v11: `xml_path` and its .bin (default: same stem)."""
    xml_path = os.fspath(xml_path)
    bin_path = os.fspath(bin_path) if bin_path else os.path.splitext(xml_path)[0] + ".bin"
    xml, data = to_xml(net)
    try:
        _atomic_write(bin_path, data)
        _atomic_write(xml_path, xml)
    except OSError as e:
        raise IrrunError(f"cannot write the model: {e.strerror or e}", file=xml_path,
                         code="write") from None
    return xml_path, bin_path


def save_model(model, xml_path, bin_path=None) -> tuple[str, str]:
    """Write a model irrun read (an irrun.Model) as IR v11; returns the two paths written."""
    program = getattr(model, "program", model)
    return write_net(net_from_program(program), xml_path, bin_path)


__all__ = ["Net", "WEdge", "WLayer", "WPort", "encode", "save_model",
           "write_net"]
