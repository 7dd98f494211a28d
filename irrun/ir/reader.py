"""The IR reader: a hardened lxml parse of model.xml into layers, ports and edges with lines.

Nothing here knows about ops; problems go to a Collector so that a validator can
report all of them in one pass.
"""
from __future__ import annotations

import io
import os
import re
import stat
from dataclasses import dataclass, field

from lxml import etree

from ..errors import Collector
from .etypes import is_known, normalize_precision

SUPPORTED_VERSIONS = (10, 11)


@dataclass(slots=True)
class Port:
    id: int | None
    index: int                      # position inside <input> or <output>
    precision: str | None           # as written
    dims: list[int] | None          # declared dims; [] for no <dim> (scalar or dynamic rank), None if unreadable
    names: list[str]
    line: int


@dataclass(slots=True)
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
    bodies: list[Subgraph] = field(default_factory=list)   # Loop/TensorIterator/If networks
    # Port id -> position tables (see _position); not compared or shown.
    _index_inputs: tuple | None = field(default=None, repr=False, compare=False)
    _index_outputs: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def op_label(self) -> str:
        """Type-version as written in the file, e.g. Bucketize-opset3 (`?` for a missing part)."""
        return f"{self.type or '?'}-{self.version or '?'}"

    def input_position(self, port_id: int) -> int | None:
        return _position(self, "inputs", port_id)

    def output_position(self, port_id: int) -> int | None:
        return _position(self, "outputs", port_id)


def _position(layer: Layer, which: str, port_id) -> int | None:
    """The position of the first port with this id: a scan of a few ports, else from a dict
    built once per layer (a scan per edge was quadratic: a Concat with 40,000 inputs took a
    minute to read)."""
    ports = getattr(layer, which)
    if len(ports) <= 8:
        for p in ports:
            if p.id == port_id:
                return p.index
        return None
    cached = getattr(layer, "_index_" + which)
    if cached is None or cached[0] is not ports or cached[1] != len(ports):
        table: dict = {}
        for p in ports:
            table.setdefault(p.id, p.index)
        cached = (ports, len(ports), table)
        setattr(layer, "_index_" + which, cached)
    return cached[2].get(port_id)


@dataclass
class PortMapEntry:
    """One <input> or <output> of a <port_map>: a layer port mapped to a body Parameter/Result.

    None where the attribute is missing or unreadable (reported); the slicing attributes
    default as in the TensorIterator spec and apply only when `axis` is given.
    """

    kind: str                       # "input" | "output"
    external_port_id: int | None    # a port id of the layer; -1: not connected (Loop)
    internal_layer_id: str | None   # a Parameter (input) or Result (output) id in the body
    line: int
    axis: int | None = None
    start: int = 0
    end: int = -1
    stride: int = 1
    part_size: int = 1
    purpose: str | None = None      # Loop: "current_iteration" | "execution_condition"
    broken: bool = False            # already reported


@dataclass
class BackEdge:
    """<back_edges><edge from-layer=Result to-layer=Parameter/>: a value for the next iteration."""

    from_layer: str | None
    to_layer: str | None
    line: int


@dataclass
class Subgraph:
    """A layer's nested network (<body>, <then_body>, <else_body>) and how it is wired."""

    role: str                       # "body" | "then_body" | "else_body"
    doc: IRDocument
    port_map: list[PortMapEntry]
    back_edges: list[BackEdge]
    line: int                       # the body element's line
    port_map_line: int | None       # the <port_map> element's line (None: there is none)


@dataclass(slots=True)
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


# OpenVINO reads ids and ports with std::stoll and then insists the whole text was used:
# leading C whitespace, an optional sign, ASCII digits, nothing after, within int64.
# Python's int() also takes `1_6`, Arabic-Indic or full-width digits and trailing blanks.
_OV_INT = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)\Z")
_INT64 = (-(1 << 63), (1 << 63) - 1)


def ov_int(text) -> int | None:
    """The integer OpenVINO reads from an attribute, or None where it refuses the text."""
    if isinstance(text, str) and len(text) < 19 and text.isascii() and text.isdigit():
        return int(text)      # the usual id: plain ASCII digits, well within int64
    m = _OV_INT.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    number = m.group(1)
    digits = number.lstrip("+-").lstrip("0")
    if len(digits) > 19:      # past int64 (and past Python's 4300-digit int() limit)
        return None
    value = int(digits or "0") * (-1 if number.startswith("-") else 1)
    return value if _INT64[0] <= value <= _INT64[1] else None


def _plain_id(text) -> str | None:
    """An id of plain ASCII digits (the usual case) as OpenVINO compares it ("07" is "7"),
    or None for anything that needs ov_int's full grammar (or is missing)."""
    if text is not None and 0 < len(text) < 19 and text.isascii() and text.isdigit():
        return text if text[0] != "0" or len(text) == 1 else str(int(text))
    return None


def _clip(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width] + "..."


def _int(text, what, line, diag, layer=None, code="bad-number", unsigned=False):
    value = ov_int(text)
    if value is None or (unsigned and value < 0):
        problem = "is missing" if text is None else \
            f"'{_clip(str(text))}' is not {'a non-negative' if unsigned else 'an'} integer"
        diag.error(code, f"{what} {problem}", line=line, layer=layer)
        return None
    return value


def _children(el, tag: str) -> list:
    """The child elements with this tag (none when el is None): list(el.iterchildren(tag))."""
    return [] if el is None else [child for child in el if child.tag == tag]


def _first_children(el, tags) -> dict:
    """{tag: the first child element with that tag}, what el.find(tag) returns for each,
    in one pass over the children instead of one ElementPath search per tag. `tags`: a
    frozenset is fastest (a plain loop over the children comparing tags takes half the
    time of iterchildren(*tags); comments and PIs are removed by the parser, and their
    tags, like an entity's, are functions that match no name)."""
    found = {}
    for child in el:
        tag = child.tag
        if tag in tags and tag not in found:
            found[tag] = child
    return found


# Whether a port precision is known, by its spelling (a file spells a handful of them).
_PRECISION_KNOWN: dict[str, bool] = {}


# What OpenVINO's serializer writes as the precision of a port whose element type is dynamic
# (a body Parameter of element_type="dynamic" and everything downstream of it).
_NO_PRECISION = frozenset(("UNSPECIFIED", "DYNAMIC", "UNDEFINED"))


def _precision_known(precision: str) -> bool:
    known = _PRECISION_KNOWN.get(precision)
    if known is None:
        known = is_known(normalize_precision(precision) or "")
        if len(_PRECISION_KNOWN) < 256:    # a hostile file may spell thousands
            _PRECISION_KNOWN[precision] = known
    return known


# The precision a port keeps, by its spelling: None for OpenVINO's spelling of a dynamic
# element type (no declaration) and for an unknown one (reported), else as written.
_PRECISION_KEPT: dict[str, str | None] = {}


def _precision_kept(precision: str) -> str | None:
    kept = None if precision.upper() in _NO_PRECISION or not _precision_known(precision) \
        else precision
    if len(_PRECISION_KEPT) < 256:    # a hostile file may spell thousands
        _PRECISION_KEPT[precision] = kept
    return kept


def _ports(parent, layer: Layer, diag: Collector) -> list[Port]:
    ports = []
    if parent is None:
        return ports
    # A loop over the children finds the same ones as iterfind("port") without ElementPath's
    # per-call overhead (a third of the reader's time on a 10,000-layer file), and without
    # the cost of an iterchildren("port") iterator per <input> and <output>.
    index = -1
    for el in parent:     # the <port> children; a loop comparing tags (see _first_children)
        if el.tag != "port":
            continue
        index += 1
        line = el.sourceline
        text = el.get("id")
        if text is not None and 0 < len(text) < 19 and text.isascii() and text.isdigit():
            pid = int(text)    # what _int gives for plain digits, without its two calls
        else:
            pid = _int(text, "port id", line, diag, layer, "bad-port")
        dims = []
        for d in el:
            if d.tag != "dim":
                continue
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
        if precision is not None:
            kept = _PRECISION_KEPT.get(precision, False)
            if kept is False:
                kept = _precision_kept(precision)
            if kept is None and precision.upper() not in _NO_PRECISION:
                diag.error("bad-precision", f"port {el.get('id')}: unknown precision "
                           f"'{precision}'", line=line, layer=layer)
            precision = kept
        names = el.get("names")
        if not names:
            names = []
        elif "," not in names and not names[0].isspace() and not names[-1].isspace():
            names = [names]     # one name (most ports): what the split below gives
        else:
            names = split_names(names)
        ports.append(Port(pid, index, precision, dims, names, line))
    return ports


def split_names(text: str) -> list[str]:
    """Tensor names from a `names`/`output_names` attribute: comma-separated, a comma inside
    a name written `\\,` as OpenVINO's serializer escapes it (a backslash before anything
    else is itself)."""
    parts = re.split(r"(?<!\\),", text)
    return [n.replace("\\,", ",").strip() for n in parts if n.strip()]


def parse_bytes(content: bytes, path: str, diag: Collector) -> IRDocument | None:
    """Parse the XML text; None when the file is not IR at all (the reason is in diag)."""
    dtd_message = ("the file declares a DTD (<!DOCTYPE ...>); IR files have none, and irrun "
                   "never loads DTDs or expands entities (refused before parsing)")
    line = doctype_line(content)
    if line is not None:
        diag.error("xml-dtd", dtd_message, line=line)
        return None
    found = Collector(file=diag.file)   # the layers' and edges' problems: kept for an IR file
    try:
        root, layers, edges, dump = _stream(content, path, found)
    except etree.XMLSyntaxError as streamed:
        # Word it as a whole-document parse does (the streaming parser says less about an
        # undefined entity or an empty file); only a broken file is parsed twice.
        e = streamed
        try:
            etree.fromstring(content, hardened_parser())
        except etree.XMLSyntaxError as whole:
            e = whole
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
    version = _ir_version(version_text)
    if version not in SUPPORTED_VERSIONS:
        diag.error("ir-version", f"IR version '{version_text}' is not supported "
                   f"(supported: {', '.join(map(str, SUPPORTED_VERSIONS))})", line=root.sourceline)
        return None
    if dump:
        diag.error("exec-graph", "this is an execution-graph dump (benchmark_app -exec_graph_path "
                   "or get_runtime_model), not an IR model: its layers have no version and carry "
                   "execTimeMcs; read the original model.xml instead", line=root.sourceline)
        return None
    diag.items.extend(found.items)
    return IRDocument(path, version, root.get("name", ""), layers, edges, root.sourceline)


def _ir_version(text) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _drop(el, parent=None) -> None:
    """Free a streamed element that has been read, and the siblings read before it."""
    el.clear()
    if parent is None:
        parent = el.getparent()
    while el.getprevious() is not None:
        del parent[0]


def _stream(content: bytes, path: str, diag: Collector):
    """The model's layers and edges, read while libxml2 parses (the hardened parser's
    options): each top-level <layer> and <edge> is read when its end tag is parsed and then
    freed, so the whole tree (about 15 times the file's size in libxml2's nodes) never
    exists at once. What is read is what root.find("layers") / root.find("edges") hold: the
    first of each under the root. Layers inside a body are read with their layer.

    Returns (root element, layers, edges, whether this looks like an execution-graph dump:
    every layer without a version and one of the first 50 carrying execTimeMcs). Raises
    XMLSyntaxError for a file that is not well formed, which may be found after layers
    were read: the caller keeps their problems only for a well-formed IR file.
    """
    events = etree.iterparse(io.BytesIO(content), events=("end",),
                             tag=("layers", "layer", "edges", "edge"), resolve_entities=False,
                             load_dtd=False, no_network=True, dtd_validation=False,
                             huge_tree=False, remove_comments=True, remove_pis=True)
    events.resolvers.add(_RefuseAll())
    root = layers_el = edges_el = None
    version = None
    layers_done = False
    layers: list[Layer] = []
    seen: dict[str, Layer] = {}
    edges: list[Edge] = []
    early: list[tuple] = []     # edges of an <edges> before <layers>: read once layers are
    unversioned, marked, count = True, False, 0
    for _, el in events:
        parent = el.getparent()
        if parent is layers_el and parent is not None:
            # The usual event once the first <layers> is known: one of its children (what
            # the checks below find for it, told by identity without walking up again).
            if el.tag == "layer":
                if el.get("version") is not None:
                    unversioned = False
                elif unversioned and count < 50 and not marked:
                    marked = "execTimeMcs" in etree.tostring(el, encoding=str)
                count += 1
                _layer(el, layers, seen, path, version, diag)
                _drop(el, parent)
            continue
        if parent is edges_el and parent is not None and layers_done:
            if el.tag == "edge":      # (the same for the first <edges>' children)
                edges.append(_edge(el.get("from-layer"), el.get("from-port"), el.get("to-layer"),
                                   el.get("to-port"), el.sourceline, seen, diag))
                _drop(el, parent)
            continue
        if parent is None:
            continue    # the root itself
        if root is None:
            root = el.getroottree().getroot()
            version = _ir_version(root.get("version"))
        tag = el.tag
        if tag == "layers" or tag == "edges":
            if parent is root:
                if tag == "layers" and layers_el is None:
                    layers_el = el
                if tag == "layers" and el is layers_el:
                    layers_done = True
                if tag == "edges" and edges_el is None:
                    edges_el = el
            continue
        if parent.getparent() is not root:
            continue    # inside a body (read with its layer), or not where IR puts it
        if tag == "layer":
            if parent.tag != "layers":
                continue
            if layers_el is None:
                layers_el = parent
            if parent is not layers_el:
                _drop(el)
                continue
            if el.get("version") is not None:
                unversioned = False
            elif unversioned and count < 50 and not marked:
                marked = "execTimeMcs" in etree.tostring(el, encoding=str)
            count += 1
            _layer(el, layers, seen, path, version, diag)
            _drop(el)
        else:
            if parent.tag != "edges":
                continue
            if edges_el is None:
                edges_el = parent
            if parent is not edges_el:
                _drop(el)
                continue
            attrs = (el.get("from-layer"), el.get("from-port"), el.get("to-layer"),
                     el.get("to-port"), el.sourceline)
            if layers_done:
                edges.append(_edge(*attrs, seen, diag))
            else:
                early.append(attrs)
            _drop(el)
    if root is None:
        root = events.root
    if early:
        edges = [_edge(*attrs, seen, diag) for attrs in early] + edges
    return root, layers, edges, bool(count and unversioned and marked)


# The nested networks a layer may hold, each with the port map that wires it.
_BODIES = (("body", "port_map"), ("then_body", "then_port_map"), ("else_body", "else_port_map"))
_NESTED = tuple(t for pair in _BODIES for t in pair) + ("back_edges",)

_NESTED_TAGS = frozenset(_NESTED)
_LAYER_PARTS = frozenset(("data", "input", "output") + _NESTED)

_PORT_MAP_INTS = ("axis", "start", "end", "stride", "part_size")
_PURPOSES = ("current_iteration", "execution_condition")


def _port_map(el, layer: Layer, diag: Collector) -> list[PortMapEntry]:
    entries = []
    if el is None:
        return entries
    for child in el.iterchildren("input", "output"):
        line = child.sourceline
        entry = PortMapEntry(child.tag, None, None, line)
        ext = child.get("external_port_id")
        if ext is None:
            diag.error("bad-port-map", f"port map <{child.tag}> has no external_port_id",
                       line=line, layer=layer)
            entry.broken = True
        else:
            entry.external_port_id = _int(ext, f"port map <{child.tag}> external_port_id", line,
                                          diag, layer, "bad-port-map")
            entry.broken |= entry.external_port_id is None
        internal = child.get("internal_layer_id")
        if internal is None or not internal.strip():
            diag.error("bad-port-map", f"port map <{child.tag}> has no internal_layer_id",
                       line=line, layer=layer)
            entry.broken = True
        else:
            entry.internal_layer_id = internal.strip()
        for name in _PORT_MAP_INTS:
            text = child.get(name)
            if text is None:
                continue
            value = _int(text, f"port map <{child.tag}> {name}", line, diag, layer, "bad-port-map")
            if value is None:
                entry.broken = True
            else:
                setattr(entry, name, value)
        purpose = child.get("purpose")
        if purpose is not None and purpose not in _PURPOSES:
            diag.error("bad-port-map", f"port map <{child.tag}> purpose='{purpose}' is not one of "
                       f"{', '.join(_PURPOSES)}", line=line, layer=layer)
            entry.broken = True
        entry.purpose = purpose
        entries.append(entry)
    return entries


def _subgraphs(parts: dict, layer: Layer, path: str, version: int, diag: Collector):
    """The layer's bodies with their port maps and back edges (read like the top network)."""
    bodies = []
    for role, map_tag in _BODIES:
        body_el = parts.get(role)
        map_el = parts.get(map_tag)
        if body_el is None:
            if map_el is not None:
                diag.error("bad-body", f"<{map_tag}> without a <{role}>", line=map_el.sourceline,
                           layer=layer)
            continue
        nested = _first_children(body_el, ("layers", "edges"))
        layers_el = nested.get("layers")
        layer_els = _children(layers_el, "layer")
        if layers_el is None:
            diag.error("bad-body", f"<{role}> has no <layers>", line=body_el.sourceline,
                       layer=layer)
        sub_layers, sub_edges = _network(layer_els, nested.get("edges"), path, version, diag)
        doc = IRDocument(path, version, f"{layer.name}/{role}", sub_layers, sub_edges,
                         body_el.sourceline)
        back = []
        back_el = parts.get("back_edges") if role == "body" else None
        for e in (back_el.iterchildren("edge") if back_el is not None else ()):
            frm, to = (e.get(a, "").strip() or None for a in ("from-layer", "to-layer"))
            if frm is None or to is None:
                # (An empty or blank id is as missing as an absent one: the port map's checks
                # skip such an edge, so this is where it is reported.)
                got = ", ".join(f"{a}={e.get(a)!r}" for a in ("from-layer", "to-layer")
                                if e.get(a) is not None)
                diag.error("bad-back-edge", "back edge needs from-layer (a body Result) and "
                           f"to-layer (a body Parameter), got {got or 'neither'}",
                           line=e.sourceline, layer=layer)
            back.append(BackEdge(frm, to, e.sourceline))
        bodies.append(Subgraph(role, doc, _port_map(map_el, layer, diag), back,
                               body_el.sourceline, map_el.sourceline if map_el is not None else None))
    if parts.get("back_edges") is not None and not any(b.role == "body" for b in bodies):
        diag.error("bad-body", "<back_edges> without a <body>",
                   line=parts["back_edges"].sourceline, layer=layer)
    return bodies


def _network(layer_els, edges_el, path: str, version: int, diag: Collector):
    """The layers and edges of one network: a body's inside a layer (the model's are
    streamed by _stream, with the same per-layer and per-edge readers)."""
    layers: list[Layer] = []
    seen: dict[str, Layer] = {}
    for el in layer_els:
        _layer(el, layers, seen, path, version, diag)
    edges = [_edge(el.get("from-layer"), el.get("from-port"), el.get("to-layer"),
                   el.get("to-port"), el.sourceline, seen, diag)
             for el in _children(edges_el, "edge")]
    return layers, edges


# The most <data> attributes a layer may have (the most any op has is a few dozen).
MAX_DATA_ATTRIBUTES = 1024


def _layer(el, layers: list, seen: dict, path: str, version: int, diag: Collector) -> None:
    """Read one <layer> element into `layers` (and `seen`, by id), reporting its problems."""
    lid, ltype, lversion = el.get("id"), el.get("type"), el.get("version")
    name = el.get("name", "")
    plain = _plain_id(lid)
    if plain is not None:
        lid = plain
    elif lid is not None and lid.strip():
        number = ov_int(lid)
        if number is None or number < 0:
            diag.error("bad-layer", f"layer id '{_clip(lid)}' is not a non-negative integer "
                       "(OpenVINO reads ids as unsigned 64-bit integers)",
                       line=el.sourceline, layer=Layer(lid, name, ltype or "", lversion,
                                                       el.sourceline))
        else:
            lid = str(number)    # as OpenVINO compares them: "07" is layer 7
    line = el.sourceline
    layer = Layer(lid or "", name, ltype or "", lversion, line)
    # An empty attribute is as good as a missing one (fuzzing found type="" slipping by).
    if plain is not None and ltype and lversion and ltype.strip() and lversion.strip():
        missing = None
    else:
        missing = [a for a, v in (("id", lid), ("type", ltype), ("version", lversion))
                   if v is None or not v.strip()]
    if missing:
        diag.error("bad-layer", f"<layer> has no {', '.join(missing)} attribute (or it is empty)",
                   line=el.sourceline, layer=layer)
        if lid is None:
            return   # no edge can name it
        # Without a type or version the layer stays in the graph (its edges resolve),
        # but no op is bound to it, so nothing else is reported about it.
    if lid in seen:
        other = seen[lid]
        diag.error("duplicate-id", f"layer id {lid} is used twice: here and at line {other.line} "
                   f"('{other.name}')", line=el.sourceline, layer=layer)
        diag.error("duplicate-id", f"layer id {lid} is used twice: here and at line {el.sourceline} "
                   f"('{name}')", line=other.line, layer=other)
        return
    parts = _first_children(el, _LAYER_PARTS)
    data_el = parts.get("data")
    if data_el is not None:
        layer.data_line = data_el.sourceline
        count = len(data_el.attrib)          # counting walks the list once
        if count > MAX_DATA_ATTRIBUTES:
            # libxml2 finds an attribute's value by scanning the element's attributes, so
            # reading n of them costs n**2 (100,000: minutes). No op has more than a few
            # dozen: refused unread.
            diag.error("bad-attribute", f"<data> has {count} attributes; no op has more than "
                       f"a few dozen (irrun reads at most {MAX_DATA_ATTRIBUTES})",
                       line=data_el.sourceline, layer=layer)
        else:
            layer.data = dict(data_el.attrib.items())
    if el.get("output_names") is not None:
        layer.output_names = split_names(el.get("output_names"))
    layer.inputs = _ports(parts.get("input"), layer, diag)
    layer.outputs = _ports(parts.get("output"), layer, diag)
    if not _NESTED_TAGS.isdisjoint(parts):
        layer.bodies = _subgraphs(parts, layer, path, version, diag)
    seen[lid] = layer
    layers.append(layer)


def _edge(fl, fp, tl, tp, line: int, seen: dict, diag: Collector) -> Edge:
    """One <edge> from its four attributes (None where missing), reporting its problems;
    `seen` holds the network's layers by id, to name the one a broken edge concerns."""
    # The usual edge: four plain ASCII numbers, nothing to report.
    pfl, ptl = _plain_id(fl), _plain_id(tl)
    if pfl is not None and ptl is not None and fp is not None and tp is not None and \
            0 < len(fp) < 19 and 0 < len(tp) < 19 and fp.isascii() and tp.isascii() and \
            fp.isdigit() and tp.isdigit():
        return Edge(pfl, int(fp), ptl, int(tp), line)
    attrs = {"from-layer": fl, "from-port": fp, "to-layer": tl, "to-port": tp}
    bad_ref = False
    for a in ("from-layer", "to-layer"):
        if attrs[a] is not None:
            number = ov_int(attrs[a])
            if number is None or number < 0:
                diag.error("bad-edge", f"edge {a}='{_clip(attrs[a])}' is not a non-negative "
                           "integer", line=line,
                           layer=seen.get(attrs["to-layer"] or "") or
                           seen.get(attrs["from-layer"] or ""))
                bad_ref = True
            else:
                attrs[a] = str(number)
    # Name the layer the edge feeds (else the one it leaves) when the file has it.
    named = seen.get((attrs["to-layer"] or "").strip()) or \
        seen.get((attrs["from-layer"] or "").strip())
    missing = [a for a, v in attrs.items() if v is None]
    if missing:
        diag.error("bad-edge", f"<edge> has no {', '.join(missing)} attribute",
                   line=line, layer=named)
    fp = tp = None
    if attrs["from-port"] is not None:
        fp = _int(attrs["from-port"], "edge from-port", line, diag, named, "bad-edge")
    if attrs["to-port"] is not None:
        tp = _int(attrs["to-port"], "edge to-port", line, diag, named, "bad-edge")
    # A broken edge is kept so that the graph does not report the port it was meant to
    # feed as a second problem.
    return Edge((attrs["from-layer"] or "").strip(), fp, (attrs["to-layer"] or "").strip(),
                tp, line, broken=bool(missing) or bad_ref or fp is None or tp is None)


def read_document(path: str | os.PathLike, diag: Collector) -> IRDocument | None:
    path = os.fspath(path)
    try:
        # Only regular files: a FIFO would block forever, /dev/zero would never end.
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            diag.error("not-ir", what_is(path))
            return None
        if not stat.S_ISREG(mode):
            diag.error("read", "the model is not a regular file")
            return None
        with open(path, "rb") as f:
            content = f.read()
    except OSError as e:
        diag.error("read", f"cannot read the model file: {e.strerror or e}")
        return None
    if not content.lstrip()[:1] == b"<":
        other = what_is(path, content[:64])
        if other is not None:
            diag.error("not-ir", other)
            return None
    return parse_bytes(content, path, diag)


_CONVERT = "irrun reads OpenVINO IR: convert it with `ovc {name}` (or openvino.convert_model)"


def what_is(path: str, head: bytes = b"") -> str | None:
    """What a file or folder that is not IR XML is, and what to do, when it is recognised:
    another framework's model (ONNX, TFLite, PaddlePaddle, TensorFlow, PyTorch, Keras), a
    GenAI folder or the weights file beside an IR."""
    name = os.path.basename(path.rstrip("/")) or path
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "openvino_model.xml")):
            return ("this is an OpenVINO GenAI model folder: run it with `irrun generate "
                    f"{path} \"PROMPT\"`, or pass {os.path.join(path, 'openvino_model.xml')}")
        if os.path.exists(os.path.join(path, "saved_model.pb")):
            return "this is a TensorFlow SavedModel directory; " + _CONVERT.format(name=path)
        return "this is a directory, not a model file: pass its model.xml"
    suffix = os.path.splitext(name)[1].lower()
    if suffix == ".bin":
        xml = os.path.splitext(path)[0] + ".xml"
        return ("this is the weights file of an IR model: pass its .xml"
                + (f" ({xml})" if os.path.exists(xml) else ""))
    if head[4:8] == b"TFL3" or suffix == ".tflite":
        return "this is a TensorFlow Lite model; " + _CONVERT.format(name=name)
    if suffix == ".onnx":
        return "this is an ONNX model; " + _CONVERT.format(name=name)
    if suffix in (".pdmodel", ".pdiparams"):
        return "this is a PaddlePaddle model; " + _CONVERT.format(name=name)
    if suffix == ".pb":
        return "this is a TensorFlow graph; " + _CONVERT.format(name=name)
    if head[:2] == b"PK" and suffix in (".pt", ".pth", ".pt2"):
        return ("this is a PyTorch checkpoint; irrun reads OpenVINO IR: convert the model with "
                "openvino.convert_model(module, example_input=...)")
    if head[:8] == b"\x89HDF\r\n\x1a\n" or suffix in (".h5", ".keras"):
        return "this is a Keras model; " + _CONVERT.format(name=name)
    if head[:1] == b"\x08" and head[1:2] and head[1] < 16:
        # A protobuf whose first field is 1, a varint: ONNX's ModelProto (ir_version).
        return "this looks like an ONNX model; " + _CONVERT.format(name=name)
    return None
