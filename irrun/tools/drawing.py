"""The graph picture: DOT text, SVG and a self-contained HTML page of a model's layers.

SVG comes from Graphviz's `dot` program when it is installed (Debian: `apt-get install
graphviz`), else from a small built-in layered layout, so `irrun graph` works everywhere.
Invalid models are drawn as far as they can be read, with failing layers highlighted.
"""
from __future__ import annotations

import html
import os
import shutil
import subprocess
import zlib
from dataclasses import dataclass, field

from ..errors import ModelError
from ..ir.etypes import normalize_precision
from ..ir.shapes import format_shape

# Fill colours by op category (the spec's categories, lower-cased); others get a palette colour.
CATEGORY_COLORS = {
    "infrastructure": "#e8e8e8",
    "type": "#f5f0d0",
    "arithmetic": "#cfe3ff",
    "activation": "#d4f5d4",
    "comparison": "#f3dcf7",
    "logical": "#ead9f7",
    "condition": "#ffe3c2",
    "convolution": "#ffd0d0",
    "pooling": "#ffe0e8",
    "normalization": "#d8f0f0",
    "reduction": "#e0e6ff",
    "matrix": "#ffd9b8",
    "movement": "#fff3b0",
    "shape": "#e6f2c8",
    "sparse": "#c9efe4",
    "sequence": "#e3d7ff",
    "generation": "#f0e0d0",
    "image": "#d9ecff",
    "detection": "#f7d5e6",
    "quantization": "#ecdcc8",
    "signals": "#d0f0ff",
    "sort": "#f0f0c0",
    "segmentation": "#e0f0d8",
    "unknown": "#ffffff",
}
_PALETTE = ["#fde2e4", "#e2ece9", "#dfe7fd", "#fff1e6", "#e9edc9", "#f0efeb", "#cddafd",
            "#fad2e1", "#bee1e6", "#eae4e9"]
ERROR_COLOR = "#d00000"
WARNING_COLOR = "#e07b00"


def category_color(category: str) -> str:
    key = (category or "unknown").lower()
    if key in CATEGORY_COLORS:
        return CATEGORY_COLORS[key]
    return _PALETTE[zlib.crc32(key.encode()) % len(_PALETTE)]


# ---------------------------------------------------------------- what is drawn

@dataclass
class Box:
    id: str
    name: str
    op: str                      # Type-version as written in the file
    category: str
    outputs: list[str]           # "f32[1,3,224,224]" per output port
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)      # e.g. "body: 12 layers"

    @property
    def lines(self) -> list[str]:
        name = self.name if len(self.name) <= 40 else self.name[:37] + "..."
        outs = self.outputs if len(self.outputs) <= 1 else [f"{i}: {o}" for i, o in enumerate(self.outputs)]
        lines = [self.op, name] + outs + self.notes
        if self.errors:
            first = self.errors[0]
            lines.append("ERROR: " + (first if len(first) <= 48 else first[:45] + "..."))
        return lines

    @property
    def tooltip(self) -> str:
        parts = [f"{self.op} '{self.name}' (id {self.id})"]
        parts += [f"error: {m}" for m in self.errors] + [f"warning: {m}" for m in self.warnings]
        return "\n".join(parts)


@dataclass
class Arrow:
    src: str
    dst: str
    out: int
    inp: int
    label: str


def _declared(port) -> str:
    """A port as the file declares it, for layers whose inference failed."""
    et = normalize_precision(port.precision) if port.precision else None
    dims = "[" + ",".join("?" if d == -1 else str(d) for d in (port.dims or [])) + "]"
    return f"{et or '?'}{dims} (declared)"


def _port_text(node, index: int) -> str:
    if node.specs is not None and index < len(node.specs):
        spec = node.specs[index]
        return f"{spec.etype.name}{format_shape(spec.shape)}"
    if index < len(node.layer.outputs):
        return _declared(node.layer.outputs[index])
    return "?"


def picture(program, diagnostics=None) -> tuple[list[Box], list[Arrow]]:
    """The boxes (layers, in file order) and arrows (edges) of a loaded Program (or of one
    body of it: its diagnostics are the whole file's, matched by layer id and name)."""
    if program.doc is None:
        raise ModelError(program.diagnostics)
    errors: dict[str, list[str]] = {}
    warnings: dict[str, list[str]] = {}
    names = {layer.id: layer.name for layer in program.doc.layers}
    for d in (program.diagnostics if diagnostics is None else diagnostics):
        # Body layers reuse the top network's ids: the name tells them apart.
        if d.layer_id is not None and names.get(d.layer_id) == d.layer_name:
            (errors if d.severity == "error" else warnings).setdefault(d.layer_id, []).append(d.message)
    boxes = []
    for layer in program.doc.layers:
        node = program.nodes[layer.id]
        category = node.op.category if node.op is not None and node.op.category else (
            "infrastructure" if node.kind != "op" else "unknown")
        count = len(node.specs) if node.specs is not None else (
            0 if node.kind == "result" else len(layer.outputs))
        # A body is a cluster in DOT; the built-in layout draws only this network, so the
        # box says what it holds.
        notes = [f"{sub.role}: {len(sub.doc.layers)} layers" for sub in layer.bodies]
        boxes.append(Box(layer.id, layer.name, layer.op_label, category,
                         [_port_text(node, i) for i in range(count)],
                         errors.get(layer.id, []), warnings.get(layer.id, []), notes))
    arrows = []
    for u, v, data in program.graph.edges(data=True):
        arrows.append(Arrow(u, v, data["out"], data["inp"], _port_text(program.nodes[u], data["out"])))
    arrows.sort(key=lambda a: (a.dst, a.inp))
    return boxes, arrows


# ---------------------------------------------------------------- DOT

def _q(text: str) -> str:
    """A DOT double-quoted string; newlines become centred line breaks."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(program) -> str:
    title = os.path.basename(program.path)
    out = [f"digraph {_q(title)} {{",
           "  graph [rankdir=TB, fontname=\"Helvetica\", nodesep=0.3, ranksep=0.45];",
           "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, "
           "penwidth=1];",
           "  edge [fontname=\"Helvetica\", fontsize=8, fontcolor=\"#555555\", color=\"#777777\"];"]
    _dot_network(program, program.diagnostics, "L", "  ", out)
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_network(program, diagnostics, prefix: str, indent: str, out: list[str]) -> None:
    """One network's boxes and arrows; each Loop/TensorIterator/If body a cluster inside,
    its Parameters fed from the layer by dashed arrows, back edges dotted."""
    boxes, arrows = picture(program, diagnostics)
    for b in boxes:
        attrs = [f"label={_q(chr(10).join(b.lines))}", f"fillcolor={_q(category_color(b.category))}",
                 f"tooltip={_q(b.tooltip)}"]
        if b.errors:
            attrs += [f"color={_q(ERROR_COLOR)}", "penwidth=3", f"fontcolor={_q(ERROR_COLOR)}"]
        elif b.warnings:
            attrs += [f"color={_q(WARNING_COLOR)}", "penwidth=2"]
        out.append(f"{indent}{_q(prefix + b.id)} [{', '.join(attrs)}];")
    for a in arrows:
        out.append(f"{indent}{_q(prefix + a.src)} -> {_q(prefix + a.dst)} [label={_q(' ' + a.label)}, "
                   f"tooltip={_q(f'output {a.out} -> input {a.inp}: {a.label}')}];")
    for node in program.nodes.values():
        for sub, body in zip(node.layer.bodies, node.bodies):
            inner = f"{prefix}{node.id}/{sub.role}/"
            name = f"{node.layer.name} / {sub.role}"
            out.append(f"{indent}subgraph {_q('cluster_' + inner)} {{")
            out.append(f"{indent}  label={_q(name)}; style=\"rounded,dashed\"; color=\"#888888\"; "
                       "fontsize=10;")
            _dot_network(body, diagnostics, inner, indent + "  ", out)
            out.append(f"{indent}}}")
            ids = {layer.id for layer in body.doc.layers}
            for e in sub.port_map:
                if e.kind == "input" and e.internal_layer_id in ids:
                    label = e.purpose or f"port {e.external_port_id}" + (
                        f", sliced on axis {e.axis}" if e.axis is not None else "")
                    out.append(f"{indent}{_q(prefix + node.id)} -> {_q(inner + e.internal_layer_id)} "
                               f"[style=dashed, label={_q(' ' + label)}];")
            for e in sub.back_edges:
                if e.from_layer in ids and e.to_layer in ids:
                    out.append(f"{indent}{_q(inner + e.from_layer)} -> {_q(inner + e.to_layer)} "
                               "[style=dotted, constraint=false, label=\" back edge\"];")


def dot_program() -> str | None:
    """The path of Graphviz's `dot`, or None when it is not installed."""
    return shutil.which("dot")


def render_with_dot(dot_text: str, fmt: str = "svg") -> bytes:
    exe = dot_program()
    if exe is None:
        raise RuntimeError("Graphviz's 'dot' is not installed (Debian: apt-get install graphviz)")
    proc = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"),
                          capture_output=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"dot failed: {proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout


# ---------------------------------------------------------------- built-in layout

CHAR_W, LINE_H, PAD, GAP_X, GAP_Y = 6.6, 14, 8, 24, 56


def _ranks(program, boxes, arrows) -> dict[str, int]:
    """Layer ranks: longest path from the inputs, then each layer moved down to just above its
    first user."""
    order = list(program.order)
    if set(order) != {b.id for b in boxes}:
        order = [b.id for b in boxes]     # a cyclic file has no (full) order: use the file's
    position = {lid: i for i, lid in enumerate(order)}
    preds: dict[str, list[str]] = {b.id: [] for b in boxes}
    succs: dict[str, list[str]] = {b.id: [] for b in boxes}
    for a in arrows:
        if position[a.src] < position[a.dst]:     # drop the back edges of a cycle
            preds[a.dst].append(a.src)
            succs[a.src].append(a.dst)
    rank: dict[str, int] = {}
    for lid in order:
        rank[lid] = max((rank[p] + 1 for p in preds[lid]), default=0)
    # Then as late as possible: weights and their Converts sit just above their user.
    for lid in reversed(order):
        if succs[lid]:
            rank[lid] = min(rank[s] for s in succs[lid]) - 1
    return rank


def _box_size(box: Box) -> tuple[float, float]:
    lines = box.lines
    return max(60.0, max(len(t) for t in lines) * CHAR_W + 2 * PAD), len(lines) * LINE_H + 2 * PAD - 4


def layout(program) -> tuple[list[Box], list[Arrow], dict[str, tuple[float, float, float, float]]]:
    """Boxes, arrows and {id: (x, y, w, h)} of a simple top-down layered drawing."""
    boxes, arrows = picture(program)
    rank = _ranks(program, boxes, arrows)
    size = {b.id: _box_size(b) for b in boxes}
    by_rank: dict[int, list[str]] = {}
    for b in boxes:
        by_rank.setdefault(rank[b.id], []).append(b.id)
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for a in arrows:
        preds.setdefault(a.dst, []).append(a.src)
        succs.setdefault(a.src, []).append(a.dst)
    # Constant layers: Consts and what is computed from Consts only (decompression Converts).
    constant = {}
    kinds = {lid: program.nodes[lid].kind for lid in rank}
    for lid in sorted(rank, key=lambda lid: rank[lid]):
        constant[lid] = kinds[lid] == "const" or (
            kinds[lid] == "op" and bool(preds.get(lid)) and all(constant.get(p, False) for p in preds[lid]))
    x: dict[str, float] = {}
    geo: dict[str, tuple[float, float, float, float]] = {}
    # Two passes: the second centres a source (Const, Parameter) over the users the first
    # pass placed; everything else is centred under its inputs, overlaps pushed right.
    for _ in range(2):
        previous, x, y = dict(x), {}, 10.0
        for r in sorted(by_rank):
            def want(lid):
                # Follow the data, not the weights: constant inputs do not pull a layer aside.
                near = [x[p] for p in preds.get(lid, ()) if p in x and not constant[p]] or \
                    [x[p] for p in preds.get(lid, ()) if p in x]
                if not near:
                    near = [previous[s] for s in succs.get(lid, ()) if s in previous]
                return sum(near) / len(near) if near else None

            wanted = {lid: want(lid) for lid in by_rank[r]}
            # Layers with nothing to follow keep their file order, to the left.
            ids = sorted(by_rank[r], key=lambda lid: wanted[lid] if wanted[lid] is not None else -1e9)
            centre: dict[str, float] = {}
            cursor = None
            for lid in ids:       # pack left to right, each as near its wish as overlaps allow
                w = size[lid][0]
                target = wanted[lid] if wanted[lid] is not None else (
                    cursor + w / 2 if cursor is not None else 0.0)
                centre[lid] = target if cursor is None else max(cursor + w / 2, target)
                cursor = centre[lid] + w / 2 + GAP_X
            # Packing only pushes right: shift the row back so the layers that follow their
            # inputs sit where they want (sources only ask for a place near their user).
            wished = [wanted[lid] - centre[lid] for lid in ids
                      if wanted[lid] is not None and any(p in x for p in preds.get(lid, ()))]
            if not wished:
                wished = [wanted[lid] - centre[lid] for lid in ids if wanted[lid] is not None]
            shift = sum(wished) / len(wished) if wished else 0.0
            for lid in ids:
                w, h = size[lid]
                x[lid] = centre[lid] + shift
                geo[lid] = (x[lid] - w / 2, y, w, h)
            y += max(size[lid][1] for lid in ids) + GAP_Y
    left = min((g[0] for g in geo.values()), default=10.0)
    geo = {lid: (gx - left + 10.0, gy, w, h) for lid, (gx, gy, w, h) in geo.items()}
    return boxes, arrows, geo


def edge_paths(arrows, geo) -> list[tuple]:
    """Per arrow, its path as cubic Bezier control points ((x1, y1), c1, c2, (x2, y2)) and,
    for an edge routed around the boxes it would cross, the lane's points between: an edge
    that skips ranks (ResNet's residual) goes down a lane right of the boxes it passes, not
    through them. A back edge of a cycle bulges right."""
    paths = []
    lanes = 0
    for a in arrows:
        sx, sy, sw, sh = geo[a.src]
        dx, dy, dw, dh = geo[a.dst]
        if dy <= sy:     # a back edge of a cycle: right side to right side, bulging right
            x1, y1, x2, y2 = sx + sw, sy + sh / 2, dx + dw, dy + dh / 2
            paths.append(((x1, y1), (x1 + 60, y1), (x2 + 60, y2), (x2, y2), None))
            continue
        x1, y1, x2, y2 = sx + sw / 2, sy + sh, dx + dw / 2, dy
        lo, hi = min(x1, x2) - 8, max(x1, x2) + 8
        between = [g for key, g in geo.items() if key not in (a.src, a.dst)
                   and g[1] > y1 and g[1] + g[3] < y2 and g[0] < hi and g[0] + g[2] > lo]
        if not between:
            bend = max(20.0, (y2 - y1) / 2)
            paths.append(((x1, y1), (x1, y1 + bend), (x2, y2 - bend), (x2, y2), None))
            continue
        lanes += 1
        lane = max(g[0] + g[2] for g in between) + 14 + 6 * (lanes % 4)
        top, bottom = min(g[1] for g in between) - 6, max(g[1] + g[3] for g in between) + 6
        paths.append(((x1, y1), (x1, top), (lane, y1), (lane, top),
                      ((lane, bottom), (lane, y2), (x2, bottom), (x2, y2))))
    return paths


def _path_d(path) -> str:
    p0, c1, c2, p1, rest = path
    d = (f"M{p0[0]:.1f},{p0[1]:.1f} C{c1[0]:.1f},{c1[1]:.1f} {c2[0]:.1f},{c2[1]:.1f} "
         f"{p1[0]:.1f},{p1[1]:.1f}")
    if rest is not None:
        q0, d1, d2, q1 = rest
        d += (f" L{q0[0]:.1f},{q0[1]:.1f} C{d1[0]:.1f},{d1[1]:.1f} {d2[0]:.1f},{d2[1]:.1f} "
              f"{q1[0]:.1f},{q1[1]:.1f}")
    return d


def layout_svg(program) -> str:
    boxes, arrows, geo = layout(program)
    paths = edge_paths(arrows, geo)
    lanes = [x for path in paths if path[4] is not None for x in (path[4][0][0],)]
    width = max([gx + w for gx, _, w, _ in geo.values()] + lanes, default=100) + 70
    height = max((gy + h for _, gy, _, h in geo.values()), default=60) + 10
    e = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif">',
           f"<title>{e(os.path.basename(program.path))}</title>",
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker></defs>',
           '<rect width="100%" height="100%" fill="white"/>']
    for a, path in zip(arrows, paths):
        (x1, y1), c1, c2, (x2, y2), rest = path
        if rest is not None:    # the label on the lane
            mid_x, mid_y = rest[0][0], (y2 + rest[0][1]) / 2
        else:
            mid_x = (x1 + 3 * c1[0] + 3 * c2[0] + x2) / 8
            mid_y = (y1 + 3 * c1[1] + 3 * c2[1] + y2) / 8
        out.append(f'<g class="edge"><title>{e(a.src)}:{a.out} -&gt; {e(a.dst)}:{a.inp} '
                   f'{e(a.label)}</title><path d="{_path_d(path)}" fill="none" stroke="#777" '
                   f'marker-end="url(#arrow)"/><text x="{mid_x + 4:.1f}" '
                   f'y="{mid_y + 3:.1f}" font-size="9" fill="#555" stroke="white" '
                   f'stroke-width="3" paint-order="stroke">{e(a.label)}</text></g>')
    for b in boxes:
        bx, by, w, h = geo[b.id]
        stroke, sw = ("#555", 1)
        if b.errors:
            stroke, sw = ERROR_COLOR, 3
        elif b.warnings:
            stroke, sw = WARNING_COLOR, 2
        out.append(f'<g class="node" id="L{e(b.id)}"><title>{e(b.tooltip)}</title>'
                   f'<rect x="{bx:.1f}" y="{by:.1f}" width="{w:.1f}" height="{h:.1f}" rx="6" '
                   f'fill="{category_color(b.category)}" stroke="{stroke}" stroke-width="{sw}"/>')
        for i, t in enumerate(b.lines):
            weight = ' font-weight="bold"' if i == 0 else ""
            color = ERROR_COLOR if t.startswith("ERROR: ") else "#000"
            out.append(f'<text x="{bx + w / 2:.1f}" y="{by + PAD + 7 + i * LINE_H:.1f}" '
                       f'font-size="11" text-anchor="middle" fill="{color}"{weight}>{e(t)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- front ends

def to_svg(program, layout_engine: str = "auto") -> str:
    """SVG text; `layout_engine` is "dot", "builtin" or "auto" (dot when installed)."""
    if layout_engine == "dot" or (layout_engine == "auto" and dot_program()):
        return render_with_dot(to_dot(program), "svg").decode("utf-8")
    return layout_svg(program)


def _strip_prolog(svg: str) -> str:
    """SVG without its XML declaration and DOCTYPE, for inlining into HTML."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def to_html(program, layout_engine: str = "auto") -> str:
    """One self-contained page: the SVG inline, a legend and the diagnostics; no network."""
    boxes, _ = picture(program)
    svg = _strip_prolog(to_svg(program, layout_engine))
    e = html.escape
    title = os.path.basename(program.path)
    categories = sorted({b.category for b in boxes})
    legend = "".join(f'<span class="key" style="background:{category_color(c)}">{e(c)}</span>'
                     for c in categories)
    legend += (f'<span class="key" style="border:3px solid {ERROR_COLOR}">fails validation</span>'
               f'<span class="key" style="border:2px solid {WARNING_COLOR}">has warnings</span>')
    diags = "".join(f'<li class="{d.severity}">{e(str(d))}</li>' for d in program.diagnostics)
    errors = sum(d.severity == "error" for d in program.diagnostics)
    warnings = len(program.diagnostics) - errors
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 1em; }}
.key {{ display: inline-block; padding: 2px 8px; margin: 2px; border: 1px solid #999;
        border-radius: 4px; font-size: 12px; }}
.graph {{ overflow: auto; border: 1px solid #ddd; margin-top: 0.5em; }}
li.error {{ color: {ERROR_COLOR}; }} li.warning {{ color: {WARNING_COLOR}; }}
li {{ font-family: monospace; font-size: 12px; }}
</style></head>
<body>
<h1>{e(title)}</h1>
<p>{len(boxes)} layers; {errors} errors, {warnings} warnings. Hover over a layer for details.</p>
<div class="legend">{legend}</div>
<div class="graph">
{svg}</div>
<ul class="diagnostics">{diags}</ul>
</body></html>
"""


FORMATS = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".html": "html", ".htm": "html"}


def render(program, fmt: str, layout_engine: str = "auto") -> str:
    if fmt == "dot":
        return to_dot(program)
    if fmt == "svg":
        return to_svg(program, layout_engine)
    if fmt == "html":
        return to_html(program, layout_engine)
    raise ValueError(f"unknown picture format '{fmt}'; one of dot, svg, html")


def load_for_drawing(xml, weights=None):
    """The Program of a model, even an invalid one; ModelError only when nothing can be read."""
    from ..run.program import load_program

    program = load_program(os.fspath(xml), weights)
    if program.doc is None:
        raise ModelError(program.diagnostics)
    return program
