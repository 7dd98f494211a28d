"""`irrun graph`: DOT that parses, SVG (Graphviz or the built-in layout), self-contained HTML;
labels, edge labels, category colours and invalid layers highlighted."""
from __future__ import annotations

import glob
import os
import re

import numpy as np
import pytest
from click.testing import CliRunner
from lxml import etree
from lxml import html as lxml_html

from irrun.tools import drawing
from irrun.ui.cli import cli
from irrun.ir.registry import lookup, registered_versions

oracle = pytest.importorskip("oracle")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SVG = "{http://www.w3.org/2000/svg}"
HAVE_DOT = drawing.dot_program() is not None


# ---------------------------------------------------------------- a small DOT parser

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<id>[A-Za-z_][\w.]*|-?\d+(?:\.\d+)?)'
                    r'|(?P<punct>->|[{}\[\]=;,]))', re.S)


def _tokens(text):
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m and m.end() > pos, f"DOT does not tokenize at {text[pos:pos + 40]!r}"
        if m.group("str") is not None:
            out.append(("id", re.sub(r'\\(.)', lambda e: "\n" if e.group(1) == "n" else e.group(1),
                                     m.group("str")[1:-1])))
        elif m.group("id") is not None:
            out.append(("id", m.group("id")))
        else:
            out.append(("p", m.group("punct")))
        pos = m.end()
    return out


def parse_dot(text):
    try:
        return _parse_dot(text)
    except IndexError:
        raise AssertionError("the DOT text ends early") from None


def _parse_dot(text):
    """The subset of the DOT grammar irrun writes: nodes {id: attrs} and edges [(a, b, attrs)].

    Asserts the structure: `digraph ID { stmt; ... }` with attribute lists `[k=v, ...]`.
    """
    t = _tokens(text)
    i = 0

    def take(kind, value=None):
        nonlocal i
        assert i < len(t), "DOT ends early"
        k, v = t[i]
        assert k == kind and (value is None or v == value), f"expected {value or kind}, got {v!r}"
        i += 1
        return v

    def attrs():
        nonlocal i
        out = {}
        take("p", "[")
        while t[i] != ("p", "]"):
            key = take("id")
            take("p", "=")
            out[key] = take("id")
            if t[i] in (("p", ","), ("p", ";")):
                i += 1
        take("p", "]")
        return out

    take("id", "digraph")
    if t[i][0] == "id":
        i += 1
    nodes, edges = {}, []

    def block():
        """`{ stmt; ... }`; a statement may be a `subgraph ID { ... }` (a body's cluster)
        or, inside one, a graph attribute `key=value;`."""
        nonlocal i, edges
        take("p", "{")
        while t[i] != ("p", "}"):
            first = take("id")
            if first == "subgraph":
                if t[i][0] == "id":
                    i += 1
                block()
                continue
            if first in ("graph", "node", "edge") and t[i] == ("p", "["):
                attrs()
            elif t[i] == ("p", "="):
                i += 1
                take("id")
            elif t[i] == ("p", "->"):
                chain = [first]
                while t[i] == ("p", "->"):
                    i += 1
                    chain.append(take("id"))
                a = attrs() if t[i] == ("p", "[") else {}
                edges += [(u, v, a) for u, v in zip(chain, chain[1:])]
            else:
                nodes[first] = attrs() if t[i] == ("p", "[") else {}
            take("p", ";")
        take("p", "}")

    block()
    assert i == len(t), "text after the closing brace"
    for u, v, _ in edges:
        assert u in nodes and v in nodes, f"edge {u}->{v} names an undeclared node"
    return nodes, edges


def test_dot_parser_rejects_broken_text():
    with pytest.raises(AssertionError):
        parse_dot('digraph g { "a" [label="x"]; ')
    with pytest.raises(AssertionError):
        parse_dot('digraph g { "a" [label="x]; }')
    with pytest.raises(AssertionError):
        parse_dot('digraph g { "a"; "a" -> "b"; }')


# ---------------------------------------------------------------- models

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import irrun.ops  # noqa: F401
    for t in ("Add", "ReLU"):
        if not registered_versions(t):
            pytest.skip(f"{t} is not registered yet")
    ov = oracle.ov
    import openvino.opset8 as o
    x = o.parameter([1, -1, 4], ov.Type.f32, name="x")
    w = o.constant(np.ones((1, 1, 4), np.float32))
    w.set_friendly_name("w")
    add = o.add(x, w)
    add.set_friendly_name("add")
    relu = o.relu(add)
    relu.set_friendly_name("relu")
    cast = o.convert(relu, "f16")
    cast.set_friendly_name("cast")
    res = o.result(cast)
    res.set_friendly_name("out")
    xml = oracle.save(ov.Model([res], [x], "tiny"), tmp_path_factory.mktemp("g"))
    return xml


BROKEN = """<?xml version="1.0"?>
<net name="broken" version="11">
  <layers>
    <layer id="0" name="in &quot;quoted&quot; \\ back" type="Parameter" version="opset1">
      <data shape="2,3" element_type="f32"/>
      <output><port id="0" precision="FP32"><dim>2</dim><dim>3</dim></port></output>
    </layer>
    <layer id="1" name="bad_convert" type="Convert" version="opset1">
      <data destination_type="f99"/>
      <input><port id="0" precision="FP32"><dim>2</dim><dim>3</dim></port></input>
      <output><port id="1" precision="FP32"><dim>2</dim><dim>3</dim></port></output>
    </layer>
    <layer id="2" name="mystery" type="Frobnicate" version="opset1">
      <input><port id="0" precision="FP32"><dim>2</dim><dim>3</dim></port></input>
      <output><port id="1" precision="FP16"><dim>2</dim><dim>-1</dim></port></output>
    </layer>
    <layer id="3" name="good" type="Convert" version="opset1">
      <data destination_type="i32"/>
      <input><port id="0" precision="FP32"><dim>2</dim><dim>3</dim></port></input>
      <output><port id="1" precision="I32"><dim>2</dim><dim>3</dim></port></output>
    </layer>
    <layer id="4" name="r1" type="Result" version="opset1">
      <input><port id="0" precision="FP32"><dim>2</dim><dim>3</dim></port></input>
    </layer>
    <layer id="5" name="r2" type="Result" version="opset1">
      <input><port id="0" precision="FP16"><dim>2</dim><dim>-1</dim></port></input>
    </layer>
    <layer id="6" name="r3" type="Result" version="opset1">
      <input><port id="0" precision="I32"><dim>2</dim><dim>3</dim></port></input>
    </layer>
  </layers>
  <edges>
    <edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
    <edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>
    <edge from-layer="0" from-port="0" to-layer="3" to-port="0"/>
    <edge from-layer="1" from-port="1" to-layer="4" to-port="0"/>
    <edge from-layer="2" from-port="1" to-layer="5" to-port="0"/>
    <edge from-layer="3" from-port="1" to-layer="6" to-port="0"/>
  </edges>
</net>
"""


@pytest.fixture
def broken(tmp_path):
    path = tmp_path / "broken.xml"
    path.write_text(BROKEN)
    return str(path)


def _color(type_name):
    return drawing.category_color(lookup(type_name, "opset1").category)


# ---------------------------------------------------------------- DOT

def test_dot_labels_edges_and_colours(tiny):
    nodes, edges = parse_dot(drawing.to_dot(drawing.load_for_drawing(tiny)))
    by_name = {a["label"].split("\n")[1]: a for a in nodes.values()}
    assert set(by_name) == {"x", "w", "add", "relu", "cast", "out"}
    assert by_name["add"]["label"] == "Add-opset1\nadd\nf32[1,?,4]"
    assert by_name["cast"]["label"] == "Convert-opset1\ncast\nf16[1,?,4]"
    assert by_name["w"]["label"] == "Const-opset1\nw\nf32[1,1,4]"
    assert by_name["add"]["fillcolor"] == _color("Add")
    assert by_name["relu"]["fillcolor"] == _color("ReLU")
    assert by_name["cast"]["fillcolor"] == _color("Convert")
    assert all("penwidth" not in a for a in nodes.values())          # nothing is invalid
    name_of = {k: a["label"].split("\n")[1] for k, a in nodes.items()}
    labelled = sorted((name_of[u], name_of[v], a["label"].strip()) for u, v, a in edges)
    assert labelled == [("add", "relu", "f32[1,?,4]"), ("cast", "out", "f16[1,?,4]"),
                        ("relu", "cast", "f32[1,?,4]"), ("w", "add", "f32[1,1,4]"),
                        ("x", "add", "f32[1,?,4]")]


def test_dot_highlights_invalid_layers_and_still_draws(broken):
    program = drawing.load_for_drawing(broken)
    assert not program.ok
    nodes, edges = parse_dot(drawing.to_dot(program))
    assert len(nodes) == 7 and len(edges) == 6
    by_id = {k[1:]: a for k, a in nodes.items()}
    for lid in ("1", "2"):                        # bad attribute; unknown op
        assert by_id[lid]["color"] == drawing.ERROR_COLOR and by_id[lid]["penwidth"] == "3"
        assert "ERROR: " in by_id[lid]["label"]
    for lid in ("0", "3", "6"):
        assert "penwidth" not in by_id[lid] or by_id[lid].get("color") != drawing.ERROR_COLOR
    assert "f99" in by_id["1"]["tooltip"]
    # The unknown op's output is drawn as the file declares it.
    assert by_id["2"]["label"].split("\n")[:3] == ["Frobnicate-opset1", "mystery", "f16[2,?] (declared)"]
    assert by_id["2"]["fillcolor"] == drawing.category_color("unknown")
    assert by_id["0"]["label"].split("\n")[1] == 'in "quoted" \\ back'


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's dot is not installed")
@pytest.mark.parametrize("which", ["tiny", "broken"])
def test_dot_renders_to_svg_with_graphviz(which, request):
    xml = request.getfixturevalue(which)
    program = drawing.load_for_drawing(xml)
    svg = etree.fromstring(drawing.to_svg(program, "dot").encode())
    assert svg.tag == SVG + "svg"
    titles = [g.findtext(SVG + "title") for g in svg.iter(SVG + "g") if g.get("class") == "node"]
    assert sorted(titles) == sorted("L" + layer.id for layer in program.doc.layers)
    edges = [g for g in svg.iter(SVG + "g") if g.get("class") == "edge"]
    assert len(edges) == program.graph.number_of_edges()


# ---------------------------------------------------------------- built-in SVG and HTML

def _builtin_svg(xml):
    program = drawing.load_for_drawing(xml)
    return program, etree.fromstring(drawing.to_svg(program, "builtin").encode())


def test_builtin_svg_draws_every_layer_and_edge(tiny):
    program, svg = _builtin_svg(tiny)
    groups = [g for g in svg.iter(SVG + "g") if g.get("class") == "node"]
    assert sorted(g.get("id") for g in groups) == sorted("L" + lay.id for lay in program.doc.layers)
    texts = {g.get("id"): [t.text for t in g.iter(SVG + "text")] for g in groups}
    add_id = next(lay.id for lay in program.doc.layers if lay.name == "add")
    assert texts["L" + add_id] == ["Add-opset1", "add", "f32[1,?,4]"]
    edges = [g for g in svg.iter(SVG + "g") if g.get("class") == "edge"]
    assert sorted(g.findtext(SVG + "text") for g in edges) == sorted(
        ["f32[1,?,4]"] * 3 + ["f32[1,1,4]", "f16[1,?,4]"])
    # Layers never overlap, and every edge points downwards.
    rects = [g.find(SVG + "rect") for g in groups]
    boxes = [tuple(float(r.get(k)) for k in ("x", "y", "width", "height")) for r in rects]
    for i, (x1, y1, w1, h1) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1:]:
            assert x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1
    for g in edges:
        nums = [float(v) for v in re.findall(r"-?\d+\.?\d*", g.find(SVG + "path").get("d"))]
        assert nums[-1] > nums[1]


def test_builtin_svg_outlines_invalid_layers(broken):
    program, svg = _builtin_svg(broken)
    strokes = {g.get("id"): g.find(SVG + "rect").get("stroke")
               for g in svg.iter(SVG + "g") if g.get("class") == "node"}
    assert {k for k, v in strokes.items() if v == drawing.ERROR_COLOR} == {"L1", "L2"}


def test_html_is_self_contained(broken):
    page = drawing.to_html(drawing.load_for_drawing(broken), "builtin")
    doc = lxml_html.fromstring(page)
    assert doc.xpath("//script | //link | //img | //iframe | //object | //embed") == []
    urls = re.findall(r"""(?:src|href|url)\s*[=(]\s*["']?\s*(\w+:)""", page, re.I)
    assert urls == []
    assert len(doc.xpath("//*[local-name()='svg']")) == 1
    assert len(doc.xpath("//*[local-name()='g'][@class='node']")) == 7
    items = doc.xpath("//ul[@class='diagnostics']/li[@class='error']/text()")
    assert any("f99" in t for t in items) and any("Frobnicate" in t for t in items)
    legend = " ".join(doc.xpath("//div[@class='legend']//text()"))
    assert "infrastructure" in legend and "unknown" in legend and "fails validation" in legend


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's dot is not installed")
def test_html_embeds_graphviz_svg_without_prolog(tiny):
    page = drawing.to_html(drawing.load_for_drawing(tiny), "dot")
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    doc = lxml_html.fromstring(page)
    assert len(doc.xpath("//*[local-name()='g'][@class='node']")) == 6


# ---------------------------------------------------------------- CLI

def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("suffix", [".dot", ".svg", ".html"])
def test_cli_graph_writes_each_format(tiny, tmp_path, suffix):
    out = tmp_path / f"model{suffix}"
    r = invoke("graph", tiny, "-o", out)
    assert r.exit_code == 0, r.output
    assert r.stdout == f"wrote {out} (6 layers)\n"
    text = out.read_text()
    if suffix == ".dot":
        assert len(parse_dot(text)[0]) == 6
    elif suffix == ".svg":
        assert etree.fromstring(text.encode()).tag == SVG + "svg"
    else:
        assert lxml_html.fromstring(text).xpath("//*[local-name()='svg']")


def test_cli_graph_prints_dot_without_output(tiny):
    r = invoke("graph", tiny)
    assert r.exit_code == 0
    assert len(parse_dot(r.stdout)[1]) == 5


def test_cli_graph_invalid_model_notes_errors(broken, tmp_path):
    r = invoke("graph", broken, "-o", tmp_path / "b.svg", "--layout", "builtin")
    assert r.exit_code == 0, r.output
    assert "2 errors, 2 layers highlighted" in r.stdout


def test_cli_graph_unknown_suffix(tiny, tmp_path):
    r = invoke("graph", tiny, "-o", tmp_path / "g.png")
    assert r.exit_code == 2 and "cannot tell the format" in r.output
    r = invoke("graph", tiny, "-o", tmp_path / "g.png", "--format", "svg", "--layout", "builtin")
    assert r.exit_code == 0 and (tmp_path / "g.png").read_text().startswith("<svg")


def test_cli_graph_dot_layout_without_graphviz(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(drawing, "dot_program", lambda: None)
    r = invoke("graph", tiny, "-o", tmp_path / "g.svg", "--layout", "dot")
    assert r.exit_code == 1
    assert "Graphviz's 'dot' is not installed (Debian: apt-get install graphviz)" in r.stderr
    r = invoke("graph", tiny, "-o", tmp_path / "g.svg")       # auto falls back to the built-in layout
    assert r.exit_code == 0 and 'class="node"' in (tmp_path / "g.svg").read_text()


def test_cli_graph_unreadable_file(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<net><layers>")
    r = invoke("graph", bad)
    assert r.exit_code == 1 and f"{bad}:" in r.stderr and "error" in r.stderr


# ---------------------------------------------------------------- every model in models/

MODELS = sorted(glob.glob(os.path.join(ROOT, "models", "*", "model.xml")))


@pytest.mark.skipif(not MODELS, reason="models/ has no model.xml yet")
@pytest.mark.parametrize("xml", MODELS, ids=[os.path.basename(os.path.dirname(p)) for p in MODELS])
def test_each_model_draws(xml, tmp_path):
    program = drawing.load_for_drawing(xml)
    nodes, edges = parse_dot(drawing.to_dot(program))
    # Bodies (Loop/If) are clusters: their layers and edges, plus the port-map arrows into
    # them and their back edges.
    from irrun.run.program import all_nodes
    layers = list(all_nodes(program))
    graphs = [program] + [b for n in layers for b in n.bodies]
    extra = sum(len([e for e in sub.port_map if e.kind == "input"]) + len(sub.back_edges)
                for n in layers for sub in n.layer.bodies)
    assert len(nodes) == len(layers)
    assert len(edges) == sum(g.graph.number_of_edges() for g in graphs) + extra
    r = invoke("graph", xml, "-o", tmp_path / "m.html", "--layout", "builtin")
    assert r.exit_code == 0, r.output
    if HAVE_DOT:
        svg = etree.fromstring(drawing.to_svg(program, "dot").encode())
        assert len([g for g in svg.iter(SVG + "g") if g.get("class") == "node"]) == len(nodes)


def test_cyclic_model_is_still_drawn(tmp_path):
    cyclic = BROKEN.replace(
        '<edge from-layer="0" from-port="0" to-layer="3" to-port="0"/>',
        '<edge from-layer="1" from-port="1" to-layer="3" to-port="0"/>').replace(
        '<edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>',
        '<edge from-layer="3" from-port="1" to-layer="1" to-port="0"/>')
    path = tmp_path / "cyclic.xml"
    path.write_text(cyclic)
    program = drawing.load_for_drawing(path)
    assert any(d.code == "cycle" for d in program.diagnostics)
    nodes, edges = parse_dot(drawing.to_dot(program))
    assert len(nodes) == 7 and ("L1", "L3") in {(u, v) for u, v, _ in edges}
    svg = etree.fromstring(drawing.to_svg(program, "builtin").encode())
    assert len([g for g in svg.iter(SVG + "g") if g.get("class") == "node"]) == 7
    assert len([g for g in svg.iter(SVG + "g") if g.get("class") == "edge"]) == 6
    if HAVE_DOT:
        assert etree.fromstring(drawing.to_svg(program, "dot").encode()).tag == SVG + "svg"


def test_graph_help():
    r = invoke("graph", "--help")
    assert r.exit_code == 0
    assert "Usage: cli graph [OPTIONS] MODEL" in r.stdout or "graph [OPTIONS] MODEL" in r.stdout
    assert "--layout [auto|dot|builtin]" in r.stdout and "--format [dot|svg|html]" in r.stdout


def _bezier(p0, c1, c2, p1, n=24):
    for i in range(n + 1):
        s = i / n
        yield tuple((1 - s) ** 3 * a + 3 * (1 - s) ** 2 * s * b + 3 * (1 - s) * s ** 2 * c
                    + s ** 3 * d for a, b, c, d in zip(p0, c1, c2, p1))


def test_builtin_svg_routes_a_skip_connection_around_the_boxes_it_passes():
    """ResNet's residual edge used to be a straight line through the layers between: every
    drawn edge now stays out of every box but its own two."""
    from pathlib import Path

    from irrun.tools import drawing

    xml = Path(__file__).resolve().parent.parent / "models" / "resnetish" / "model.xml"
    program = drawing.load_for_drawing(str(xml))
    boxes, arrows, geo = drawing.layout(program)
    paths = drawing.edge_paths(arrows, geo)
    routed = 0
    for a, (p0, c1, c2, p1, rest) in zip(arrows, paths):
        points = list(_bezier(p0, c1, c2, p1))
        if rest is not None:
            routed += 1
            q0, d1, d2, q1 = rest
            points += [(p1[0], p1[1] + (q0[1] - p1[1]) * k / 20) for k in range(21)]
            points += list(_bezier(q0, d1, d2, q1))
        for key, (x, y, w, h) in geo.items():
            if key in (a.src, a.dst):
                continue
            inside = [pt for pt in points if x + 1 < pt[0] < x + w - 1 and y + 1 < pt[1] < y + h - 1]
            assert not inside, f"edge {a.src}->{a.dst} crosses box {key}"
    assert routed >= 1
    svg = drawing.layout_svg(program)
    assert svg.count('class="edge"') == len(arrows)
