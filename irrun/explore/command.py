"""`irrun explore MODEL`: the model in Google's Model Explorer, with irrun's node data.

Only click is imported here; Model Explorer and the model machinery are imported when the
command runs, so `irrun --help` stays fast.
"""
from __future__ import annotations

import importlib.util
import os

import click

from . import INSTALL_HINT


class _Fail(click.ClickException):
    def show(self, file=None):
        click.echo(self.message, err=True)


def _error(e) -> _Fail:
    diagnostics = getattr(e, "diagnostics", None)
    if diagnostics:
        return _Fail("\n".join(str(d) for d in diagnostics))
    return _Fail(str(e))


@click.command("explore")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--inputs", "-i", "inputs_path", type=click.Path(dir_okay=False),
              help="Run the model on these inputs (.npz) and load per-layer time, output "
                   "ranges and NaN/Inf counts as node data.")
@click.option("--random-inputs", is_flag=True,
              help="The same on random inputs (seeded, as benchmark_app makes them).")
@click.option("--compare", "with_compare", is_flag=True,
              help="Also compare each layer with OpenVINO: max abs diff and agreement, the "
                   "first divergent layer marked.")
@click.option("--node-data", "node_data_dir", type=click.Path(file_okay=False),
              help="Write the node data as Model Explorer JSON files to DIR and exit (open "
                   "them later with model-explorer --node_data_paths).")
@click.option("--fold-decompression", is_flag=True,
              help="Show each weight's decompression subgraph (Convert, Subtract, Multiply, "
                   "Reshape) as one node.")
@click.option("--weights", "-w", type=click.Path(dir_okay=False),
              help="The .bin file (default: beside MODEL with the same stem).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address the server listens on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535),
              help="Port (8080: the first free one of 8080-8099).")
@click.option("--no-open", is_flag=True, help="Do not open a browser; print the address.")
def explore_cmd(model, inputs_path, random_inputs, with_compare, node_data_dir,
                fold_decompression, weights, host, port, no_open):
    """Open MODEL in Google's Model Explorer (pip install 'irrun[explore]').

    Every layer is a node (its attributes, ports with inferred and declared shapes, XML
    line, validation problems), grouped into collapsible namespaces from the layer names;
    Loop/TensorIterator/If bodies open as subgraphs. With --inputs or --random-inputs, each
    layer's time (of a warm run), output range and NaN/Inf counts are loaded as node data;
    with --compare, its agreement with OpenVINO. The server listens on localhost and sends
    nothing elsewhere (Model Explorer's version check is off).
    """
    if importlib.util.find_spec("model_explorer") is None:
        raise _Fail(f"irrun explore: {INSTALL_HINT}")
    from ..errors import IrrunError

    try:
        from . import graph, nodedata

        program = graph.load(model, weights)
        graphs = graph.to_json(program, fold_decompression)
        main = graphs[0]
        click.echo(f"{model}: {len(program.doc.layers)} layers, "
                   f"{len(graphs) - 1} bodies", err=True)
        data = {}
        if inputs_path or random_inputs or with_compare or node_data_dir:
            ids = {n["id"] for n in main["nodes"]}
            data = nodedata.collect(model, main["id"], inputs=inputs_path,
                                    random_inputs=random_inputs, compare=with_compare,
                                    node_ids=ids, weights=weights,
                                    log=lambda text: click.echo(text, err=True))
        if node_data_dir:
            paths = nodedata.write(data, node_data_dir)
            click.echo(f"wrote {len(paths)} node data files to {node_data_dir}; view them "
                       f"with:\n  model-explorer {os.path.abspath(model)} "
                       f"--extensions=irrun.explore --node_data_paths={','.join(paths)}")
            return
    except IrrunError as e:
        raise _error(e) from None
    from .serve import serve

    serve(model, graphs, node_data=data, host=host, port=port, open_browser=not no_open)
