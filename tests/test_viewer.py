"""The graph viewer in a real browser: headless Chromium opens `irrun graph -o model.html` for
every model in models/, clicks a layer and reads the side panel, and checks from the rendered
DOM that no box overlaps another and no edge crosses a box.

Needs Debian's chromium and chromium-driver (.ci/run installs them when absent) and selenium
(the test extra)."""
from __future__ import annotations

import html
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from irrun.ui.cli import cli

MODELS = sorted((Path(__file__).resolve().parent.parent / "models").glob("*/model.xml"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

if os.environ.get("CI") and not (CHROMIUM and DRIVER):
    raise RuntimeError("CI must install chromium and chromium-driver for the viewer test")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                reason="needs chromium and chromedriver (apt-get install "
                                       "chromium chromium-driver)")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    # The flags that keep Chromium off the (closed) network and quiet in a container.
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1400,900",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


# The page's script has run once it has drawn the breadcrumb. chromedriver can hand back
# control after a navigation before the new document has finished (seen with two browsers
# on two busy CPUs: the old page, or the new one without its script, answered the next query).
READY = """return document.URL === arguments[0] && document.readyState === 'complete' &&
  !!document.getElementById('crumbs') && document.getElementById('crumbs').childElementCount > 0;"""


def load(browser, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    uri = page.as_uri()
    browser.get(uri)
    WebDriverWait(browser, 60).until(lambda d: d.execute_script(READY, uri))


# Runs in the page: every box's rectangle and every edge's sampled points, in the SVG's own
# coordinates, and the pairs that overlap or cross.
GEOMETRY = """
const svg = document.querySelector('.view:not([hidden]) svg');
const boxes = [...svg.querySelectorAll('.node')].map(n => {
  const m = n.transform.baseVal.consolidate().matrix, r = n.querySelector('rect');
  return {id: n.dataset.id, x: m.e, y: m.f, w: r.width.baseVal.value, h: r.height.baseVal.value};
});
const overlaps = [];
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const a = boxes[i], b = boxes[j];
  if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h)
    overlaps.push([a.id, b.id]);
}
// Edges are polylines ("M x,y L x,y ..."): test each segment against each other box
// (Liang-Barsky clipping against the box shrunk by a pixel).
function crosses(x0, y0, x1, y1, b) {
  let t0 = 0, t1 = 1;
  const dx = x1 - x0, dy = y1 - y0;
  const p = [-dx, dx, -dy, dy];
  const q = [x0 - (b.x + 1), (b.x + b.w - 1) - x0, y0 - (b.y + 1), (b.y + b.h - 1) - y0];
  for (let i = 0; i < 4; i++) {
    if (p[i] === 0) { if (q[i] < 0) return false; continue; }
    const t = q[i] / p[i];
    if (p[i] < 0) { if (t > t1) return false; if (t > t0) t0 = t; }
    else { if (t < t0) return false; if (t < t1) t1 = t; }
  }
  return t1 - t0 > 1e-9;
}
const crossings = [];
for (const p of svg.querySelectorAll('.edge')) {
  const pts = p.getAttribute('d').trim().split(/(?=[ML])/).map(
    s => s.slice(1).split(',').map(Number));
  for (let k = 0; k + 1 < pts.length; k++) {
    for (const b of boxes) {
      if (b.id === p.dataset.from || b.id === p.dataset.to) continue;
      if (crosses(pts[k][0], pts[k][1], pts[k + 1][0], pts[k + 1][1], b)) {
        crossings.push([p.dataset.from, p.dataset.to, b.id]);
      }
    }
  }
}
return {boxes: boxes.length, edges: svg.querySelectorAll('.edge').length, overlaps, crossings};
"""


@pytest.mark.parametrize("xml", MODELS, ids=[p.parent.name for p in MODELS])
def test_viewer_page_in_chromium(xml, tmp_path, browser):
    page = tmp_path / "model.html"
    r = CliRunner().invoke(cli, ["graph", str(xml), "-o", str(page), "-i",
                                 str(xml.with_name("inputs.npz"))])
    assert r.exit_code == 0, r.output
    load(browser, page)
    geometry = browser.execute_script(GEOMETRY)
    assert geometry["boxes"] > 0
    assert geometry["overlaps"] == [], geometry["overlaps"][:5]
    assert geometry["crossings"] == [], geometry["crossings"][:5]
    # The heading is the net's name; Consts are folded (no Const box).
    assert browser.find_element("css selector", "header h1").text
    ops = browser.execute_script(
        "return [...document.querySelectorAll('.view:not([hidden]) .node')].map(n => n.dataset.op)")
    assert not any(op.startswith("Const-") for op in ops)
    # Click the layer with the most inputs; the panel shows its details.
    target = browser.execute_script("""
      const nodes = [...document.querySelectorAll('.view:not([hidden]) .node')];
      const data = JSON.parse(document.getElementById('data').textContent).main.details;
      nodes.sort((a, b) => data[b.dataset.id].inputs.length - data[a.dataset.id].inputs.length);
      return nodes[0].dataset.id;""")
    node = browser.find_element("css selector", f'.view:not([hidden]) .node[data-id="{target}"]')
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))",
                           node)
    panel = browser.find_element("id", "panel").text
    for heading in ("Attributes", "Inputs", "Outputs", "Run"):
        assert heading in panel, panel
    assert "inferred " in panel and "declared " in panel and "line " in panel


def test_search_highlights_and_bodies_open(tmp_path, browser):
    xml = next(p for p in MODELS if p.parent.name == "keras_gru_classifier")
    page = tmp_path / "gru.html"
    assert CliRunner().invoke(cli, ["graph", str(xml), "-o", str(page)]).exit_code == 0
    load(browser, page)
    box = browser.find_element("id", "search")
    box.send_keys("Loop")
    hits = browser.execute_script("return [...document.querySelectorAll('.node.hit')]"
                                  ".map(n => n.dataset.op)")
    assert hits and all("Loop" in h or "loop" in h.lower() for h in hits) or hits
    loop = browser.find_element("css selector", '.node[data-op^="Loop"]')
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))",
                           loop)
    button = browser.find_element("css selector", "#panel .open-body")
    button.click()
    visible = browser.execute_script(
        "return document.querySelector('.view:not([hidden])').dataset.key")
    assert visible.startswith("main/") and visible.endswith("/body")
    geometry = browser.execute_script(GEOMETRY)
    assert geometry["boxes"] > 0 and geometry["overlaps"] == [] and geometry["crossings"] == []
    crumbs = browser.find_element("id", "crumbs").text
    assert "›" in crumbs
    browser.find_element("css selector", "#crumbs a").click()
    assert browser.execute_script(
        "return document.querySelector('.view:not([hidden])').dataset.key") == "main"


# ---------------------------------------------------------------- hostile names and ids

HOSTILE_ID = '"><img src=x onerror=window.__pwned=1>'


def hostile_loop_model(tmp_path) -> Path:
    """torch_scripted_loop with its Loop's id replaced by markup (reported as an error; the
    page still draws the model and its body)."""
    import re

    src = (MODELS[0].parent.parent / "torch_scripted_loop" / "model.xml").read_text()
    bad = html.escape(HOSTILE_ID, quote=True)
    lid = re.search(r'<layer id="(\d+)"[^>]*type="Loop"', src).group(1)
    s = re.sub(rf'<layer id="{lid}"( [^>]*type="Loop")', rf'<layer id="{bad}"\1', src)
    i = s.rfind("<edges>")
    tail = s[i:].replace(f'from-layer="{lid}"', f'from-layer="{bad}"').replace(
        f'to-layer="{lid}"', f'to-layer="{bad}"')
    (tmp_path / "model.xml").write_text(s[:i] + tail)
    shutil.copy(MODELS[0].parent.parent / "torch_scripted_loop" / "model.bin",
                tmp_path / "model.bin")
    return tmp_path / "model.xml"


def click(browser, element):
    browser.execute_script(
        "arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", element)


def test_hostile_loop_id_runs_no_script_when_its_body_opens(tmp_path, browser):
    xml = hostile_loop_model(tmp_path)
    page = tmp_path / "page.html"
    r = CliRunner().invoke(cli, ["graph", str(xml), "-o", str(page)])
    assert r.exit_code == 0, r.output
    load(browser, page)
    loop = browser.find_element("css selector", '.node[data-op^="Loop"]')
    assert loop.get_attribute("data-id") == HOSTILE_ID
    click(browser, loop)
    browser.find_element("css selector", "#panel .open-body").click()
    time.sleep(0.3)
    assert browser.execute_script("return window.__pwned") is None
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    # The breadcrumb shows the names as text and still leads back.
    crumbs = browser.find_elements("css selector", "#crumbs a")
    assert len(crumbs) == 2
    crumbs[0].click()
    assert browser.execute_script(
        "return document.querySelector('.view:not([hidden])').dataset.key") == "main"


def hostile_name_model(tmp_path, name) -> Path:
    from irrun.tools.builder import GraphBuilder

    g = GraphBuilder("hostile")
    x = g.parameter("x", "f32", [2])
    g.result(g.op("ReLU", [x], name=name), name="y")
    return Path(g.save(tmp_path / "model.xml")[0])


@pytest.mark.parametrize("name", ["<!--<script>", "</script><script>window.__pwned=1</script>",
                                  "<img src=x onerror=window.__pwned=1>"])
def test_hostile_layer_name_keeps_the_page_whole(tmp_path, browser, name):
    from irrun.ui.viewer import to_viewer_html
    from irrun.tools.drawing import load_for_drawing

    xml = hostile_name_model(tmp_path, name)
    text = to_viewer_html(load_for_drawing(xml))
    block = text.split('<script id="data" type="application/json">')[1].split("</script>")[0]
    assert "<!--" not in block and "</" not in block and "<" not in block
    page = tmp_path / "page.html"
    page.write_text(text)
    load(browser, page)
    node = next(n for n in browser.find_elements("css selector", ".node")
                if n.get_attribute("data-name") == name)
    click(browser, node)
    assert browser.find_element("css selector", "#panel h2").text == name
    assert browser.execute_script("return window.__pwned") is None
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0


# ---------------------------------------------------------------- finding one's way

def open_page(browser, tmp_path, name, *extra):
    xml = next(p for p in MODELS if p.parent.name == name)
    page = tmp_path / f"{name}.html"
    r = CliRunner().invoke(cli, ["graph", str(xml), "-o", str(page), *extra])
    assert r.exit_code == 0, r.output
    load(browser, page)
    return page


IN_VIEW = """
const [id] = arguments;
const svg = document.querySelector('.view:not([hidden]) svg'), b = svg.viewBox.baseVal;
const n = [...svg.querySelectorAll('.node')].find(x => x.dataset.id === id);
const m = n.transform.baseVal.consolidate().matrix, r = n.querySelector('rect');
const w = r.width.baseVal.value, h = r.height.baseVal.value;
return m.e >= b.x && m.f >= b.y && m.e + w <= b.x + b.width && m.f + h <= b.y + b.height;
"""
SCALE = """const s = document.querySelector('.view:not([hidden]) svg');
return s.viewBox.baseVal.width / s.clientWidth;"""


def test_page_opens_readable_near_the_inputs(tmp_path, browser):
    """A model too big to fit readably opens at 1:1 at its first input, not at 'fit all'."""
    open_page(browser, tmp_path, "ssdlite_detector")
    assert browser.execute_script(SCALE) <= 1.01
    image = browser.execute_script(
        "return [...document.querySelectorAll('.view:not([hidden]) .node')]"
        ".find(n => n.dataset.op.startsWith('Parameter')).dataset.id")
    assert browser.execute_script(IN_VIEW, image)
    # Its labels are drawn at their font size: 11px text at least 10px tall on screen.
    height = browser.execute_script(
        "return document.querySelector('.view:not([hidden]) .node .t1')"
        ".getBoundingClientRect().height")
    assert height >= 10
    # The fit button still shows it all.
    browser.find_element("id", "fit").click()
    assert browser.execute_script(SCALE) > 1.6


def test_small_model_opens_whole(tmp_path, browser):
    open_page(browser, tmp_path, "bucketize_spec")
    assert browser.execute_script(SCALE) <= 1.6
    ids = browser.execute_script(
        "return [...document.querySelectorAll('.view:not([hidden]) .node')].map(n => n.dataset.id)")
    assert all(browser.execute_script(IN_VIEW, i) for i in ids)


def test_edges_carry_their_tensor_shapes(tmp_path, browser):
    open_page(browser, tmp_path, "tiny_bert")
    found = browser.execute_script("""
      const data = JSON.parse(document.getElementById('data').textContent).main.details;
      const svg = document.querySelector('.view:not([hidden]) svg');
      const labels = [...svg.querySelectorAll('.edge-label')];
      return [...svg.querySelectorAll('.edge')].map(e => {
        const l = labels.find(t => t.dataset.from === e.dataset.from &&
                                   t.dataset.to === e.dataset.to);
        const input = data[e.dataset.to].inputs.find(i => i.from_id === e.dataset.from);
        return [l ? l.textContent : null, input.type];
      });""")
    assert found
    for label, want in found:
        assert label is not None
        assert label == want or (label.endswith("…") and want.startswith(label[:-1]))
    assert any(re.search(r"\[\d", label) for label, _ in found)


def test_search_zooms_to_the_hit_and_enter_steps(tmp_path, browser):
    from selenium.webdriver.common.keys import Keys

    open_page(browser, tmp_path, "ssdlite_detector")
    browser.find_element("id", "fit").click()           # far out: labels unreadable
    box = browser.find_element("id", "search")
    box.send_keys("Gather")
    status = browser.find_element("id", "hits").text
    m = re.fullmatch(r"1 of (\d+)", status)
    assert m and int(m.group(1)) >= 3, status
    current = lambda: browser.execute_script(  # noqa: E731
        "return document.querySelector('.view:not([hidden]) .node.current').dataset.id")
    first = current()
    assert browser.execute_script(IN_VIEW, first)
    assert browser.execute_script(SCALE) <= 1.01        # zoomed in to read it
    assert "Gather" in browser.find_element("css selector", "#panel div").text
    box.send_keys(Keys.ENTER)
    assert browser.find_element("id", "hits").text == f"2 of {m.group(1)}"
    second = current()
    assert second != first and browser.execute_script(IN_VIEW, second)
    box.send_keys(Keys.SHIFT, Keys.ENTER)
    assert current() == first


def test_layer_chosen_in_the_panel_is_scrolled_into_view(tmp_path, browser):
    open_page(browser, tmp_path, "ssdlite_detector")
    # A layer with a consumer far below: pick the Parameter, then its last consumer.
    param = browser.find_element("css selector", '.view:not([hidden]) .node[data-op^="Parameter"]')
    click(browser, param)
    links = browser.find_elements("css selector", "#panel a.goto")
    assert links
    # Move the view away, then follow a link from the panel.
    browser.execute_script("document.querySelector('.view:not([hidden]) svg')"
                           ".setAttribute('viewBox', '-5000 -5000 1000 700')")
    target = links[-1].text
    links[-1].click()
    selected = browser.execute_script(
        "return document.querySelector('.node.selected').dataset.id")
    assert browser.execute_script(IN_VIEW, selected)
    assert browser.find_element("css selector", "#panel h2").text == target


def test_too_large_model_page_says_to_use_explore(tmp_path, monkeypatch):
    from irrun.tools.drawing import load_for_drawing
    from irrun.ui import viewer

    xml = next(p for p in MODELS if p.parent.name == "resnetish")
    program = load_for_drawing(xml)
    monkeypatch.setattr(viewer, "MAX_LAYERS", viewer.drawn_layers(program) - 1)
    page = viewer.to_viewer_html(program)
    assert "<svg" not in page
    assert f"irrun explore {html.escape(str(xml))}" in page
    assert "pip install &#x27;irrun[explore]&#x27;" in page or "irrun[explore]" in page
