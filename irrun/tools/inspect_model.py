"""What `irrun info` shows of a model, as data: inputs and outputs, op counts, opsets, the
weights by element type (each stored region of the .bin once), the parameter count, and the producer's rt_info (framework,
conversion parameters, OpenVINO version). Whatever can be read is described, even for a
model irrun cannot run (an unknown op, a missing .bin); its errors come with it."""
from __future__ import annotations

from collections import Counter

import numpy as np

from ..ir.etypes import element_type


def describe(path: str) -> dict:
    from ..run.model import _input_info, _output_info, output_names_of
    from ..run.program import all_nodes
    from .drawing import _declared, load_for_drawing

    program = load_for_drawing(path)
    doc = program.doc
    nodes = list(all_nodes(program))     # with the layers inside Loop/If bodies

    def port(info_of, node, declared):
        try:
            info = info_of(node)
            return dict(name=info.name, names=list(info.names), element_type=info.element_type,
                        shape=info.partial_shape, text=str(info))
        except (IndexError, TypeError, KeyError, AttributeError):
            # Not inferred: the name and what the file declares.
            if node.kind == "result":
                name = output_names_of(program, node)[0]
            else:
                name = declared.names[0] if declared is not None and declared.names else \
                    node.layer.name
            shown = _declared(declared) if declared is not None else "? (not inferred)"
            return dict(name=name, names=[name], element_type=None, shape=None,
                        text=f"{name}: {shown}")

    counts = Counter(n.op.label if n.op is not None else
                     f"{n.layer.type}-{n.layer.version} (no kernel)" for n in nodes)
    by_type: Counter = Counter()
    parameters = 0
    stored = set()        # (offset, size): the writer stores equal Consts once
    for n in nodes:
        if n.layer.type.lower() != "const":
            continue
        try:
            et = element_type(n.layer.data.get("element_type", ""))
            size = int(n.layer.data.get("size", 0))
            dims = [int(d) for d in n.layer.data.get("shape", "").split(",") if d.strip()]
        except (ValueError, KeyError, Exception):   # noqa: BLE001 - a broken Const: skipped
            continue
        where = (n.layer.data.get("offset"), size)
        if where in stored:
            continue
        stored.add(where)
        by_type[et.name] += size
        # Parameters: the elements of every Const but the integer vectors and scalars that
        # carry shapes and axes.
        if et.kind in ("float", "uint", "int") and not (et.kind != "float" and len(dims) <= 1):
            parameters += int(np.prod(dims, dtype=np.int64)) if dims else 1
    return {
        "model": path,
        "ir_version": doc.version,
        "name": doc.name,
        "layers": len(doc.layers),
        "layers_in_bodies": len(nodes) - len(doc.layers),
        "inputs": [port(_input_info, p, (p.layer.outputs or [None])[0])
                   for p in program.parameters],
        "outputs": [port(lambda n: _output_info(program, n), r, (r.layer.inputs or [None])[0])
                    for r in program.results],
        "ops": dict(sorted(counts.items())),
        "opsets": sorted({n.layer.version for n in nodes if n.layer.version},
                         key=lambda v: (len(v), v)),
        "weights": {"bytes": sum(by_type.values()),
                    "by_element_type": dict(sorted(by_type.items(), key=lambda kv: -kv[1])),
                    "parameters": parameters},
        "rt_info": rt_info(path),
        "problems": [str(d) for d in program.diagnostics if d.severity == "error"],
    }


def rt_info(path: str) -> dict:
    """The net's <rt_info>, flattened to {"framework": "pytorch", ...}: `<info name value>`
    entries by name, other elements by tag (nested ones as `outer/inner`)."""
    from lxml import etree

    from ..ir.reader import hardened_parser

    try:
        with open(path, "rb") as f:
            root = etree.fromstring(f.read(), hardened_parser())
    except (OSError, ValueError, etree.XMLSyntaxError):
        return {}
    found = {}

    def walk(el, prefix):
        for child in el:
            if not isinstance(child.tag, str):
                continue
            key = child.get("name") if child.tag == "info" and child.get("name") else child.tag
            if child.get("value") is not None:
                found[prefix + key] = child.get("value")
            walk(child, prefix + key + "/")

    for section in root.findall("rt_info"):
        walk(section, "")
    return found
