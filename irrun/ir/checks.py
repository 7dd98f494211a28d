"""Whole-model checks that no single layer can make: input names shared by two Parameters."""
from __future__ import annotations

from ..errors import Collector


def parameter_names(layer) -> list[str]:
    """The names a feed may use for a Parameter: its tensor names, else its layer name
    (irrun.run.model keys inputs the same way)."""
    port = layer.outputs[0] if layer.outputs else None
    return list(port.names) if port is not None and port.names else [layer.name]


def check_input_names(parameters, diag: Collector) -> None:
    """Two Parameters answering to one name cannot both be fed: an error at both lines."""
    owner: dict[str, object] = {}
    reported: set[tuple[str, str]] = set()
    for node in parameters:
        layer = node.layer
        for name in parameter_names(layer):
            other = owner.setdefault(name, layer)
            if other is layer or (other.id, layer.id) in reported:
                continue
            reported.add((other.id, layer.id))
            for here, there in ((layer, other), (other, layer)):
                diag.error("duplicate-input-name",
                           f"input name '{name}' is also a name of Parameter '{there.name}' "
                           f"(line {there.line}); each model input needs names of its own",
                           layer=here)
