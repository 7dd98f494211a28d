"""irrun: run, check and look inside OpenVINO IR models (model.xml + model.bin) in Python."""
from .errors import (Diagnostic, FeedError, IrrunError, ModelError, OpError, ReadError,
                     ResourceError, ShapeError, UnsupportedError)
from .registry import register

__version__ = "0.1.0"

# The rest is imported on first use (PEP 562), so `irrun --help`, `irrun ops` and a small
# `irrun validate` do not pay for NumPy, the executor or the compare machinery. (The module
# behind irrun.compare() is irrun.comparing: a submodule named `compare` would replace the
# function on the package when imported.)
_LAZY = {
    "Dim": "shapes", "TensorSpec": "shapes",
    "compare": "comparing", "CompareResult": "comparing",
    "Model": "model", "PortInfo": "model", "Session": "model", "Outputs": "model",
    "read_model": "model", "validate": "model",
    "save_model": "writer", "extract": "surgery", "reduce": "surgery",
    "batch": "batching", "map_blocks": "batching",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'irrun' has no attribute '{name}'")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CompareResult", "Diagnostic", "Dim", "FeedError", "IrrunError", "Model", "ModelError",
    "OpError", "Outputs", "PortInfo", "ReadError", "ResourceError", "Session", "ShapeError",
    "TensorSpec", "UnsupportedError", "batch", "compare", "extract", "map_blocks", "read_model",
    "reduce", "register", "save_model", "validate",
]
