"""The IR reader: a hardened lxml parse of model.xml into layers, ports and edges with lines.

Nothing here knows about ops; problems go to a Collector so that a validator can
report all of them in one pass.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from lxml import etree

from .errors import Collector
from .etypes import is_known, normalize_precision

SUPPORTED_VERSIONS = (10, 11)


@dataclass
class Port:
    id: int | None
    index: int                      # position inside <input> or <output>
    precision: str | None           # as written
    dims: list[int] | None          # declared dims; [] for no <dim> (scalar or dynamic rank), None if unreadable
    names: list[str]
    line: int


@dataclass
class Layer:
    id: str
    name: str
    type: str
    version: str | None
    line: int
    data: dict[str, str] = field(default_factory=dict)
    data_line: int | None = None
    inputs: list[Port] = field(default_factory=list)
    outputs: list[Port] = field(default_factory=list)
    output_names: list[str] | None = None   # Result's output_names (v11)

    @property
    def op_label(self) -> str:
        """Type-version as written in the file, e.g. Bucketize-opset3 (`?` for a missing part)."""
        return f"{self.type or '?'}-{self.version or '?'}"

    def input_position(self, port_id: int) -> int | None:
        for p in self.inputs:
            if p.id == port_id:
                return p.index
        return None

    def output_position(self, port_id: int) -> int | None:
        for p in self.outputs:
            if p.id == port_id:
                return p.index
        return None


@dataclass
class Edge:
    from_layer: str
    from_port: int | None
    to_layer: str
    to_port: int | None
    line: int
    broken: bool = False    # already reported (a missing or non-integer attribute)


@dataclass
class IRDocument:
    path: str
    version: int
    name: str
    layers: list[Layer]
    edges: list[Edge]
    line: int = 1        # the <net> element's line, for problems of the whole model


class _RefuseAll(etree.Resolver):
    """Defence in depth: libxml2 asks the resolver before loading any external entity or DTD."""

    def resolve(self, url, pubid, context):
        raise etree.XMLSyntaxError(f"refused to load external resource '{url}'", None, 0, 0)


def hardened_parser() -> etree.XMLParser:
    """No entity expansion, no DTD, no network, no huge-tree mode."""
    parser = etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True,
                             dtd_validation=False, huge_tree=False, remove_comments=True,
                             remove_pis=True)
    parser.resolvers.add(_RefuseAll())
    return parser


def _prolog_text(content: bytes) -> str:
    """The document decoded far enough to scan its prolog (UTF-16/32 files too)."""
    head = content[:4]
    for bom, codec in ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
                       (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if head.startswith(bom):
            return content[len(bom):].decode(codec, errors="replace")
    for pattern, codec in ((b"<\x00\x00\x00", "utf-32-le"), (b"\x00\x00\x00<", "utf-32-be"),
                           (b"<\x00", "utf-16-le"), (b"\x00<", "utf-16-be")):
        if head.startswith(pattern):
            return content.decode(codec, errors="replace")
    # UTF-8 and every other ASCII-compatible encoding spell the prolog in ASCII.
    return content.decode("latin-1")


def doctype_line(content: bytes) -> int | None:
    """The line of a <!DOCTYPE in the prolog, or None.

    Checked before libxml2 parses anything, so an internal subset (entity bombs, external
    entities, parameter entities, external DTDs) is never even read by the XML parser.
    """
    text = _prolog_text(content)
    i, n = 0, len(text)
    if text.startswith("\ufeff"):
        i = 1
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif text.startswith("<?", i):
            end = text.find("?>", i + 2)
            i = n if end < 0 else end + 2
        elif text.startswith("<!--", i):
            end = text.find("-->", i + 4)
            i = n if end < 0 else end + 3
        elif text.startswith("<!", i) and text[i + 2:i + 9].upper() == "DOCTYPE":
            return text.count("\n", 0, i) + 1
        else:
            return None   # the root element (or junk the parser will report)
    return None


def _int(text, what, line, diag, layer=None, code="bad-number"):
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        problem = "is missing" if text is None else f"'{text}' is not an integer"
        diag.error(code, f"{what} {problem}", line=line, layer=layer)
        return None


def _first_children(el, tags: tuple[str, ...]) -> dict:
    """{tag: the first child element with that tag}, what el.find(tag) returns for each,
    in one pass over the children instead of one ElementPath search per tag."""
    found = {}
    for child in el.iterchildren(*tags):
        found.setdefault(child.tag, child)
    return found


def _ports(parent, layer: Layer, diag: Collector) -> list[Port]:
    ports = []
    if parent is None:
        return ports
    # iterchildren(tag) finds the same direct children as iterfind(tag) without ElementPath's
    # per-call overhead, which was a third of the reader's time on a 10,000-layer file.
    for index, el in enumerate(parent.iterchildren("port")):
        pid = _int(el.get("id"), "port id", el.sourceline, diag, layer, "bad-port")
        dims = []
        for d in el.iterchildren("dim"):
            text = d.text or ""
            try:
                value = int(text.strip())
            except ValueError:
                diag.error("bad-dim", f"port {el.get('id')}: <dim>{text}</dim> is not a number",
                           line=d.sourceline, layer=layer)
                dims = None    # unknown: not compared with inference (no second report)
                continue
            if value < -1:
                diag.error("bad-dim", f"port {el.get('id')}: <dim>{text}</dim> is below -1 "
                           "(-1 is a dynamic dim)", line=d.sourceline, layer=layer)
                dims = None
                continue
            if dims is not None:
                dims.append(value)
        precision = el.get("precision")
        if precision is not None and not is_known(normalize_precision(precision) or ""):
            diag.error("bad-precision", f"port {el.get('id')}: unknown precision '{precision}'",
                       line=el.sourceline, layer=layer)
            precision = None
        names = [n.strip() for n in (el.get("names") or "").split(",") if n.strip()]
        ports.append(Port(pid, index, precision, dims, names, el.sourceline))
    return ports


def parse_bytes(content: bytes, path: str, diag: Collector) -> IRDocument | None:
    """Parse the XML text; None when the file is not IR at all (the reason is in diag)."""
    dtd_message = ("the file declares a DTD (<!DOCTYPE ...>); IR files have none, and irrun "
                   "never loads DTDs or expands entities (refused before parsing)")
    line = doctype_line(content)
    if line is not None:
        diag.error("xml-dtd", dtd_message, line=line)
        return None
    try:
        root = etree.fromstring(content, hardened_parser())
    except etree.XMLSyntaxError as e:
        line = e.lineno if e.lineno else None
        msg = e.msg if hasattr(e, "msg") and e.msg else str(e)
        msg = " ".join(msg.split())   # libxml2 messages may hold newlines: keep one line
        diag.error("xml", f"XML is not well formed: {msg}", line=line)
        return None
    tree = root.getroottree()
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
        diag.error("xml-dtd", dtd_message, line=1)   # only if the prolog scan missed it
        return None
    if root.tag != "net":
        diag.error("not-ir", f"root element is <{root.tag}>, expected <net>", line=root.sourceline)
        return None
    version_text = root.get("version")
    version = None
    try:
        version = int(version_text)
    except (TypeError, ValueError):
        pass
    if version not in SUPPORTED_VERSIONS:
        diag.error("ir-version", f"IR version '{version_text}' is not supported "
                   f"(supported: {', '.join(map(str, SUPPORTED_VERSIONS))})", line=root.sourceline)
        return None

    layers_el = root.find("layers")
    layer_els = list(layers_el.iterchildren("layer")) if layers_el is not None else []
    if layer_els and all(el.get("version") is None for el in layer_els) and \
            any("execTimeMcs" in etree.tostring(el, encoding=str) for el in layer_els[:50]):
        diag.error("exec-graph", "this is an execution-graph dump (benchmark_app -exec_graph_path "
                   "or get_runtime_model), not an IR model: its layers have no version and carry "
                   "execTimeMcs; read the original model.xml instead", line=root.sourceline)
        return None

    layers: list[Layer] = []
    seen: dict[str, Layer] = {}
    for el in layer_els:
        lid, ltype, lversion = el.get("id"), el.get("type"), el.get("version")
        name = el.get("name", "")
        layer = Layer(lid or "", name, ltype or "", lversion, el.sourceline)
        # An empty attribute is as good as a missing one (fuzzing found type="" slipping by).
        missing = [a for a, v in (("id", lid), ("type", ltype), ("version", lversion))
                   if v is None or not v.strip()]
        if missing:
            diag.error("bad-layer", f"<layer> has no {', '.join(missing)} attribute (or it is empty)",
                       line=el.sourceline, layer=layer)
            if lid is None:
                continue   # no edge can name it
            # Without a type or version the layer stays in the graph (its edges resolve),
            # but no op is bound to it, so nothing else is reported about it.
        if lid in seen:
            other = seen[lid]
            diag.error("duplicate-id", f"layer id {lid} is used twice: here and at line {other.line} "
                       f"('{other.name}')", line=el.sourceline, layer=layer)
            diag.error("duplicate-id", f"layer id {lid} is used twice: here and at line {el.sourceline} "
                       f"('{name}')", line=other.line, layer=other)
            continue
        parts = _first_children(el, ("data", "input", "output"))
        data_el = parts.get("data")
        if data_el is not None:
            layer.data = dict(data_el.attrib)
            layer.data_line = data_el.sourceline
        if el.get("output_names") is not None:
            layer.output_names = [n.strip() for n in el.get("output_names").split(",") if n.strip()]
        layer.inputs = _ports(parts.get("input"), layer, diag)
        layer.outputs = _ports(parts.get("output"), layer, diag)
        seen[lid] = layer
        layers.append(layer)

    edges: list[Edge] = []
    edges_el = root.find("edges")
    for el in (edges_el.iterchildren("edge") if edges_el is not None else ()):
        attrs = {a: el.get(a) for a in ("from-layer", "from-port", "to-layer", "to-port")}
        # Name the layer the edge feeds (else the one it leaves) when the file has it.
        named = seen.get((attrs["to-layer"] or "").strip()) or \
            seen.get((attrs["from-layer"] or "").strip())
        missing = [a for a, v in attrs.items() if v is None]
        if missing:
            diag.error("bad-edge", f"<edge> has no {', '.join(missing)} attribute",
                       line=el.sourceline, layer=named)
        fp = tp = None
        if attrs["from-port"] is not None:
            fp = _int(attrs["from-port"], "edge from-port", el.sourceline, diag, named, "bad-edge")
        if attrs["to-port"] is not None:
            tp = _int(attrs["to-port"], "edge to-port", el.sourceline, diag, named, "bad-edge")
        # A broken edge is kept so that the graph does not report the port it was meant to
        # feed as a second problem.
        edges.append(Edge((attrs["from-layer"] or "").strip(), fp, (attrs["to-layer"] or "").strip(),
                          tp, el.sourceline, broken=bool(missing) or fp is None or tp is None))

    return IRDocument(path, version, root.get("name", ""), layers, edges, root.sourceline)


def read_document(path: str | os.PathLike, diag: Collector) -> IRDocument | None:
    path = os.fspath(path)
    try:
        # Only regular files: a FIFO would block forever, /dev/zero would never end.
        if not stat.S_ISREG(os.stat(path).st_mode):
            diag.error("read", "the model is not a regular file")
            return None
        with open(path, "rb") as f:
            content = f.read()
    except OSError as e:
        diag.error("read", f"cannot read the model file: {e.strerror or e}")
        return None
    return parse_bytes(content, path, diag)
