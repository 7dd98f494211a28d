"""Building IR in Python without OpenVINO: parameters, constants, ops by type and attributes,
results; written with irrun.ir.writer, shapes and types filled in by irrun's own inference.

    from irrun.tools.builder import GraphBuilder

    g = GraphBuilder("tiny")
    x = g.parameter("x", "f32", [None, 4])              # None: a dynamic dim
    w = g.constant(np.ones((4, 2), np.float32))
    y = g.op("MatMul", [x, w], transpose_b=False)      # the newest MatMul: opset1
    g.result(g.op("ReLU", [y]), name="y")
    g.save("tiny.xml")                                  # tiny.xml + tiny.bin
    model = g.model()                                   # an irrun.Model
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from ..errors import IrrunError, ModelError
from ..ir.etypes import element_type, from_dtype
from ..ir.writer import Net, WEdge, WLayer, WPort, encode, port_dims, precision_of, write_net


@dataclass(frozen=True)
class Tensor:
    """An output of a layer being built: (layer id, output position)."""

    layer: str
    port: int


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, np.ndarray)):
        return ",".join(_text(v) for v in np.asarray(value).reshape(-1).tolist())
    return str(value)


def newest_version(type: str) -> str:
    """The IR version string of the newest version irrun has of `type`."""
    from ..ir.registry import REGISTRY, LookupFailure, lookup

    versions = REGISTRY.versions(type)
    if not versions:
        try:
            lookup(type, None)
        except LookupFailure as e:       # worded with the nearest spellings
            raise IrrunError(str(e), code="build") from None
    newest = versions[-1]
    return newest.version if newest.since is None else f"opset{newest.since}"


class GraphBuilder:
    def __init__(self, name: str = "model"):
        self.name = name
        self._layers: list[WLayer] = []
        self._edges: list[WEdge] = []
        self._names: set[str] = set()

    def _add(self, type: str, version: str, name: str | None, data: dict, n_inputs: int,
             n_outputs: int, names=None) -> WLayer:
        lid = str(len(self._layers))
        name = name or f"{type}_{lid}"
        if name in self._names:
            raise IrrunError(f"a layer named '{name}' exists already", code="build")
        self._names.add(name)
        w = WLayer(lid, name, type, version, {k: _text(v) for k, v in data.items()},
                   [WPort(i, None, None) for i in range(n_inputs)],
                   [WPort(n_inputs + i, None, None, list(names or [])) for i in range(n_outputs)])
        self._layers.append(w)
        return w

    def parameter(self, name: str, etype, shape) -> Tensor:
        """An input; `shape` items are ints, None (dynamic) or (lo, hi) intervals."""
        et = element_type(etype)

        def dim(d):
            if d is None:
                return "?"
            if isinstance(d, tuple):
                return f"{d[0]}..{'' if d[1] is None else d[1]}"
            return str(int(d))

        w = self._add("Parameter", "opset1", name, {"shape": ",".join(dim(d) for d in shape),
                                                    "element_type": et.name}, 0, 1, [name])
        return Tensor(w.id, 0)

    def constant(self, value, etype=None, name: str | None = None) -> Tensor:
        a = np.asarray(value)
        et = element_type(etype) if etype is not None else from_dtype(a.dtype)
        w = self._add("Const", "opset1", name, {"element_type": et.name,
                                                "shape": ",".join(map(str, a.shape))}, 0, 1)
        w.const_bytes = encode(a, et)
        return Tensor(w.id, 0)

    def op(self, type: str, inputs, *, version: str | None = None, name: str | None = None,
           outputs: int = 1, **attrs):
        """A layer of `type` (as the IR spells it) fed by `inputs`; its <data> attributes
        as keyword arguments (lists become "1,2,3", booleans "true"/"false"). `version`:
        "opsetN" or "extension"; by default the newest version irrun has of the type (as
        OpenVINO's converters write the newest). Returns the output Tensor, or a tuple of
        `outputs` Tensors."""
        if version is None:
            version = newest_version(type)
        w = self._add(type, version, name, attrs, len(inputs), outputs)
        for i, t in enumerate(inputs):
            src = self._layers[int(t.layer)]
            self._edges.append(WEdge(t.layer, src.outputs[t.port].id, w.id, i))
        out = tuple(Tensor(w.id, i) for i in range(outputs))
        return out[0] if outputs == 1 else out

    def result(self, tensor: Tensor, name: str | None = None) -> None:
        """A model output; `name` becomes the producing port's tensor name."""
        src = self._layers[int(tensor.layer)]
        if name:
            port = src.outputs[tensor.port]
            if name not in port.names:
                port.names.append(name)
        w = self._add("Result", "opset1", f"{name or src.name}/result" if name is None or
                      name in self._names else name, {}, 1, 0)
        self._edges.append(WEdge(tensor.layer, src.outputs[tensor.port].id, w.id, 0))

    def net(self) -> Net:
        """The Net, with every port's precision and dims from irrun's inference."""
        from ..run.model import read_model

        net = Net(self.name, self._layers, self._edges)
        with tempfile.TemporaryDirectory() as tmp:
            xml = write_net(net, os.path.join(tmp, "draft.xml"))[0]
            try:
                program = read_model(xml).program
            except ModelError as e:
                # The draft is irrun's, not the user's: name the graph, not a temporary file
                # and its lines; its warnings are about the draft's own unfilled port dims.
                raise ModelError([dataclasses.replace(d, file=f"GraphBuilder '{self.name}'",
                                                      line=None)
                                  for d in e.diagnostics if d.severity == "error"]) from None
        for w in self._layers:
            node = program.nodes[w.id]
            for p, spec in zip(w.outputs, node.specs or ()):
                p.precision, p.dims = precision_of(spec.etype.name), port_dims(spec.shape)
            for p, (src, pos) in zip(w.inputs, node.inputs):
                spec = program.nodes[src].specs[pos]
                p.precision, p.dims = precision_of(spec.etype.name), port_dims(spec.shape)
        return net

    def save(self, xml_path, bin_path=None) -> tuple[str, str]:
        return write_net(self.net(), xml_path, bin_path)

    def model(self):
        """The network as an irrun.Model (written to a private temporary directory)."""
        from ..run.model import read_model

        tmp = tempfile.mkdtemp(prefix="irrun-builder-")
        xml, _ = self.save(os.path.join(tmp, f"{self.name}.xml"))
        return read_model(xml, mmap=False)
