"""irrun: run, check and look inside OpenVINO IR models (model.xml + model.bin) in Python."""
import importlib
import importlib.abc
import importlib.machinery
import sys

from .errors import (
    Diagnostic,
    FeedError,
    IrrunError,
    ModelError,
    OpError,
    ReadError,
    ResourceError,
    ShapeError,
    UnsupportedError,
)
from .ir.registry import register

__version__ = "0.1.0"

# The rest is imported on first use (PEP 562), so `irrun --help`, `irrun ops` and a small
# `irrun validate` do not pay for NumPy, the executor or the compare machinery. (The module
# behind irrun.compare() is irrun.tools.comparing: a submodule named `compare` would replace
# the function on the package when imported.)
_LAZY = {
    "Dim": "ir.shapes", "TensorSpec": "ir.shapes",
    "compare": "tools.comparing", "CompareResult": "tools.comparing",
    "Model": "run.model", "PortInfo": "run.model", "Session": "run.model",
    "Outputs": "run.model", "read_model": "run.model", "validate": "run.model",
    "save_model": "ir.writer", "extract": "tools.surgery", "reduce": "tools.surgery",
    "batch": "tools.batching", "map_blocks": "tools.batching",
    "GraphBuilder": "tools.builder", "generate": "tools.genai",
}

# Where the modules of irrun's earlier flat layout live now: `import irrun.registry` and
# `from irrun.builder import GraphBuilder` keep working, and give the very same module.
MOVED = {
    "etypes": "ir.etypes", "shapes": "ir.shapes", "reader": "ir.reader", "graph": "ir.graph",
    "weights": "ir.weights", "writer": "ir.writer", "opset_table": "ir.opset_table",
    "registry": "ir.registry", "checks": "ir.checks",
    "infer": "run.infer", "program": "run.program", "executor": "run.executor",
    "subgraph": "run.bodies", "specialize": "run.specialize", "feed": "run.feed",
    "model": "run.model", "decompress": "run.decompress",
    "comparing": "tools.comparing", "surgery": "tools.surgery", "batching": "tools.batching",
    "inspect": "run.inspect", "plugin_int8": "tools.plugin_int8", "builder": "tools.builder",
    "cli": "ui.cli", "drawing": "tools.drawing", "viewer": "ui.viewer",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `irrun.<old name>` as the module at its new place (the same object)."""

    _own_specs: dict = {}

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.rpartition(".")
        if package != __name__ or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(f"{__name__}.{MOVED[spec.name.rpartition('.')[2]]}")
        self._own_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        # The import system has just set the module's __spec__ to the alias's: put back its own.
        module.__spec__ = self._own_specs.pop(module.__name__)


sys.meta_path.append(_MovedModules())


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        if name in MOVED:      # `irrun.registry` after `import irrun` alone
            return importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module 'irrun' has no attribute '{name}'")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CompareResult", "Diagnostic", "Dim", "FeedError", "GraphBuilder", "IrrunError", "Model", "ModelError",
    "OpError", "Outputs", "PortInfo", "ReadError", "ResourceError", "Session", "ShapeError",
    "TensorSpec", "UnsupportedError", "batch", "compare", "extract", "generate", "map_blocks",
    "read_model", "reduce", "register", "save_model", "validate",
]
