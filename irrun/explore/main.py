"""The Model Explorer adapters (`model-explorer model.xml --extensions=irrun.explore`):
Model Explorer imports `<extension module>.main` and registers the Adapter classes in it.

Two adapters read .xml files: "OpenVINO IR (irrun)", every layer a node, and "OpenVINO IR,
weights folded (irrun)", each decompression subgraph folded into its weight. Model Explorer
picks the first for an .xml; the other is chosen in its adapter menu, or by `irrun explore
--fold-decompression`.
"""
from __future__ import annotations

from model_explorer import Adapter, AdapterMetadata, ModelExplorerGraphs

from ..errors import IrrunError
from .graph import graphs_for

ADAPTER_ID = "irrun_openvino_ir"
FOLDED_ADAPTER_ID = "irrun_openvino_ir_folded"


def _convert(model_path: str, fold: bool) -> ModelExplorerGraphs:
    try:
        return {"graphs": graphs_for(model_path, fold)}
    except IrrunError as e:
        # Model Explorer shows the exception's message in its page (no traceback).
        raise RuntimeError(str(e)) from None


class OpenVinoIrAdapter(Adapter):
    """OpenVINO IR (model.xml + model.bin) through irrun: every layer a node."""

    metadata = AdapterMetadata(
        id=ADAPTER_ID, name="OpenVINO IR (irrun)",
        description="OpenVINO IR model.xml + model.bin, read and shape-inferred by irrun: "
                    "every layer a node, namespaces from layer names, bodies as subgraphs.",
        fileExts=["xml"])

    def convert(self, model_path: str, settings: dict) -> ModelExplorerGraphs:
        return _convert(model_path, fold=False)


class OpenVinoIrFoldedAdapter(Adapter):
    """OpenVINO IR through irrun, each weight's decompression subgraph one node."""

    metadata = AdapterMetadata(
        id=FOLDED_ADAPTER_ID, name="OpenVINO IR, weights folded (irrun)",
        description="As OpenVINO IR (irrun), with each compressed weight's decompression "
                    "subgraph (Convert, Subtract, Multiply, Reshape) folded into its weight.",
        fileExts=["xml"])

    def convert(self, model_path: str, settings: dict) -> ModelExplorerGraphs:
        return _convert(model_path, fold=True)
