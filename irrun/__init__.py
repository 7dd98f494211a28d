"""irrun: run, check and look inside OpenVINO IR models (model.xml + model.bin) in Python."""
from .compare import CompareResult, compare
from .errors import (Diagnostic, FeedError, IrrunError, ModelError, OpError, ReadError,
                     ResourceError, ShapeError, UnsupportedError)
from .model import Model, PortInfo, Session, read_model, validate
from .registry import register
from .shapes import Dim, TensorSpec
from .writer import save_model
from .surgery import extract, reduce
from .batching import batch, map_blocks

__version__ = "0.1.0"

__all__ = [
    "CompareResult", "Diagnostic", "Dim", "FeedError", "IrrunError", "Model", "ModelError", "OpError",
    "PortInfo", "ReadError", "ResourceError", "Session", "ShapeError", "TensorSpec", "UnsupportedError",
    "batch", "compare", "extract", "map_blocks", "read_model", "reduce", "register", "save_model",
    "validate",
]
