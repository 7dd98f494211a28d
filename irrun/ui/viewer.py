"""The graph viewer: one self-contained, offline HTML page for browsing a model.

Netron's browsing (Consts folded into their consumer, a side panel with every attribute and
port on click, zoom, pan, fit, search, bodies of Loop/TensorIterator/If to open), plus what an
interpreter knows: the inferred type and shape of every output next to the declared one, the
validation diagnostics on the layers they concern and, after a run (`irrun graph -i x.npz`),
each layer's share of the time as its colour, its output statistics, and NaN/Inf flagged.

The layout is irrun's own layered (Sugiyama) layout rather than a library's: ranks by longest
path, an edge spanning several ranks routed through one placeholder per rank it passes,
orders by barycentre sweeps, then x positions packed with a minimum gap. Every edge is drawn
as straight segments between consecutive ranks, which lie in the empty band between two rows
of boxes, so no edge crosses a box and no box overlaps another by construction; each box's
text sits inside it. Graphviz's dot gives nicer curves, but it is a separate program (not a
Python package) and its SVG would have to be re-parsed to attach the interaction; the HTML
must work on a machine with nothing but irrun.

The page opens at a readable zoom near the inputs (the whole graph when it fits at one),
edges carry their tensor's type and shape, search zooms to the first hit and Enter (Shift+
Enter) steps through the hits, and a layer chosen from the side panel is scrolled into view.
Past MAX_LAYERS drawn layers the page only says to use `irrun explore` (Model Explorer).

Names and ids come from the model file, so the page builds its HTML by construction: the
SVG through html.escape, the side panel and breadcrumb as DOM nodes (text nodes, dataset),
and the JSON data block with every `<`, `>` and `&` as a \\u escape (no `</script>` or
`<!--` can end or bend the script element).
"""
from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field

import numpy as np

from ..ir.shapes import format_shape
from ..tools.drawing import ERROR_COLOR, WARNING_COLOR, category_color

ROW_GAP = 56          # vertical space between two rows of boxes (the edges' band)
COL_GAP = 24          # horizontal space between two boxes of a row
BOX_H = 50
CHAR_W = 6.6          # average width of a character of the boxes' 11px font
DUMMY_W = 8
EDGE_LABEL_CHARS = 28  # an edge's type-and-shape label, cut to this length
MAX_LAYERS = 3000      # drawn layers (Consts folded) past which the page sends to explore


@dataclass
class VNode:
    id: str
    width: float
    rank: int = 0
    order: float = 0.0
    x: float = 0.0
    dummy: bool = False


@dataclass
class Network:
    """One network's page data: its layers' details and its drawing."""

    key: str
    title: str
    svg: str
    details: dict = field(default_factory=dict)
    bodies: list = field(default_factory=list)
    parent: str | None = None


def _value_preview(value) -> str:
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        a = a.astype(np.float32)
    with np.printoptions(threshold=8, edgeitems=3, precision=4, linewidth=80):
        return np.array2string(a.reshape(-1)[:64] if a.size > 64 else a)


def _output_names(program) -> dict[str, str]:
    """Result layer id -> the model output name it stands for."""
    from ..run.model import output_names_of

    return {r.layer.id: output_names_of(program, r)[0] for r in program.results}


def _spec_text(spec) -> str:
    return f"{spec.etype.name}{format_shape(spec.shape)}"


def _declared(port) -> str:
    dims = "[" + ",".join("?" if d == -1 else str(d) for d in (port.dims or [])) + "]"
    return f"{port.precision or '?'}{dims}"


def _layout(ids: list[str], edges: list[tuple[str, str]], widths: dict[str, float],
            topo: list[str]):
    """Positions {id: (x, y, w, h)} and, per edge, its polyline points."""
    preds: dict[str, list[str]] = {i: [] for i in ids}
    for u, v in edges:
        preds[v].append(u)
    rank: dict[str, int] = {}
    for i in topo:
        if i in preds:
            rank[i] = 1 + max((rank[p] for p in preds[i] if p in rank), default=-1)
    # A source (a Parameter, a decompression Convert of a Const) sits just above its first
    # consumer rather than in the top row, so its edge stays short.
    succs: dict[str, list[str]] = {i: [] for i in ids}
    for u, v in edges:
        succs[u].append(v)
    for i in reversed(topo):
        if i in rank and not preds[i] and succs[i]:
            rank[i] = max(0, min(rank[v] for v in succs[i]) - 1)
    nodes = {i: VNode(i, widths[i], rank[i]) for i in ids}
    # Edges longer than one rank go through a placeholder on every rank between.
    chains = []
    for k, (u, v) in enumerate(edges):
        path = [u]
        for r in range(rank[u] + 1, rank[v]):
            d = f"\0{k}:{r}"
            nodes[d] = VNode(d, DUMMY_W, r, dummy=True)
            path.append(d)
        path.append(v)
        chains.append(path)
    rows: dict[int, list[VNode]] = {}
    for n in nodes.values():
        rows.setdefault(n.rank, []).append(n)
    up: dict[str, list[str]] = {i: [] for i in nodes}
    down: dict[str, list[str]] = {i: [] for i in nodes}
    for path in chains:
        for a, b in zip(path, path[1:]):
            down[a].append(b)
            up[b].append(a)
    ranks = sorted(rows)
    for r in ranks:
        for k, n in enumerate(rows[r]):
            n.order = k
    # Barycentre sweeps, down then up, a few times.
    for sweep in range(6):
        seq = ranks[1:] if sweep % 2 == 0 else ranks[-2::-1]
        for r in seq:
            nbrs = up if sweep % 2 == 0 else down
            for n in rows[r]:
                ns = nbrs[n.id]
                if ns:
                    n.order = sum(nodes[m].order for m in ns) / len(ns)
            rows[r].sort(key=lambda n: n.order)
            for k, n in enumerate(rows[r]):
                n.order = k
    # x: pack each row, then pull nodes towards their neighbours' centres (keeping order
    # and gaps) for a few rounds.
    for r in ranks:
        x = 0.0
        for n in rows[r]:
            n.x = x
            x += n.width + COL_GAP
    for round_ in range(8):
        seq = ranks if round_ % 2 == 0 else ranks[::-1]
        for r in seq:
            nbrs = up if round_ % 2 == 0 else down
            row = rows[r]
            want = []
            for n in row:
                ns = nbrs[n.id] or up[n.id] or down[n.id]
                centre = (sum(nodes[m].x + nodes[m].width / 2 for m in ns) / len(ns)
                          if ns else n.x + n.width / 2)
                want.append(centre - n.width / 2)
            # Place left to right at the wanted x, never closer than the gap.
            for k, n in enumerate(row):
                lo = row[k - 1].x + row[k - 1].width + COL_GAP if k else -math.inf
                n.x = max(want[k], lo)
            # Then right to left, so the row does not drift right; then left to right once
            # more, which only pushes right: boxes of a row never come closer than the gap.
            for k in range(len(row) - 2, -1, -1):
                row[k].x = min(row[k].x, row[k + 1].x - COL_GAP - row[k].width)
            for k in range(1, len(row)):
                row[k].x = max(row[k].x, row[k - 1].x + row[k - 1].width + COL_GAP)
    left = min(n.x for n in nodes.values()) if nodes else 0.0
    pos = {}
    for n in nodes.values():
        n.x -= left - 20
    for i in ids:
        n = nodes[i]
        pos[i] = (n.x, 20 + n.rank * (BOX_H + ROW_GAP), n.width, BOX_H)
    lines = []
    for path in chains:
        pts = []
        for k, nid in enumerate(path):
            n = nodes[nid]
            y = 20 + n.rank * (BOX_H + ROW_GAP)
            cx = n.x + n.width / 2
            if k == 0:
                pts.append((cx, y + BOX_H))
            elif k == len(path) - 1:
                pts.append((cx, y))
            else:   # a placeholder: pass straight through its row
                pts += [(cx, y), (cx, y + BOX_H)]
        lines.append(pts)
    return pos, lines


def _network(program, key: str, title: str, run: dict | None, diagnostics,
             agreement: dict | None = None, parent: str | None = None) -> Network:
    e = html.escape
    names = {layer.id: layer.name for layer in program.doc.layers}
    diags: dict[str, list] = {}
    for d in diagnostics:
        if d.layer_id is not None and names.get(d.layer_id) == d.layer_name:
            diags.setdefault(d.layer_id, []).append(d)
    out_names = _output_names(program)
    shown = [layer.id for layer in program.doc.layers
             if layer.type.lower() != "const"]
    visible = set(shown)
    details: dict[str, dict] = {}
    edges: list[tuple[str, str]] = []
    edge_labels: list[str] = []
    texts: dict[str, list[str]] = {}
    total = sum(r.get("seconds", 0.0) for r in (run or {}).values()) or 1.0
    for lid in shown:
        node = program.nodes[lid]
        layer = node.layer
        category = node.op.category if node.op is not None and node.op.category else (
            "infrastructure" if node.kind != "op" else "unknown")
        inputs = []
        for position, source in enumerate(node.inputs):
            port = layer.inputs[position].id if position < len(layer.inputs) else position
            if source is None or source[0] not in program.nodes:
                inputs.append({"port": port, "from": "(not connected)", "type": "?"})
                continue
            src, out = source
            snode = program.nodes[src]
            spec = snode.specs[out] if snode.specs and out < len(snode.specs) else None
            item = {"port": port, "from": f"{snode.layer.name}:{out}",
                    "type": _spec_text(spec) if spec else "?"}
            if snode.kind == "const":
                item["const"] = True
                if snode.const_value is not None:
                    item["values"] = _value_preview(snode.const_value)
            elif src in visible:
                edges.append((src, lid))
                edge_labels.append(item["type"])
                item["from_id"] = src
            inputs.append(item)
        outputs = []
        for k, port in enumerate(layer.outputs):
            spec = node.specs[k] if node.specs and k < len(node.specs) else None
            outputs.append({"port": port.id, "names": list(port.names),
                            "inferred": _spec_text(spec) if spec else "?",
                            "declared": _declared(port)})
        label = out_names.get(lid, layer.name) if node.kind == "result" else layer.name
        det = {"id": lid, "name": layer.name, "label": label, "op": layer.op_label,
               "category": category, "line": layer.line, "attributes": dict(layer.data),
               "inputs": inputs, "outputs": outputs,
               "diagnostics": [f"{d.severity}: {d.message}" for d in diags.get(lid, [])],
               "bodies": []}
        stats = (run or {}).get(lid)
        if run is not None and stats is None:
            det["run_note"] = ("computed once when the model was read (folded)"
                               if getattr(node, "folded", None) is not None
                               else "not run (no output needs it)")
        if stats is not None:
            det["seconds"] = stats.get("seconds", 0.0)
            det["share"] = det["seconds"] / total
            det["stats"] = stats.get("outputs", [])
        if agreement and lid in agreement:
            det["agreement"] = agreement[lid]
        details[lid] = det
        kinds = [o["inferred"] for o in outputs] if node.kind != "result" else (
            [i["type"] for i in inputs])
        texts[lid] = [label, layer.op_label, "; ".join(kinds)[:60]]
    widths = {lid: max(90.0, 14 + CHAR_W * max(len(t) for t in texts[lid])) for lid in shown}
    pos, lines = _layout(shown, edges, widths, [i for i in program.order if i in visible])
    width = max((x + w for x, _, w, _ in pos.values()), default=100) + 20
    height = max((y + h for _, y, _, h in pos.values()), default=100) + 20
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="net" data-net="{e(key)}" '
             f'viewBox="0 0 {width:.0f} {height:.0f}" width="100%" height="100%">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
             'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#666"/>'
             '</marker></defs><g class="viewport">']
    for (u, v), pts, label in zip(edges, lines, edge_labels):
        d = " ".join(f"{'M' if k == 0 else 'L'}{x:.1f},{y:.1f}" for k, (x, y) in enumerate(pts))
        parts.append(f'<path class="edge" data-from="{e(u)}" data-to="{e(v)}" d="{d}" '
                     f'fill="none" stroke="#888" stroke-width="1.2" marker-end="url(#arrow)"/>')
        # The tensor's type and shape, just below its producer, in the band between rows.
        (x0, y0) = pts[0]
        text = label if len(label) <= EDGE_LABEL_CHARS else label[:EDGE_LABEL_CHARS - 1] + "…"
        parts.append(f'<text class="edge-label" data-from="{e(u)}" data-to="{e(v)}" '
                     f'x="{x0 + 4:.1f}" y="{y0 + 12:.1f}">{e(text)}</text>')
    for lid in shown:
        x, y, w, h = pos[lid]
        det = details[lid]
        fill = category_color(det["category"])
        if "share" in det:
            heat = min(1.0, det["share"] * 4)
            fill = f"rgb(255,{int(255 - 170 * heat)},{int(255 - 200 * heat)})"
        agreement = det.get("agreement")
        if agreement == "differ":
            fill = "#ffb3b3"
        elif agreement in ("drift", "explained"):   # differs only as its inputs do, or
            # as OpenVINO's own arithmetic does
            fill = "#ffe0a0"
        elif agreement == "agree":
            fill = "#c8f0c8"
        stroke, sw = "#555", 1
        kinds = {s.split(":")[0] for s in det["diagnostics"]}
        if "error" in kinds:
            stroke, sw = ERROR_COLOR, 3
        elif "warning" in kinds:
            stroke, sw = WARNING_COLOR, 2
        bad = any(o.get("nan") or o.get("inf") for o in det.get("stats", []))
        if bad:
            stroke, sw = "#b00020", 3
        label, op, kinds_text = texts[lid]
        flag = " !!" if bad else ""
        parts.append(
            f'<g class="node" data-id="{e(lid)}" data-name="{e(det["name"])}" '
            f'data-op="{e(det["op"])}" transform="translate({x:.1f},{y:.1f})">'
            f'<rect class="box" width="{w:.1f}" height="{h}" rx="5" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{sw}"/>'
            f'<text x="7" y="15" class="t1">{e(label)}{flag}</text>'
            f'<text x="7" y="30" class="t2">{e(op)}</text>'
            f'<text x="7" y="44" class="t3">{e(kinds_text)}</text></g>')
    parts.append("</g></svg>")
    net = Network(key, title, "".join(parts), details, parent=parent)
    for lid in shown:
        node = program.nodes[lid]
        for k, body in enumerate(getattr(node, "bodies", None) or ()):
            if body is None or body.doc is None:
                continue
            role = node.layer.bodies[k].role if k < len(node.layer.bodies) else f"body{k}"
            bkey = f"{key}/{lid}/{role}"
            net.details[lid]["bodies"].append({"key": bkey, "role": role})
            net.bodies.append(_network(body, bkey, f"{title} › {node.layer.name} › {role}",
                                       None, diagnostics, parent=key))
    return net


def _flatten(net: Network) -> list[Network]:
    out = [net]
    for b in net.bodies:
        out += _flatten(b)
    return out


def run_stats(model, feed) -> dict:
    """{layer id: {"seconds", "outputs": [{dtype, shape, min, max, nan, inf}]}} of one run."""
    stats: dict[str, dict] = {}

    def listener(node, outputs, seconds):
        if node.program is not None and node.program.owner is not None:
            return     # a body's layers: their time is their Loop's
        rows = []
        for a in outputs:
            a = np.asarray(a)
            row = {"dtype": str(a.dtype), "shape": list(a.shape)}
            if a.dtype.kind in "fc" or a.dtype.kind == "V":
                f = a.astype(np.float64) if a.dtype.kind == "V" else a
                finite = np.isfinite(f)
                row["nan"] = int(np.isnan(f).sum())
                row["inf"] = int((~finite).sum()) - row["nan"]
                if finite.any():
                    row["min"], row["max"] = float(f[finite].min()), float(f[finite].max())
            elif a.size and a.dtype.kind in "biu":
                row["min"], row["max"] = float(a.min()), float(a.max())
            rows.append(row)
        stats[node.id] = {"seconds": seconds, "outputs": rows}

    model.infer(feed, listener=listener)
    return stats


def agreement_of(result) -> dict[str, str]:
    """{layer id: "differ" | "drift" | "agree"} from an irrun.compare result: a layer's worst
    tensor (differ: wrong on its own account; drift: wrong only as its inputs are)."""
    rank = {"agree": 0, "drift": 1, "explained": 1, "differ": 2}
    out: dict[str, str] = {}
    for t in result.tensors:
        lid = getattr(t, "layer_id", None)
        if lid is None or t.status not in rank:
            continue
        if rank[t.status] >= rank.get(out.get(lid, "agree"), 0):
            out[lid] = t.status
    return out


def script_json(data) -> str:
    """JSON for a <script type="application/json"> block: `<`, `>` and `&` written as
    JSON \\u escapes (JSON.parse reads them back), so no `</script>`, `<!--` or `<script`
    in a name can end or bend the script element."""
    return (json.dumps(data).replace("&", "\\u0026").replace("<", "\\u003c")
            .replace(">", "\\u003e"))


def drawn_layers(program) -> int:
    """The layers the page draws at the top level (Consts are folded into their consumers)."""
    return sum(layer.type.lower() != "const" for layer in program.doc.layers)


def to_viewer_html(program, run: dict | None = None, agreement: dict | None = None) -> str:
    """The page for a loaded Program (a run's `run_stats` and a compare's per-layer status
    optional). Past MAX_LAYERS drawn layers: a page that says to use `irrun explore`."""
    e = html.escape
    title = program.doc.name or "model"
    errors = sum(d.severity == "error" for d in program.diagnostics)
    warnings = len(program.diagnostics) - errors
    drawn = drawn_layers(program)
    if drawn > MAX_LAYERS:
        return _TOO_LARGE.format(title=e(title), file=e(program.path), drawn=drawn,
                                 limit=MAX_LAYERS, layers=len(program.doc.layers),
                                 errors=errors, warnings=warnings)
    top = _network(program, "main", title, run, program.diagnostics, agreement)
    nets = _flatten(top)
    data = {n.key: {"title": n.title, "parent": n.parent, "details": n.details} for n in nets}
    svgs = "\n".join(f'<div class="view" data-key="{e(n.key)}"'
                     f'{" hidden" if n.key != "main" else ""}>{n.svg}</div>' for n in nets)
    summary = (f"{len(program.doc.layers)} layers, {errors} errors, {warnings} warnings"
               + ("; coloured by time share of one run" if run and not agreement else "")
               + ("; coloured by agreement with OpenVINO (green agrees, amber differs only "
                  "as its inputs do, red differs)" if agreement else ""))
    return _PAGE.format(title=e(title), summary=e(summary), svgs=svgs,
                        payload=script_json(data), file=e(program.path))


_TOO_LARGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body {{ font-family: Helvetica, Arial, sans-serif; margin: 2em; max-width: 50em; }}
code {{ background: #f3f3f3; padding: 1px 4px; }}</style></head>
<body><h1>{title}</h1>
<p class="summary">{layers} layers, {errors} errors, {warnings} warnings</p>
<p id="too-large">{drawn} layers to draw is more than this page shows well (at most
{limit}). Open the model in Model Explorer, which groups layers into collapsible namespaces
and draws with WebGL:</p>
<pre><code>pip install 'irrun[explore]'
irrun explore {file}</code></pre>
<p><code>irrun validate</code> lists the model's problems; <code>irrun graph -o model.svg</code>
still draws it as one picture.</p>
</body></html>
"""


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ margin: 0; font-family: Helvetica, Arial, sans-serif; display: flex; height: 100vh; }}
#main {{ flex: 1; display: flex; flex-direction: column; min-width: 0; }}
header {{ padding: 6px 10px; border-bottom: 1px solid #ddd; display: flex; gap: 10px;
          align-items: center; flex-wrap: wrap; }}
header h1 {{ font-size: 18px; margin: 0; }}
header .summary {{ color: #555; font-size: 12px; }}
#crumbs a {{ cursor: pointer; color: #06c; font-size: 13px; }}
#hits {{ color: #555; font-size: 12px; min-width: 5em; }}
.view {{ flex: 1; overflow: hidden; cursor: grab; }}
.view[hidden] {{ display: none; }}
svg.net {{ display: block; }}
.node {{ cursor: pointer; }}
.node text {{ font-family: Menlo, Consolas, monospace; pointer-events: none; }}
.t1 {{ font-size: 11px; font-weight: bold; }} .t2 {{ font-size: 11px; }}
.t3 {{ font-size: 10px; fill: #444; }}
.edge-label {{ font-family: Menlo, Consolas, monospace; font-size: 9px; fill: #555;
               pointer-events: none; }}
.node.hit rect {{ stroke: #06c; stroke-width: 3; }}
.node.current rect {{ stroke: #f90; stroke-width: 4; }}
.node.selected rect {{ stroke: #000; stroke-width: 3; }}
#panel {{ width: 360px; border-left: 1px solid #ddd; overflow: auto; padding: 10px;
          font-size: 12px; }}
#panel h2 {{ font-size: 14px; margin: 0 0 4px; word-break: break-all; }}
#panel table {{ border-collapse: collapse; width: 100%; }}
#panel td {{ border-bottom: 1px solid #eee; padding: 2px 4px; vertical-align: top;
             font-family: Menlo, Consolas, monospace; word-break: break-all; }}
#panel .diag {{ color: {error}; }}
#panel a.goto {{ color: #06c; cursor: pointer; }}
button {{ font-size: 12px; }}
</style></head>
<body>
<div id="main">
<header><h1>{title}</h1><span class="summary">{summary}</span>
<input id="search" placeholder="search name or type (Enter: next)" size="28">
<span id="hits"></span>
<button id="fit">fit</button><button id="readable">1:1</button><span id="crumbs"></span></header>
{svgs}
</div>
<aside id="panel"><p>Click a layer for its attributes, ports and diagnostics.</p>
<p style="color:#777">{file}</p></aside>
<script id="data" type="application/json">{payload}</script>
<script>
(function () {{
  'use strict';
  const data = JSON.parse(document.getElementById('data').textContent);
  const views = {{}};
  document.querySelectorAll('.view').forEach(v => {{ views[v.dataset.key] = v; }});
  let current = 'main';
  const opened = {{}};
  // Every piece of HTML is built here: elements, attributes through the DOM, text as text
  // nodes. Nothing from the model is ever parsed as markup.
  function el(tag, props, ...children) {{
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {{}})) {{
      if (k === 'class') e.className = v;
      else if (k === 'data') Object.assign(e.dataset, v);
      else if (k === 'onclick') e.addEventListener('click', v);
      else e.setAttribute(k, v);
    }}
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }}
  function svgOf(key) {{ return views[key].querySelector('svg'); }}
  function box(key) {{ return svgOf(key).viewBox.baseVal; }}
  function screen(key) {{
    const s = svgOf(key);
    return [s.clientWidth || 800, s.clientHeight || 600];
  }}
  function setView(key, x, y, w, h) {{
    svgOf(key).setAttribute('viewBox', [x, y, w, h].join(' '));
  }}
  function scale(key) {{ return box(key).width / screen(key)[0]; }}   // SVG units per pixel
  function fit(key) {{
    const g = svgOf(key).querySelector('.viewport').getBBox(), [W, H] = screen(key);
    const k = Math.max((g.width + 20) / W, (g.height + 20) / H);
    setView(key, g.x + g.width / 2 - W * k / 2, g.y + g.height / 2 - H * k / 2, W * k, H * k);
  }}
  function centreOn(key, cx, cy, k) {{
    const [W, H] = screen(key);
    setView(key, cx - W * k / 2, cy - H * k / 2, W * k, H * k);
  }}
  function nodes(key) {{ return [...views[key].querySelectorAll('.node')]; }}
  function nodeOf(key, id) {{ return nodes(key).find(n => n.dataset.id === id); }}
  function rectOf(n) {{
    const t = n.transform.baseVal.consolidate().matrix, r = n.querySelector('rect');
    return {{x: t.e, y: t.f, w: r.width.baseVal.value, h: r.height.baseVal.value}};
  }}
  // The first view of a network: all of it when it fits at a readable size (labels at
  // least 11px * 0.6), else 1:1 at the top, centred on the first input.
  function openView(key) {{
    const g = svgOf(key).querySelector('.viewport').getBBox(), [W, H] = screen(key);
    if (Math.max((g.width + 20) / W, (g.height + 20) / H) <= 1.6) {{ fit(key); return; }}
    const inputs = nodes(key).filter(n => n.dataset.op.startsWith('Parameter'));
    const first = (inputs.length ? inputs : nodes(key)).map(rectOf).sort(
      (a, b) => a.y - b.y || a.x - b.x)[0];
    const cx = first ? first.x + first.w / 2 : g.x + W / 2;
    const top = first ? first.y - 20 : g.y - 10;
    setView(key, cx - W / 2, top, W, H);
  }}
  // Bring a layer into view: pan so it is centred when any of it is outside; zoom to 1:1
  // first when the view is too far out to read it.
  function reveal(key, n) {{
    const b = box(key), r = rectOf(n);
    const inside = r.x >= b.x && r.y >= b.y && r.x + r.w <= b.x + b.width &&
                   r.y + r.h <= b.y + b.height;
    if (scale(key) > 1.6) centreOn(key, r.x + r.w / 2, r.y + r.h / 2, 1);
    else if (!inside) centreOn(key, r.x + r.w / 2, r.y + r.h / 2, scale(key));
  }}
  function chainOf(key) {{
    const chain = [];
    for (let k = key; k && data[k]; k = data[k].parent) chain.unshift(k);
    return chain;
  }}
  function show(key) {{
    Object.values(views).forEach(v => v.hidden = true);
    views[key].hidden = false; current = key;
    if (!opened[key]) {{ openView(key); opened[key] = true; }}
    const crumbs = document.getElementById('crumbs');
    crumbs.replaceChildren();
    chainOf(key).forEach((k, i) => {{
      if (i) crumbs.append(' › ');
      crumbs.append(el('a', {{data: {{key: k}}, onclick: () => show(k)}},
                       data[k].title.split(' › ').pop()));
    }});
    runSearch();
  }}
  function row(k, ...v) {{ return el('tr', {{}}, el('td', {{}}, k), el('td', {{}}, ...v)); }}
  function table(rows) {{ return el('table', {{}}, ...rows); }}
  function goto(key, id, text) {{
    return el('a', {{class: 'goto', onclick: ev => {{ ev.preventDefault(); select(key, id); }}}},
              text);
  }}
  function panel(key, id) {{
    const d = data[key].details[id];
    const p = document.getElementById('panel');
    const parts = [el('h2', {{}}, d.label),
                   el('div', {{}}, d.op + ' · line ' + d.line + ' · id ' + d.id)];
    if (d.diagnostics.length) parts.push(el('h3', {{}}, 'Diagnostics'),
      ...d.diagnostics.map(x => el('div', {{class: 'diag'}}, x)));
    const attrs = Object.entries(d.attributes);
    parts.push(el('h3', {{}}, 'Attributes'), table(attrs.length ?
      attrs.map(([k, v]) => row(k, String(v))) : [row('(none)', '')]));
    parts.push(el('h3', {{}}, 'Inputs'), table(d.inputs.map(i => row('port ' + i.port,
      i.type + ' from ', i.from_id !== undefined ? goto(key, i.from_id, i.from) : i.from,
      i.const ? ' (Const' + (i.values ? ': ' + i.values : '') + ')' : ''))));
    parts.push(el('h3', {{}}, 'Outputs'), table(d.outputs.map(o => row('port ' + o.port,
      'inferred ' + o.inferred + ', declared ' + o.declared +
      (o.names.length ? ', names ' + o.names.join(', ') : '')))));
    const consumers = Object.entries(data[key].details).filter(([, c]) =>
      c.inputs.some(i => i.from_id === id)).map(([cid, c]) => goto(key, cid, c.label));
    if (consumers.length) parts.push(el('h3', {{}}, 'Consumers'),
      el('div', {{}}, ...consumers.flatMap((c, i) => i ? [', ', c] : [c])));
    if (d.seconds !== undefined) {{
      parts.push(el('h3', {{}}, 'Run'), table([row('time', (d.seconds * 1e3).toFixed(3) +
        ' ms (' + (d.share * 100).toFixed(1) + '%)')].concat(d.stats.map((s, k) =>
        row('output ' + k, s.dtype + '[' + s.shape.join(',') + ']' + (s.min !== undefined ?
          ' in [' + s.min + ', ' + s.max + ']' : '') + (s.nan ? ' !! ' + s.nan + ' NaN' : '') +
          (s.inf ? ' !! ' + s.inf + ' Inf' : ''))))));
    }}
    if (d.run_note) parts.push(el('h3', {{}}, 'Run'), el('div', {{}}, d.run_note));
    if (d.agreement) parts.push(el('h3', {{}}, 'Compare'), el('div', {{}}, d.agreement));
    if (d.bodies.length) parts.push(el('h3', {{}}, 'Bodies'), ...d.bodies.map(b =>
      el('button', {{class: 'open-body', data: {{key: b.key}}, onclick: () => show(b.key)}},
         'open ' + b.role)));
    p.replaceChildren(...parts);
    p.scrollTop = 0;
  }}
  function select(key, id) {{
    const n = nodeOf(key, id);
    if (!n) return;
    document.querySelectorAll('.node.selected').forEach(x => x.classList.remove('selected'));
    n.classList.add('selected');
    panel(key, id);
    reveal(key, n);
  }}
  Object.values(views).forEach(v => {{
    v.addEventListener('click', ev => {{
      const n = ev.target.closest('.node');
      if (n) {{ select(v.dataset.key, n.dataset.id); ev.stopPropagation(); }}
    }});
    let drag = null;
    v.addEventListener('mousedown', ev => {{ drag = [ev.clientX, ev.clientY]; }});
    window.addEventListener('mouseup', () => {{ drag = null; }});
    v.addEventListener('mousemove', ev => {{
      if (!drag) return;
      const b = box(v.dataset.key), k = scale(v.dataset.key);
      b.x -= (ev.clientX - drag[0]) * k; b.y -= (ev.clientY - drag[1]) * k;
      drag = [ev.clientX, ev.clientY];
    }});
    v.addEventListener('wheel', ev => {{
      ev.preventDefault();
      const b = box(v.dataset.key), r = svgOf(v.dataset.key).getBoundingClientRect();
      const f = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
      const mx = b.x + (ev.clientX - r.left) / r.width * b.width;
      const my = b.y + (ev.clientY - r.top) / r.height * b.height;
      b.x = mx - (mx - b.x) * f; b.y = my - (my - b.y) * f; b.width *= f; b.height *= f;
    }}, {{ passive: false }});
  }});
  document.getElementById('fit').onclick = () => fit(current);
  document.getElementById('readable').onclick = () => {{
    const b = box(current);
    centreOn(current, b.x + b.width / 2, b.y + b.height / 2, 1);
  }};
  // Search: every match highlighted, the current one zoomed to; Enter steps to the next,
  // Shift+Enter to the one before.
  const search = document.getElementById('search');
  let hits = [], at = -1;
  function goHit(i) {{
    nodes(current).forEach(n => n.classList.remove('current'));
    const status = document.getElementById('hits');
    if (!hits.length) {{ status.textContent = search.value.trim() ? 'no match' : ''; return; }}
    at = (i + hits.length) % hits.length;
    const n = hits[at];
    n.classList.add('current');
    status.textContent = (at + 1) + ' of ' + hits.length;
    const r = rectOf(n);
    centreOn(current, r.x + r.w / 2, r.y + r.h / 2, Math.min(scale(current), 1));
    panel(current, n.dataset.id);
  }}
  function runSearch() {{
    const q = search.value.trim().toLowerCase();
    Object.values(views).forEach(v => v.querySelectorAll('.node.hit, .node.current').forEach(
      n => n.classList.remove('hit', 'current')));
    hits = q ? nodes(current).filter(n => n.dataset.name.toLowerCase().includes(q) ||
                                          n.dataset.op.toLowerCase().includes(q)) : [];
    hits.forEach(n => n.classList.add('hit'));
    goHit(0);
  }}
  search.addEventListener('input', runSearch);
  search.addEventListener('keydown', ev => {{
    if (ev.key === 'Enter') {{ ev.preventDefault(); goHit(at + (ev.shiftKey ? -1 : 1)); }}
  }});
  show('main');
}})();
</script>
</body></html>
""".replace("{error}", ERROR_COLOR)
