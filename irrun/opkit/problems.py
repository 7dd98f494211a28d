"""How shape rules and kernels report problems: `fail` (an error) and `warn` (a warning)."""
from __future__ import annotations

import contextvars

from irrun.errors import OpProblem

_warnings: contextvars.ContextVar[list | None] = contextvars.ContextVar("irrun_warnings", default=None)


def fail(message: str, code: str = "shape"):
    """Refuse the op's inputs or attributes.

    Works the same in a shape rule and in a kernel: the phase that called it reports a
    located ShapeError at load time and a located OpError at run time.
    """
    raise OpProblem(message, code=code)


def warn(message: str, code: str = "value") -> None:
    """From a shape rule: a problem OpenVINO tolerates, reported as a warning by validate."""
    sink = _warnings.get()
    if sink is not None:
        sink.append((code, message))


def collect_warnings(sink: list):
    """Route warn() calls into `sink` (for the inference pass); returns the reset token."""
    return _warnings.set(sink)


def stop_collecting(token) -> None:
    _warnings.reset(token)
