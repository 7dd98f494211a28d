"""OpenVINO IR in Google's Model Explorer (the `ai-edge-model-explorer` package).

`model-explorer model.xml --extensions=irrun.explore` loads the adapter of `main` (Model
Explorer imports `<extension>.main`); `irrun explore MODEL` starts Model Explorer with it on
localhost, without its version check, with irrun's node data loaded beside the graph.

- graph: a loaded Program as Model Explorer graphs: one node per layer (Consts included),
  every edge with its ports, namespaces from the converters' layer names, Loop /
  TensorIterator / If bodies as subgraphs, validation problems on their layers, and (on
  request) decompression subgraphs folded into their weight.
- nodedata: per-layer time and share of a warm run, output ranges, NaN/Inf counts, and
  agreement with OpenVINO, as Model Explorer node data (in memory or as JSON files).
- command: the `irrun explore` click command (imports Model Explorer only when it runs).

This package sits above irrun.tools (it may import irrun.ir, irrun.run, irrun.tools);
irrun.ui.cli registers its command, and nothing below imports it. Only `graph`, `nodedata`,
`serve` and `main` import model_explorer.
"""
from __future__ import annotations

INSTALL_HINT = ("Model Explorer is not installed: pip install 'irrun[explore]' "
                "(or pip install ai-edge-model-explorer)")
