"""irrun's measurements as Model Explorer node data (model_explorer.node_data_builder).

One overlay per quantity, each a ModelNodeData keyed by graph id, then by layer id (the
GraphNode ids of irrun.explore.graph):

- time (ms) and time share (%): each layer's time in a warm run (the model is run once
  before, so first-run costs such as building compiled loops are not counted);
- output min, output max: over the layer's outputs (finite values), NaN count, Inf count;
- with OpenVINO (`compare=True`): max abs diff against OpenVINO per layer, and agreement
  (0 agrees, 1 drifts: differs only as its inputs do or as OpenVINO's own arithmetic
  does, 2 differs, 3 the first divergent layer).

Loaded into `irrun explore` or written as JSON files that Model Explorer reads later
(`model-explorer model.xml --extensions=irrun.explore --node_data_paths=DIR/time_ms.json`).
"""
from __future__ import annotations

import os
import re
import time

import numpy as np
from model_explorer import node_data_builder as ndb

# Agreement values and their colours (also the legend).
AGREE, DRIFT, DIFFER, FIRST = 0, 1, 2, 3
AGREEMENT_COLORS = {AGREE: "#b7e4b7", DRIFT: "#ffd98a", DIFFER: "#ff9b9b", FIRST: "#d50000"}
_HEAT = [ndb.GradientItem(stop=0, bgColor="#ffffff"), ndb.GradientItem(stop=0.5,
         bgColor="#ffb74d"), ndb.GradientItem(stop=1, bgColor="#e53935")]
_FLAG = [ndb.ThresholdItem(value=0, bgColor="#ffffff"),
         ndb.ThresholdItem(value=float(2 ** 62), bgColor="#ff5252")]


class Recorder:
    """A run listener: each layer's seconds and output statistics (bodies are their
    Loop's)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.stats: dict[str, dict] = {}

    def __call__(self, node, outputs, seconds):
        program = node.program
        if program is not None and program.owner is not None:
            return
        lid = node.layer.id
        self.seconds[lid] = self.seconds.get(lid, 0.0) + seconds
        lo, hi, nan, inf = np.inf, -np.inf, 0, 0
        numeric = False
        for a in outputs:
            a = np.asarray(a)
            if a.dtype.kind == "V" or a.dtype.kind in "fc":
                f = a.astype(np.float64) if a.dtype.kind == "V" else a
                finite = np.isfinite(f)
                n_nan = int(np.isnan(f).sum())
                nan += n_nan
                inf += int(f.size - finite.sum()) - n_nan
                if finite.any():
                    lo, hi = min(lo, float(np.real(f[finite]).min())), max(
                        hi, float(np.real(f[finite]).max()))
                numeric = True
            elif a.dtype.kind in "biu" and a.size:
                lo, hi = min(lo, float(a.min())), max(hi, float(a.max()))
                numeric = True
        if numeric:
            self.stats[lid] = {"nan": nan, "inf": inf}
            if lo <= hi:
                self.stats[lid].update(min=lo, max=hi)


def run_feed(model, model_path: str, inputs=None, random_inputs: bool = False):
    """The feed for a run and where it came from: an .npz path, random (seeded) inputs, or
    the sample inputs shipped beside the model."""
    from ..run.feed import load_npz, sample_inputs_for
    from ..tools.comparing import generated_inputs

    if inputs is not None and not random_inputs:
        return load_npz(os.fspath(inputs), model.inputs), os.fspath(inputs)
    if not random_inputs:
        found = sample_inputs_for(os.fspath(model_path))
        if found is not None:
            return load_npz(found, model.inputs), found
    if not model.inputs:
        return {}, "none (the model has no inputs)"
    return generated_inputs(model)


def measure(model, feed) -> Recorder:
    """A cold run (not recorded), then a warm run with the recorder."""
    model.infer(feed)
    recorder = Recorder()
    model.infer(feed, listener=recorder)
    return recorder


def _graph_data(graph_id: str, name: str, results: dict, **style) -> ndb.ModelNodeData:
    data = ndb.GraphNodeData(name=name, results=results, **style)
    return ndb.ModelNodeData(graphsData={graph_id: data})


def run_node_data(graph_id: str, recorder: Recorder, node_ids=None) -> dict:
    """{overlay name: ModelNodeData} of one recorded run; only layers in `node_ids` (the
    graph's nodes) when given."""
    keep = (lambda lid: True) if node_ids is None else (lambda lid: lid in node_ids)
    seconds = {lid: s for lid, s in recorder.seconds.items() if keep(lid)}
    total = sum(seconds.values()) or 1.0
    R = ndb.NodeDataResult
    out = {
        "time (ms)": _graph_data(graph_id, "time (ms)",
                                 {k: R(value=round(s * 1e3, 4)) for k, s in seconds.items()},
                                 gradient=_HEAT),
        "time share (%)": _graph_data(graph_id, "time share (%)",
                                      {k: R(value=round(100 * s / total, 3))
                                       for k, s in seconds.items()}, gradient=_HEAT),
    }
    stats = {lid: s for lid, s in recorder.stats.items() if keep(lid)}
    for key, name in (("min", "output min"), ("max", "output max")):
        out[name] = _graph_data(graph_id, name, {k: R(value=s[key]) for k, s in stats.items()
                                                 if key in s})
    for key, name in (("nan", "NaN count"), ("inf", "Inf count")):
        out[name] = _graph_data(graph_id, name, {k: R(value=s[key]) for k, s in stats.items()},
                                thresholds=_FLAG)
    return out


def compare_node_data(graph_id: str, result, node_ids=None) -> dict:
    """{overlay name: ModelNodeData} of an irrun.compare result: max abs diff and agreement
    per layer (its worst output), the first divergent layer marked."""
    keep = (lambda lid: True) if node_ids is None else (lambda lid: lid in node_ids)
    rank = {"agree": AGREE, "drift": DRIFT, "explained": DRIFT, "differ": DIFFER}
    status: dict[str, int] = {}
    diff: dict[str, float] = {}
    for t in result.tensors:
        lid = t.layer_id
        if not keep(lid) or t.status not in rank:
            continue
        status[lid] = max(status.get(lid, AGREE), rank[t.status])
        if t.max_abs is not None and np.isfinite(t.max_abs):
            diff[lid] = max(diff.get(lid, 0.0), float(t.max_abs))
    first = result.first_divergent
    if first is not None and keep(first.layer_id):
        status[first.layer_id] = FIRST
    R = ndb.NodeDataResult
    return {
        "max abs diff vs OpenVINO": _graph_data(
            graph_id, "max abs diff vs OpenVINO", {k: R(value=v) for k, v in diff.items()},
            gradient=_HEAT),
        "agreement with OpenVINO": _graph_data(
            graph_id, "agreement with OpenVINO (0 agrees, 1 drifts, 2 differs, "
                      "3 first divergent)",
            {k: R(value=v, bgColor=AGREEMENT_COLORS[v],
                  textColor="#ffffff" if v == FIRST else None) for k, v in status.items()}),
    }


def collect(model_path, graph_id: str, *, inputs=None, random_inputs: bool = False,
            compare: bool = False, node_ids=None, weights=None, log=None) -> dict:
    """All node data for a model: {overlay name: ModelNodeData}."""
    from ..run.model import read_model

    say = log or (lambda text: None)
    model = read_model(os.fspath(model_path), weights)
    feed, source = run_feed(model, os.fspath(model_path), inputs, random_inputs)
    say(f"inputs: {source}")
    t0 = time.perf_counter()
    recorder = measure(model, feed)
    say(f"ran the model twice (the second run measured) in {time.perf_counter() - t0:.2f} s")
    out = run_node_data(graph_id, recorder, node_ids)
    if compare:
        from ..tools.comparing import compare as compare_with_openvino

        result = compare_with_openvino(os.fspath(model_path), feed, weights=weights)
        first = result.first_divergent
        say("compared with OpenVINO: " + (f"first divergent layer '{first.layer}' "
                                          f"({first.op}, line {first.line})" if first
                                          else "every compared layer agrees"))
        out.update(compare_node_data(graph_id, result, node_ids))
    return out


def file_name(name: str) -> str:
    """`time (ms)` -> `time_ms.json`."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") + ".json"


def write(node_data: dict, directory) -> list[str]:
    """Each overlay as a Model Explorer node data file in `directory`; the paths."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name, data in node_data.items():
        path = os.path.join(os.fspath(directory), file_name(name))
        data.save_to_file(path)
        paths.append(path)
    return paths
