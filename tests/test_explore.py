"""irrun explore: shipped models through the Model Explorer adapter, checked against the IR
(every layer once, every edge, namespaces, bodies, node data on existing nodes); the
adapter loaded by Model Explorer's own extension manager; `irrun explore --no-open` in
headless Chromium (the graph drawn, the node data overlay opened); a 10,000-layer model
opened in under 10 s.

Needs the explore extra (ai-edge-model-explorer, in the test extra); the browser tests also
need Debian's chromium and chromium-driver, as tests/test_viewer.py."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from irrun.ui.cli import cli

pytest.importorskip("model_explorer", reason="needs the explore extra: pip install -e "
                                              "'.[explore]'")

from irrun.explore import graph as xg  # noqa: E402
from irrun.explore import nodedata  # noqa: E402
from irrun.errors import Collector  # noqa: E402
from irrun.ir import reader  # noqa: E402


def read_document(path):
    return reader.read_document(path, Collector(path))

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
SHIPPED = ["tiny_bert", "tiny_bert_onnx", "ssdlite_detector", "torch_scripted_loop",
           "keras_gru_classifier", "tiny_llama"]


def docs_of(doc, out=None):
    """Every network of an IRDocument, depth first, as the graphs are listed."""
    out = [] if out is None else out
    out.append(doc)
    for layer in doc.layers:
        for body in layer.bodies:
            docs_of(body.doc, out)
    return out


def check_against_ir(graphs, xml):
    """Every layer of every network present once, every edge present with its ports, bodies
    as the subgraphs their layers name."""
    by_id = {g["id"]: g for g in graphs}
    assert len(by_id) == len(graphs), "graph ids repeat"
    docs = docs_of(read_document(str(xml)))
    assert len(graphs) == len(docs)
    for g, doc in zip(graphs, docs):
        ids = [n["id"] for n in g["nodes"]]
        assert len(ids) == len(set(ids)), f"{g['id']}: a layer appears twice"
        assert set(ids) == {layer.id for layer in doc.layers}, g["id"]
        nodes = {n["id"]: n for n in g["nodes"]}
        edges = {(e["sourceNodeId"], e["sourceNodeOutputId"], n["id"], e["targetNodeInputId"])
                 for n in g["nodes"] for e in n["incomingEdges"]}
        want = {(e.from_layer, str(e.from_port), e.to_layer, str(e.to_port)) for e in doc.edges}
        assert edges == want, (g["id"], sorted(want - edges)[:3], sorted(edges - want)[:3])
        for layer in doc.layers:
            node = nodes[layer.id]
            assert node["label"] == layer.type
            attrs = {a["key"]: a["value"] for a in node["attrs"]}
            assert attrs["layer name"] == layer.name and attrs["xml line"] == str(layer.line)
            for k, v in layer.data.items():
                assert attrs[k] == v
            # Every output: its port id, the inferred type and shape, its tensor names.
            outs = {m["id"]: {a["key"]: a["value"] for a in m["attrs"]}
                    for m in node["outputsMetadata"]}
            assert set(outs) == {str(p.id) for p in layer.outputs}
            for p in layer.outputs:
                if p.names:
                    assert outs[str(p.id)]["tensor names"] == ", ".join(p.names)
            # A body is the subgraph its layer's node names.
            if layer.bodies:
                assert len(node["subgraphIds"]) == len(layer.bodies)
                for bid, body in zip(node["subgraphIds"], layer.bodies):
                    assert {n["id"] for n in by_id[bid]["nodes"]} == {
                        b.id for b in body.doc.layers}
    # Model Explorer serialises it as JSON.
    json.dumps({"graphs": graphs})


@pytest.fixture(scope="module")
def converted():
    cache = {}

    def get(name, fold=False):
        if (name, fold) not in cache:
            xml = MODELS / name / "model.xml"
            program = xg.load(xml)
            cache[name, fold] = (program, xg.to_json(program, fold))
        return cache[name, fold]
    return get


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_model_graph_matches_the_ir(name, converted):
    program, graphs = converted(name)
    check_against_ir(graphs, MODELS / name / "model.xml")
    main = graphs[0]
    # Shapes are the inferred ones: an element type and a bracketed shape on every output.
    shapes = [a["value"] for n in main["nodes"] for m in n["outputsMetadata"]
              for a in m["attrs"] if a["key"] == "shape"]
    assert shapes and all(re.fullmatch(r"[a-z0-9]+\[.*\]", s) for s in shapes), shapes[:5]


def test_transformer_namespaces_nest_by_module(converted):
    program, graphs = converted("tiny_bert")
    nodes = {n["id"]: n for n in graphs[0]["nodes"]}
    names = {layer.id: layer.name for layer in program.doc.layers}
    # __module.bert.encoder.layer.0.attention.self/aten::linear/MatMul ->
    # bert/encoder/layer/0/attention/self
    attention = [lid for lid, name in names.items()
                 if name.startswith("__module.bert.encoder.layer.0.attention.self/")]
    assert attention
    for lid in attention:
        assert nodes[lid]["namespace"] == "bert/encoder/layer/0/attention/self", names[lid]
    # Nested: layer 0 and layer 1 are siblings under bert/encoder/layer.
    spaces = {n["namespace"] for n in nodes.values()}
    assert any(s.startswith("bert/encoder/layer/1/") for s in spaces)
    # The top level is a handful of blocks: the Parameters, Results and a few namespaces.
    top = {n["namespace"].split("/")[0] for n in nodes.values()}
    assert len(top) <= 6, top
    # A Const named by OpenVINO (Constant_123) sits with its consumer.
    for lid, name in names.items():
        if re.fullmatch(r"Constant_\d+", name):
            consumers = [n for n in nodes.values()
                         if any(e["sourceNodeId"] == lid for e in n["incomingEdges"])]
            if len(consumers) == 1 and consumers[0]["label"] not in ("Result",):
                assert nodes[lid]["namespace"] == consumers[0]["namespace"]


@pytest.mark.parametrize("name, expect", [
    ("__module.encoder.layer.0.attention.self/aten::linear/MatMul",
     "encoder/layer/0/attention/self"),
    ("self.encoder.layer.0.attention.self.query.weight", "encoder/layer/0/attention/self/query"),
    ("model/dense_1/MatMul", "model/dense_1"),
    ("dense_1/BiasAdd", "dense_1"),
    ("/layer1/0/conv1/Conv", "layer1/0/conv1"),
    ("/Conv", ""),
    ("aten::eq/Equal", ""),
    ("bert.embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings"),
    ("Constant_12", None),
    ("onnx::MatMul_12", None),
    ("", None),
])
def test_namespace_of_converter_names(name, expect):
    assert xg.namespace_of(name) == expect


def test_onnx_and_tensorflow_names_give_namespaces(converted):
    _, graphs = converted("tiny_bert_onnx")
    assert any(n["namespace"].count("/") >= 2 for n in graphs[0]["nodes"])
    _, graphs = converted("keras_gru_classifier")
    spaces = {n["namespace"] for g in graphs for n in g["nodes"]}
    assert any(s.startswith("functional_1/") for s in spaces), spaces


def test_const_nodes_show_values_and_bytes(converted):
    program, graphs = converted("tiny_bert")
    nodes = {n["id"]: n for n in graphs[0]["nodes"]}
    consts = [layer for layer in program.doc.layers if layer.type == "Const"]
    assert consts
    for layer in consts:
        attrs = {a["key"]: a["value"] for a in nodes[layer.id]["attrs"]}
        assert attrs["weight bytes"] == f"{int(layer.data['size']):,}"
        value = np.asarray(program.nodes[layer.id].const_value).reshape(-1)
        if value.dtype.kind in "f" and value.size:
            assert attrs["__value"].startswith(f"[{value[0]:.6g}")


def test_bodies_open_as_subgraphs(converted):
    _, graphs = converted("torch_scripted_loop")
    loops = [n for n in graphs[0]["nodes"] if n["label"] == "Loop"]
    assert loops and loops[0]["subgraphIds"]
    body = next(g for g in graphs if g["id"] == loops[0]["subgraphIds"][0])
    # The Loop's body holds an If whose branches are subgraphs of the body.
    ifs = [n for n in body["nodes"] if n["label"] == "If"]
    assert ifs and len(ifs[0]["subgraphIds"]) == 2


def test_problems_show_on_their_layers(tmp_path, converted):
    # A declared output shape that inference does not give: a warning on that layer, and
    # the declared shape beside the inferred one.
    src = (MODELS / "resnetish" / "model.xml").read_text()
    doc = read_document(str(MODELS / "resnetish" / "model.xml"))
    victim = next(la for la in doc.layers if la.type == "ReLU" or la.type == "Relu")
    port = victim.outputs[0]
    lines = src.splitlines(keepends=True)
    for i in range(port.line - 1, len(lines)):
        if "<dim>" in lines[i]:
            lines[i] = re.sub(r"<dim>\d+</dim>", "<dim>7</dim>", lines[i], count=1)
            break
    (tmp_path / "model.xml").write_text("".join(lines))
    shutil.copy(MODELS / "resnetish" / "model.bin", tmp_path / "model.bin")
    program = xg.load(tmp_path / "model.xml")
    assert program.diagnostics
    graphs = xg.to_json(program)
    node = next(n for n in graphs[0]["nodes"] if n["id"] == victim.id)
    attrs = {a["key"]: a["value"] for a in node["attrs"]}
    d = next(d for d in program.diagnostics if d.layer_id == victim.id)
    assert attrs[d.severity] == d.message
    assert node["style"]["borderColor"]
    out = {a["key"]: a["value"] for a in node["outputsMetadata"][0]["attrs"]}
    assert "7" in out["declared"] and out["declared"] != out["shape"]


def test_decompression_folded_into_its_weight():
    xml = MODELS / "genai_llama_int4" / "openvino_model.xml"
    program = xg.load(xml)
    plain = xg.to_json(program)
    folded = xg.to_json(program, fold_decompression=True)
    doc = read_document(str(xml))
    assert {n["id"] for n in plain[0]["nodes"]} == {la.id for la in doc.layers}
    groups = [n for n in folded[0]["nodes"] if any(a["key"] == "folded layers"
                                                   for a in n["attrs"])]
    assert len(groups) >= 10
    shown = {n["id"] for n in folded[0]["nodes"]}
    hidden = []
    for n in groups:
        attrs = {a["key"]: a["value"] for a in n["attrs"]}
        assert "Convert" in attrs["decompression"]
        members = re.findall(r"\[(\d+)\]", attrs["folded layers"])
        assert n["id"] in members
        hidden += [m for m in members if m != n["id"]]
    # Every layer once: shown, or folded into exactly one weight.
    assert len(hidden) == len(set(hidden)) and not set(hidden) & shown
    assert shown | set(hidden) == {la.id for la in doc.layers}
    # Edges still meet: every source is a shown node.
    for n in folded[0]["nodes"]:
        for e in n["incomingEdges"]:
            assert e["sourceNodeId"] in shown
    # The consumers of a folded weight (MatMuls) are fed by the group's node.
    matmuls = [n for n in folded[0]["nodes"] if n["label"] == "MatMul"]
    group_ids = {n["id"] for n in groups}
    assert any(e["sourceNodeId"] in group_ids for n in matmuls for e in n["incomingEdges"])


def test_model_explorer_loads_the_adapter_extension():
    """`model-explorer model.xml --extensions=irrun.explore`: Model Explorer's extension
    manager imports irrun.explore.main and runs its adapter; the graphs are those of
    to_json."""
    from model_explorer.extension_manager import ExtensionManager

    manager = ExtensionManager(["irrun.explore"])
    manager.load_extensions()
    ids = {e["id"] for e in manager.get_extensions_metadata()}
    assert {"irrun_openvino_ir", "irrun_openvino_ir_folded"} <= ids
    xml = MODELS / "torch_scripted_loop" / "model.xml"
    resp = manager.run_cmd({"extensionId": "irrun_openvino_ir", "cmdId": "convert",
                            "modelPath": str(xml), "settings": {},
                            "deleteAfterConversion": False})
    graphs = json.loads(json.dumps(resp))["graphs"]
    check_against_ir(graphs, xml)
    mine = xg.to_json(xg.load(xml))
    assert [g["id"] for g in graphs] == [g["id"] for g in mine]
    for a, b in zip(graphs, mine):
        for na, nb in zip(a["nodes"], b["nodes"]):
            for key in ("id", "label", "namespace", "attrs", "incomingEdges",
                        "outputsMetadata", "inputsMetadata"):
                assert na[key] == nb[key]


def node_ids(graphs):
    return {n["id"] for n in graphs[0]["nodes"]}


def test_node_data_is_keyed_to_existing_nodes(converted):
    xml = MODELS / "tiny_bert" / "model.xml"
    program, graphs = converted("tiny_bert")
    ids = node_ids(graphs)
    data = nodedata.collect(xml, graphs[0]["id"], inputs=MODELS / "tiny_bert" / "inputs.npz",
                            node_ids=ids)
    assert {"time (ms)", "time share (%)", "output min", "output max", "NaN count",
            "Inf count"} <= set(data)
    for name, model_data in data.items():
        assert list(model_data.graphsData) == [graphs[0]["id"]]
        results = model_data.graphsData[graphs[0]["id"]].results
        assert results and set(results) <= ids, name
    share = data["time share (%)"].graphsData[graphs[0]["id"]].results
    assert abs(sum(r.value for r in share.values()) - 100) < 1
    # Every op layer that runs has a time (Consts and folded layers do not run).
    ops = {lid for lid, n in program.nodes.items() if n.kind == "op" and n.folded is None}
    timed = set(data["time (ms)"].graphsData[graphs[0]["id"]].results)
    assert ops - timed == set() or len(ops - timed) <= len(ops) // 10
    # The ranges are the values' ranges: the embedding Gather's output in its table's range.
    mins = data["output min"].graphsData[graphs[0]["id"]].results
    maxs = data["output max"].graphsData[graphs[0]["id"]].results
    assert all(mins[k].value <= maxs[k].value for k in mins)


def test_nan_and_inf_counts(tmp_path):
    from irrun.tools.builder import GraphBuilder

    g = GraphBuilder("nan")
    x = g.parameter("x", "f32", [4])
    y = g.op("Log", [x], name="log")
    g.result(g.op("Sqrt", [x], name="sqrt"), name="s")
    g.result(y, name="l")
    xml, _ = g.save(tmp_path / "nan.xml")
    np.savez(tmp_path / "x.npz", x=np.array([-1, 0, 1, 4], np.float32))
    program = xg.load(xml)
    graphs = xg.to_json(program)
    data = nodedata.collect(xml, graphs[0]["id"], inputs=tmp_path / "x.npz",
                            node_ids=node_ids(graphs))
    ids = {la.name: la.id for la in program.doc.layers}
    nan = data["NaN count"].graphsData[graphs[0]["id"]].results
    inf = data["Inf count"].graphsData[graphs[0]["id"]].results
    assert nan[ids["log"]].value == 1 and inf[ids["log"]].value == 1
    assert nan[ids["sqrt"]].value == 1 and inf[ids["sqrt"]].value == 0


class _T:
    def __init__(self, lid, status, max_abs):
        self.layer_id, self.status, self.max_abs = lid, status, max_abs


class _R:
    def __init__(self, tensors, first):
        self.tensors = tensors
        self.first_divergent = type("D", (), {"layer_id": first})() if first else None


def test_compare_node_data_marks_the_first_divergent_layer():
    result = _R([_T("1", "agree", 0.0), _T("2", "differ", 0.5), _T("2", "agree", 0.0),
                 _T("3", "drift", 0.7), _T("4", "differ", 2.0)], "2")
    data = nodedata.compare_node_data("g", result, {"1", "2", "3", "4"})
    status = data["agreement with OpenVINO"].graphsData["g"].results
    assert {k: r.value for k, r in status.items()} == {
        "1": nodedata.AGREE, "2": nodedata.FIRST, "3": nodedata.DRIFT, "4": nodedata.DIFFER}
    assert status["2"].bgColor == nodedata.AGREEMENT_COLORS[nodedata.FIRST]
    diff = data["max abs diff vs OpenVINO"].graphsData["g"].results
    assert diff["4"].value == 2.0 and diff["2"].value == 0.5


@pytest.mark.oracle
def test_compare_node_data_from_openvino(converted):
    pytest.importorskip("openvino")
    xml = MODELS / "resnetish" / "model.xml"
    program, graphs = converted("resnetish")
    ids = node_ids(graphs)
    data = nodedata.collect(xml, graphs[0]["id"], compare=True, node_ids=ids)
    status = data["agreement with OpenVINO"].graphsData[graphs[0]["id"]].results
    assert status and set(status) <= ids
    ops = [lid for lid, n in program.nodes.items() if n.kind == "op" and n.folded is None]
    assert set(ops) <= set(status)
    assert all(r.value == nodedata.AGREE for r in status.values())


def test_node_data_files(tmp_path):
    xml = MODELS / "tiny_bert" / "model.xml"
    r = CliRunner().invoke(cli, ["explore", str(xml), "-i",
                                 str(MODELS / "tiny_bert" / "inputs.npz"),
                                 "--node-data", str(tmp_path / "nd")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    files = sorted((tmp_path / "nd").glob("*.json"))
    assert {f.name for f in files} >= {"time_ms.json", "time_share.json", "output_min.json",
                                       "output_max.json", "nan_count.json", "inf_count.json"}
    ids = node_ids(xg.to_json(xg.load(xml)))
    for f in files:
        data = json.loads(f.read_text())
        (gid, graph_data), = data.items()
        assert set(graph_data["results"]) <= ids and graph_data["results"]
        assert all(isinstance(v["value"], (int, float)) for v in graph_data["results"].values())
    assert "--node_data_paths=" in r.output


def test_explore_without_model_explorer_says_how_to_install(monkeypatch):
    import importlib.util

    from irrun.explore import command

    real = importlib.util.find_spec
    monkeypatch.setattr(command.importlib.util, "find_spec",
                        lambda name, *a: None if name == "model_explorer" else real(name, *a))
    r = CliRunner().invoke(cli, ["explore", str(MODELS / "resnetish" / "model.xml")])
    assert r.exit_code == 1
    assert "pip install 'irrun[explore]'" in r.output


def test_explore_reports_a_missing_model_without_traceback(tmp_path):
    r = CliRunner().invoke(cli, ["explore", str(tmp_path / "missing.xml"), "--no-open"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "missing.xml" in r.output


def test_version_check_is_off():
    """Model Explorer's server would ask PyPI and GitHub for a newer release; irrun's
    server asks nothing."""
    from irrun.explore.serve import quiet_server

    server = quiet_server()
    import requests

    def refuse(*a, **k):
        raise AssertionError(f"network request: {a}")

    original = requests.get
    requests.get = refuse
    try:
        assert server._check_new_version() ["version"] == ""
    finally:
        requests.get = original


def test_explore_package_sits_above_tools():
    """irrun.explore imports irrun.ir/run/tools (never irrun.ui), and nothing in the
    packages below it imports it."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from test_layout import import_graph
    finally:
        sys.path.pop(0)
    graph = import_graph(ROOT)
    for a, b in graph.edges:
        if a.startswith("irrun.explore"):
            assert not b.startswith("irrun.ui"), (a, b)
        if b.startswith("irrun.explore"):
            assert a.startswith(("irrun.explore", "irrun.ui")), (a, b)


# ---------------------------------------------------------------- in a browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
browser_needed = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                    reason="needs chromium and chromedriver")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if os.environ.get("CI") and not (CHROMIUM and DRIVER):
        raise RuntimeError("CI must install chromium and chromium-driver")
    if not (CHROMIUM and DRIVER):
        pytest.skip("needs chromium and chromedriver")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    # Off the (closed) network; WebGL by SwiftShader, as there is no GPU.
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1400,900",
                 "--enable-unsafe-swiftshader", "--use-angle=swiftshader",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Explorer:
    """`irrun explore MODEL --no-open` in a child process; its address once it serves."""

    def __init__(self, *args, timeout=120):
        self.port = free_port()
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "irrun", "explore", *map(str, args), "--no-open",
             "--port", str(self.port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, cwd=str(ROOT), env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.output = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            if line.startswith(f"http://127.0.0.1:{self.port}/"):
                self.url = line.strip()
                self.served = time.perf_counter()
                return
        self.stop()
        raise AssertionError("irrun explore did not start:\n" + "".join(self.output))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.stdout.close()


# What the page says it shows: the graph selector's node count and the graph info panel,
# then whether the canvas holds drawn boxes (from a screenshot: dark pixels of box borders
# and labels on the white canvas).
PAGE_STATE = """
const text = document.body.innerText;
const m = text.match(/op node count\\s+(\\d+)/);
return {nodes: m ? Number(m[1]) : null, text: text.slice(0, 4000)};
"""

DRAWN = """
const [png, done] = [arguments[0], arguments[arguments.length - 1]];
const canvas = [...document.querySelectorAll('canvas')].sort(
  (a, b) => b.clientWidth * b.clientHeight - a.clientWidth * a.clientHeight)[0];
const r = canvas.getBoundingClientRect();
const img = new Image();
img.onload = () => {
  const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
  const ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
  const k = img.width / window.innerWidth;
  const d = ctx.getImageData(r.left * k, r.top * k, r.width * k, r.height * k).data;
  let dark = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] < 300) dark++;
  done({dark, pixels: d.length / 4});
};
img.src = 'data:image/png;base64,' + png;
"""


def wait_for_graph(driver, expected_nodes, timeout=60):
    deadline = time.time() + timeout
    state = None
    while time.time() < deadline:
        state = driver.execute_script(PAGE_STATE)
        if state["nodes"] == expected_nodes:
            return state
        time.sleep(0.1)
    raise AssertionError(f"the page shows {state and state['nodes']} nodes, expected "
                         f"{expected_nodes}:\n{state and state['text'][:1500]}")


def wait_drawn(driver, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = driver.execute_async_script(DRAWN, driver.get_screenshot_as_base64())
        if found["dark"] > 500:
            return found
        time.sleep(0.2)
    raise AssertionError(f"nothing drawn on the canvas: {found}")


def shown_count(graphs) -> int:
    """Nodes Model Explorer shows: all but those it hides by label (Const, by default)."""
    return sum(n["label"] != "Const" for n in graphs[0]["nodes"])


@pytest.mark.slow
def test_explore_in_chromium_draws_the_graph_and_opens_node_data(browser, converted):
    xml = MODELS / "tiny_bert" / "model.xml"
    _, graphs = converted("tiny_bert")
    explorer = Explorer(xml, "-i", MODELS / "tiny_bert" / "inputs.npz")
    try:
        browser.get(explorer.url)
        wait_for_graph(browser, shown_count(graphs))
        # The node data panel fills in after the graph (its files load one by one).
        deadline, text = time.time() + 30, ""
        while time.time() < deadline:
            text = browser.execute_script("return document.body.innerText")
            if "NODE DATA PROVIDERS" in text and "time (ms)" in text:
                break
            time.sleep(0.2)
        assert "NODE DATA PROVIDERS" in text and "time (ms)" in text, text[:500]
        wait_drawn(browser)
        # Open the time overlay: its eye button in the node data panel.
        browser.execute_script("""
          const rows = [...document.querySelectorAll('*')].filter(e =>
            e.children.length === 0 && e.textContent.trim() === 'time (ms)');
          let row = rows[0];
          while (row && ![...row.querySelectorAll('*')].some(
              e => /^visibility(_off)?$/.test(e.textContent.trim()))) row = row.parentElement;
          const eye = [...row.querySelectorAll('*')].find(
              e => /^visibility(_off)?$/.test(e.textContent.trim()) && e.children.length === 0);
          eye.click();""")
        time.sleep(1)
        shown = browser.execute_script("""
          const rows = [...document.querySelectorAll('*')].filter(e =>
            e.children.length === 0 && e.textContent.trim() === 'time (ms)');
          let row = rows[0];
          while (row && ![...row.querySelectorAll('*')].some(
              e => /^visibility(_off)?$/.test(e.textContent.trim()))) row = row.parentElement;
          return [...row.querySelectorAll('*')].find(e => e.children.length === 0 &&
              /^visibility(_off)?$/.test(e.textContent.trim())).textContent.trim();""")
        assert shown == "visibility"
        text = browser.execute_script("return document.body.innerText")
        # The overlay's statistics: the time of the layers, summed.
        assert re.search(r"Sum\s+[\d.]+", text)
        if os.environ.get("IRRUN_DOCS_SCREENSHOTS"):
            browser.save_screenshot(str(ROOT / "docs" / "images" / "explore.png"))
    finally:
        explorer.stop()


def build_llm(path, blocks=200, hidden=8):
    """A decoder-only transformer of `blocks` blocks named as PyTorch's converter names
    them, about 50 IR layers a block (f16 weights, each with its decompression Convert)."""
    from irrun.tools.builder import GraphBuilder

    rng = np.random.default_rng(0)
    g = GraphBuilder("big_llm")
    x = g.parameter("hidden_states", "f32", [1, None, hidden])

    def weight(name, shape):
        w = g.constant((rng.standard_normal(shape) * 0.1).astype(np.float16),
                       name=f"self.{name}")
        return g.op("Convert", [w], destination_type="f32")

    def norm(prefix, h):
        m = f"__module.{prefix}"
        sq = g.op("Multiply", [h, h], name=f"{m}/aten::pow/Multiply")
        axes = g.constant(np.array([-1], np.int64), name=f"{m}/Constant_axes")
        mean = g.op("ReduceMean", [sq, axes], name=f"{m}/aten::mean/ReduceMean", keep_dims=True)
        eps = g.constant(np.array(1e-6, np.float32), name=f"{m}/Constant_eps")
        s = g.op("Sqrt", [g.op("Add", [mean, eps], name=f"{m}/aten::add/Add")],
                 name=f"{m}/aten::sqrt/Sqrt")
        d = g.op("Divide", [h, s], name=f"{m}/aten::div/Divide")
        return g.op("Multiply", [d, weight(f"{prefix}.weight", [hidden])],
                    name=f"{m}/aten::mul/Multiply")

    def linear(prefix, h):
        return g.op("MatMul", [h, weight(f"{prefix}.weight", [hidden, hidden])],
                    name=f"__module.{prefix}/aten::linear/MatMul", transpose_b=True)

    for i in range(blocks):
        p = f"model.layers.{i}"
        a = norm(f"{p}.input_layernorm", x)
        q, k, v = (linear(f"{p}.self_attn.{n}_proj", a) for n in "qkv")
        m = f"__module.{p}.self_attn"
        scores = g.op("MatMul", [q, k], name=f"{m}/aten::matmul/MatMul", transpose_b=True)
        scale = g.constant(np.array(hidden ** -0.5, np.float32), name=f"{m}/Constant_scale")
        scores = g.op("Multiply", [scores, scale], name=f"{m}/aten::mul/Multiply")
        probs = g.op("Softmax", [scores], version="opset8", name=f"{m}/aten::softmax/Softmax",
                     axis=-1)
        attn = g.op("MatMul", [probs, v], name=f"{m}/aten::matmul/MatMul_1")
        x = g.op("Add", [x, linear(f"{p}.self_attn.o_proj", attn)],
                 name=f"__module.{p}/aten::add/Add")
        h = norm(f"{p}.post_attention_layernorm", x)
        gate = g.op("Swish", [linear(f"{p}.mlp.gate_proj", h)], version="opset4",
                    name=f"__module.{p}.mlp.act_fn/aten::silu/Swish")
        up = linear(f"{p}.mlp.up_proj", h)
        prod = g.op("Multiply", [gate, up], name=f"__module.{p}.mlp/aten::mul/Multiply")
        x = g.op("Add", [x, linear(f"{p}.mlp.down_proj", prod)],
                 name=f"__module.{p}/aten::add/Add_1")
    g.result(norm("model.norm", x), name="last_hidden_state")
    return g.save(path)[0]


@pytest.fixture(scope="module")
def big_model(tmp_path_factory):
    return Path(build_llm(tmp_path_factory.mktemp("big") / "big.xml"))


def test_big_model_graph(big_model):
    program = xg.load(big_model)
    assert len(program.doc.layers) >= 10_000
    graphs = xg.to_json(program)
    check_against_ir(graphs, big_model)
    # It opens as one block (model), which opens as embed/layers/norm, layers as 200.
    nodes = graphs[0]["nodes"]
    assert {n["namespace"].split("/")[0] for n in nodes} == {"", "model"}
    assert {n["label"] for n in nodes if n["namespace"] == ""} == {"Parameter", "Result"}
    blocks = {n["namespace"].split("/")[2] for n in nodes
              if n["namespace"].startswith("model/layers/")}
    assert len(blocks) == 200


@pytest.mark.slow
def test_big_model_opens_in_model_explorer(browser, big_model):
    """`irrun explore` serves the 10,000-layer model and the page draws it (how long it
    takes is bench/explore.py's to measure, not a test's)."""
    expected = shown_count(xg.to_json(xg.load(big_model)))
    explorer = Explorer(big_model)
    try:
        browser.get(explorer.url)
        wait_for_graph(browser, expected)
        wait_drawn(browser)
    finally:
        explorer.stop()
