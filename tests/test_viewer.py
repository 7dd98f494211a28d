"""The graph viewer in a real browser: headless Chromium opens `irrun graph -o model.html` for
every model in models/, clicks a layer and reads the side panel, and checks from the rendered
DOM that no box overlaps another and no edge crosses a box.

Needs Debian's chromium and chromium-driver (.ci/run installs them when absent) and selenium
(the test extra)."""
from __future__ import annotations

import os
import shutil
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
    browser.get(page.as_uri())
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
    browser.get(page.as_uri())
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
