"""irrun: run, check and look inside OpenVINO IR models (model.xml + model.bin) in Python."""
from .errors import (Diagnostic, FeedError, IrrunError, ModelError, OpError, ReadError,
                     ResourceError, ShapeError, UnsupportedError)
from .model import Model, PortInfo, read_model, validate
from .registry import register
from .shapes import Dim, TensorSpec

__version__ = "0.1.0"

__all__ = [
    "Diagnostic", "Dim", "FeedError", "IrrunError", "Model", "ModelError", "OpError",
    "PortInfo", "ReadError", "ResourceError", "ShapeError", "TensorSpec", "UnsupportedError",
    "read_model", "register", "validate",
]
