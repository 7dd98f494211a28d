"""Write small IR files by hand, for reader tests that ov.save_model cannot produce
(sub-byte Consts, Model Optimizer-era port numbering, odd offsets)."""
from __future__ import annotations

import os

import numpy as np

from irrun.ir.etypes import element_type, encode


class IRBuilder:
    """Accumulate layers/edges and a .bin; `write(dir)` gives the .xml path."""

    def __init__(self, version: int = 11):
        self.version = version
        self.layers: list[str] = []
        self.edges: list[tuple] = []
        self.bin = bytearray()
        self.next_id = 0

    def _id(self):
        self.next_id += 1
        return str(self.next_id - 1)

    @staticmethod
    def _port(pid, precision, dims, names=None):
        attrs = f' id="{pid}"'
        if precision:
            attrs += f' precision="{precision}"'
        if names:
            attrs += f' names="{names}"'
        body = "".join(f"<dim>{d}</dim>" for d in dims)
        return f"<port{attrs}>{body}</port>"

    def parameter(self, name, et, shape_text, dims, out_port=0):
        lid = self._id()
        self.layers.append(
            f'<layer id="{lid}" name="{name}" type="Parameter" version="opset1">'
            f'<data shape="{shape_text}" element_type="{et}"/>'
            f"<output>{self._port(out_port, et.upper(), dims, name)}</output></layer>")
        return lid, out_port

    def const(self, name, values, et, out_port=0, offset=None, pad_before=0):
        values = np.asarray(values)
        raw = encode(values, element_type(et))
        self.bin += b"\x00" * pad_before
        if offset is None:
            offset = len(self.bin)
            self.bin += raw
        lid = self._id()
        shape = ", ".join(str(d) for d in values.shape)
        self.layers.append(
            f'<layer id="{lid}" name="{name}" type="Const" version="opset1">'
            f'<data element_type="{et}" shape="{shape}" offset="{offset}" size="{len(raw)}"/>'
            f"<output>{self._port(out_port, et.upper(), values.shape)}</output></layer>")
        return lid, out_port

    def op(self, type_, version, inputs, in_ports, out_ports, data=None, name=None, out_dims=None,
           out_precisions=None):
        """inputs: [(layer, port)]; in_ports/out_ports: the port ids to write."""
        lid = self._id()
        data_xml = ""
        if data:
            data_xml = "<data " + " ".join(f'{k}="{v}"' for k, v in data.items()) + "/>"
        ins = "".join(self._port(p, None, []) for p in in_ports)
        outs = "".join(self._port(p, out_precisions[i] if out_precisions else None,
                                  out_dims[i] if out_dims else [])
                       for i, p in enumerate(out_ports))
        self.layers.append(
            f'<layer id="{lid}" name="{name or type_ + "_" + lid}" type="{type_}" '
            f'version="{version}">{data_xml}<input>{ins}</input><output>{outs}</output></layer>')
        for (src, sport), dport in zip(inputs, in_ports):
            self.edges.append((src, sport, lid, dport))
        return lid

    def result(self, src, name=None):
        lid = self._id()
        self.layers.append(
            f'<layer id="{lid}" name="{name or "out_" + lid}" type="Result" version="opset1">'
            f'<input><port id="0"/></input></layer>')
        self.edges.append((src[0], src[1], lid, 0))
        return lid

    def xml(self) -> str:
        edges = "".join(f'<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>\n'
                        for a, b, c, d in self.edges)
        layers = "\n".join(self.layers)
        return (f'<?xml version="1.0"?>\n<net name="hand" version="{self.version}">\n<layers>\n'
                f"{layers}\n</layers>\n<edges>\n{edges}</edges>\n</net>\n")

    def write(self, directory, stem="model") -> str:
        path = os.path.join(os.fspath(directory), stem + ".xml")
        with open(path, "w") as f:
            f.write(self.xml())
        with open(os.path.splitext(path)[0] + ".bin", "wb") as f:
            f.write(bytes(self.bin))
        return path
