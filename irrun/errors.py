"""irrun's exception types and the Diagnostic record every message is made of.

The reader, the validator, the executor and the API raise only these (anything else
escaping is an irrun bug; the executor reports a kernel's stray exception as an OpError
saying "internal error"). Each carries a Diagnostic with the file, line, layer id, layer
name and op where known, so ``str(e)`` is one ``FILE:LINE: error: layer 'L' (Op): ...`` line.

    IrrunError             base class; catch this to catch everything irrun raises on purpose
    ├── ReadError          a model, weights, inputs or extension file cannot be read at all
    │                      (missing, not a regular file, not an .npz, truncated)
    ├── ModelError         the model is invalid; .diagnostics lists every problem of the file
    │                      (XML attacks such as a DOCTYPE end up here, with the DTD's line)
    ├── ShapeError         an op's shape/type rule rejects its inputs (read_model reports it
    │                      inside a ModelError)
    ├── FeedError          the inputs do not fit the Parameters: unknown or missing names,
    │                      rank/dims, a lossy or foreign dtype, an object array
    ├── OpError            a kernel met a value it cannot compute with at run time (an index
    │                      out of range, unsorted boundaries, ...); the executor adds the layer
    ├── UnsupportedError   valid in OpenVINO but not implemented in irrun (yet)
    └── ResourceError      a tensor would need more memory than irrun may allocate
                           (irrun.ir.weights.max_tensor_bytes(), env IRRUN_MAX_BYTES) or its
                           element count overflows int64; raised before anything is allocated

``irrun.validate()`` never raises for a bad file: it returns the Diagnostics instead. The CLI
prints each error as one line and exits 1; ``irrun --traceback ...`` re-raises with the stack.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Diagnostic:
    """One problem, located like a compiler message: FILE:LINE: severity: layer ...: message."""

    message: str
    severity: str = "error"  # "error" | "warning"
    code: str = "error"
    file: str | None = None
    line: int | None = None
    layer_id: str | None = None
    layer_name: str | None = None
    op: str | None = None  # "Type-opsetN" as written in the file

    def __str__(self) -> str:
        loc = self.file or "<model>"
        if self.line is not None:
            loc += f":{self.line}"
        where = ""
        if self.layer_name is not None or self.op is not None:
            where = f"layer '{self.layer_name}'" if self.layer_name is not None else "layer"
            if self.op:
                where += f" ({self.op})"
            where += ": "
        return f"{loc}: {self.severity}: {where}{self.message}"

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "severity": self.severity,
            "code": self.code,
            "layer_id": self.layer_id,
            "layer_name": self.layer_name,
            "op": self.op,
            "message": self.message,
        }


class IrrunError(Exception):
    """Base class of every error irrun raises on purpose.

    Carries a Diagnostic, so the CLI can print it as one FILE:LINE line.
    Kernels raise it (or a subclass) without a location; the executor adds one.
    """

    code = "error"

    def __init__(self, message: str, *, file=None, line=None, layer_id=None,
                 layer_name=None, op=None, code=None):
        super().__init__(message)
        self.diagnostic = Diagnostic(message, "error", code or self.code, file, line,
                                     layer_id, layer_name, op)

    @property
    def message(self) -> str:
        return self.diagnostic.message

    def locate(self, *, file=None, line=None, layer_id=None, layer_name=None, op=None):
        """Fill in the location fields that are not known yet; return self."""
        d = self.diagnostic
        d.file = d.file or file
        d.line = d.line if d.line is not None else line
        d.layer_id = d.layer_id or layer_id
        d.layer_name = d.layer_name if d.layer_name is not None else layer_name
        d.op = d.op or op
        return self

    def __str__(self) -> str:
        return str(self.diagnostic)


class ReadError(IrrunError):
    """A model, weights or input file cannot be read at all."""

    code = "read"


class ModelError(IrrunError):
    """The model is invalid; `diagnostics` lists every problem found in one pass."""

    code = "invalid-model"

    def __init__(self, diagnostics: list[Diagnostic]):
        errors = [d for d in diagnostics if d.severity == "error"]
        first = errors[0] if errors else diagnostics[0]
        super().__init__(first.message, file=first.file, line=first.line,
                         layer_id=first.layer_id, layer_name=first.layer_name,
                         op=first.op, code=first.code)
        self.diagnostics = diagnostics

    def __str__(self) -> str:
        return "\n".join(str(d) for d in self.diagnostics if d.severity == "error")


class ShapeError(IrrunError):
    """Shape or type inference found inputs an op does not accept."""

    code = "shape"


class FeedError(IrrunError):
    """The inputs given to Model.infer do not fit the model's Parameters."""

    code = "feed"


class OpError(IrrunError):
    """A kernel met a value it cannot compute with (an index out of range, ...)."""

    code = "value"


class UnsupportedError(IrrunError):
    """Something valid in OpenVINO that irrun does not implement yet."""

    code = "unsupported"


class ResourceError(IrrunError):
    """A tensor would need more memory than irrun is allowed to allocate."""

    code = "resource"


class ConfigError(IrrunError):
    """An irrun setting (an IRRUN_* environment variable) has a value irrun cannot use.

    The CLI reports it once, as a usage error (exit status 2), before reading any model.
    """

    code = "config"


class RegistrationError(IrrunError, TypeError, ValueError):
    """An op registration is wrong: a version registered twice, a bad `since`, ...

    Raised by `irrun.register` at import time of the file that registers; the message names
    the op and the file and line of the registration. (Also a TypeError and a ValueError,
    what `register` raised before this type existed, so older handlers still catch it.)
    """

    code = "registration"


class OpProblem(ShapeError, OpError):
    """The one exception the op kit's helpers raise (through `irrun.opkit.fail`).

    A helper does not know whether it runs in a shape rule (load time) or in a kernel (run
    time), so it raises this neutral kind; the phase that called it turns it into what the
    user sees: a located ShapeError inside a ModelError at load time, a located OpError at
    run time. It derives from both so a kernel or rule called directly (as the tests do)
    raises something that is a ShapeError and an OpError alike.
    """

    code = "shape"
    raised_by_rule = False    # the executor marks one a shape rule raised at run time


@dataclass
class Collector:
    """Accumulates diagnostics across the reader, graph builder and inference pass."""

    file: str | None = None
    items: list[Diagnostic] = field(default_factory=list)

    def add(self, severity, code, message, *, line=None, layer=None):
        d = Diagnostic(message, severity, code, self.file, line)
        if layer is not None:
            d.layer_id, d.layer_name, d.op = layer.id, layer.name, layer.op_label
            if line is None:
                d.line = layer.line
        self.items.append(d)
        return d

    def error(self, code, message, **kw):
        return self.add("error", code, message, **kw)

    def warning(self, code, message, **kw):
        return self.add("warning", code, message, **kw)
