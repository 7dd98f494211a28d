"""Model Explorer's server for one model, on localhost, without its version check.

Model Explorer's server asks PyPI and GitHub for a newer release when it starts and when
its page loads (`_check_new_version`); irrun replaces that check with one that asks
nothing, so exploring a model sends nothing off this machine. The page loads no analytics
script (its gtag hook stays unset) and is served from the package's own files.

The graphs are converted before the server starts and handed to it as JSON (the way Model
Explorer's own `visualize_pytorch` hands over a converted model): the page asks nothing of
the adapter, and a 10,000-layer model is not converted twice.
"""
from __future__ import annotations

import json
import os

EXTENSION = "irrun.explore"


def _no_version_check(print_msg: bool = True) -> dict:
    return {"version": "", "runningVersion": "", "releaseUrl": "", "desktopAppUrl": ""}


def quiet_server():
    """Model Explorer's server module with its version check replaced."""
    from model_explorer import server

    server._check_new_version = _no_version_check
    return server


def explorer_config(name: str, graphs: list[dict], node_data: dict | None = None):
    """A ModelExplorerConfig holding converted graphs (irrun.explore.graph.to_json) under
    `name` and the node data ({name: ModelNodeData})."""
    from model_explorer import config

    cfg = config()
    index = len(cfg.graphs_list)
    cfg.graphs_list.append(json.dumps({"graphs": graphs}))
    cfg.model_sources.append({"url": f"graphs://{name.replace('/', '_')}/{index}"})
    for data_name, data in (node_data or {}).items():
        cfg.add_node_data(name=data_name, node_data=data)
    return cfg


def serve(model_path, graphs: list[dict], *, node_data: dict | None = None,
          host: str = "127.0.0.1", port: int = 8080, open_browser: bool = True) -> None:
    """Serve Model Explorer with `graphs` and `node_data` until Ctrl-C. Port 8080 means the
    first free one of 8080-8099, as Model Explorer does. irrun's adapter is loaded too, for
    models opened from the page."""
    server = quiet_server()
    cfg = explorer_config(os.path.basename(os.fspath(model_path)), graphs, node_data)
    server.start(host=host, port=port, config=cfg, no_open_in_browser=not open_browser,
                 extensions=[EXTENSION])
