"""The op registry: (type, since-opset) -> kernel, shape rule and attribute schema."""
from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import typing
from dataclasses import dataclass
from typing import Any, Callable, Literal

from ..errors import RegistrationError

# etypes and shapes (NumPy) are imported where attributes are parsed: `irrun --help` and
# `irrun ops` import the registry but never need NumPy.

# Annotation markers for attribute fields that are not plain Python types.
ElementTypeName = typing.NewType("ElementTypeName", str)    # "f32", "i64", ... (or "undefined"/"dynamic")
PartialShapeText = typing.NewType("PartialShapeText", str)  # parsed with the partial-shape grammar


@dataclass(frozen=True)
class NoAttrs:
    """Schema of an op without attributes."""


@dataclass
class OpDef:
    type: str                    # the IR spelling, e.g. "SoftMax"
    since: int | None            # first opset that has this version; None for custom versions
    version: str | None          # a non-opset version string ("extension"), else None
    impl: Any                    # the class holding infer() and run()
    attrs: type                  # dataclass with one field per <data> attribute
    category: str
    min_inputs: int
    max_inputs: int | None       # None: variadic

    @property
    def label(self) -> str:
        """Versioned name, as in the specs: Bucketize-3."""
        return f"{self.type}-{self.since if self.since is not None else self.version}"

    def infer(self, attrs, *inputs):
        return self.impl.infer(attrs, *inputs)

    def run(self, attrs, *inputs):
        return self.impl.run(attrs, *inputs)


def _arity(run: Callable) -> tuple[int, int | None]:
    params = list(inspect.signature(run).parameters.values())[1:]  # skip attrs
    lo, hi = 0, 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return lo, None
        hi += 1
        if p.default is p.empty:
            lo += 1
    return lo, hi


def _origin(cls) -> tuple[str, int | None]:
    """(file, line) of a registering class, for registration errors."""
    try:
        return inspect.getsourcefile(cls) or "?", inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):    # a class made at run time (make_unary): its module's file
        module = sys.modules.get(getattr(cls, "__module__", ""))
        return getattr(module, "__file__", None) or getattr(cls, "__module__", "?"), None


def _at(where: tuple[str, int | None]) -> str:
    return f"{where[0]}:{where[1]}" if where[1] is not None else where[0]


def _key(op: OpDef) -> tuple:
    return (op.since, op.version)


def _by_version(o: OpDef):
    return (o.since is None, o.since or 0)


class Registry:
    """Every op version irrun knows: the built-in kernels and, over them, the extensions.

    The registry imports the built-in kernels (the modules of `irrun.ops`) itself, so
    nothing depends on import order: an extension imported before any model is read still
    sees the built-ins, and its `replace=True` registrations win over them. An extension's
    registrations form an overlay; `unregister` of an overlaid version brings the built-in
    one back.

    A lookup imports only the modules that register its op type, found in the generated
    index `irrun/ops/_index.py` (tools/sync_readme.py writes it, a test keeps it true):
    importing all 30-odd kernel modules costs ~0.2 s, more than a small `irrun validate`
    should take. Anything that needs every op (all(), an unknown type, an extension that
    may clash with a built-in) imports them all.
    """

    def __init__(self, builtin_package: str = "irrun.ops"):
        self._package = builtin_package
        self._builtin: dict[str, list[OpDef]] = {}
        self._overlay: dict[str, list[OpDef]] = {}
        self._state = "unloaded"          # -> "loading" -> "loaded" (every module)
        self._imported: set[str] = set()  # kernel modules imported so far
        self._index = None                # {op type (lower case): modules}, read on first use

    def index(self):
        """The generated index module of the built-in package (MODULES, OPS)."""
        if self._index is None:
            import importlib

            self._index = importlib.import_module(self._package + "._index")
        return self._index

    def _import(self, modules) -> None:
        import importlib

        for name in modules:
            if name not in self._imported:
                importlib.import_module(f"{self._package}.{name}")
                self._imported.add(name)

    def _ensure_loaded(self) -> None:
        if self._state != "unloaded":
            return
        self._state = "loading"
        try:
            self._import(self.index().MODULES)
        except BaseException:
            self._state = "unloaded"
            raise
        self._state = "loaded"

    def _ensure_type(self, type: str) -> None:
        """Import the modules that register `type` (all of them for a type not in the index)."""
        if self._state != "unloaded":
            return
        modules = self.index().MODULES_OF.get(type.lower())
        if modules is None:
            self._ensure_loaded()
        else:
            self._import(modules)

    def _is_builtin(self, cls) -> bool:
        module = getattr(cls, "__module__", "") or ""
        return module == self._package or module.startswith(self._package + ".")

    def check(self, op: OpDef, replace: bool, cls) -> None:
        """Refuse a second registration of a version unless it replaces the first."""
        if not self._is_builtin(op.impl):
            self._ensure_loaded()      # a clash with a built-in must be seen now
        clash = [o for o in self.versions(op.type, load=False) if _key(o) == _key(op)]
        if clash and not replace:
            raise RegistrationError(
                f"{op.label} is registered twice: here and at {_at(_origin(clash[0].impl))} "
                "(pass replace=True to @irrun.register to override a registered version)",
                file=_origin(cls)[0], line=_origin(cls)[1])

    def add(self, op: OpDef) -> None:
        """Register `op`: a built-in kernel or an extension's (overlay), replacing its key."""
        table = self._builtin if self._is_builtin(op.impl) else self._overlay
        versions = table.setdefault(op.type.lower(), [])
        versions[:] = [o for o in versions if _key(o) != _key(op)]
        versions.append(op)
        versions.sort(key=_by_version)

    def remove(self, type: str, since: int | None = None, version: str | None = None) -> None:
        self._ensure_type(type)        # else a later import would bring the version back
        for table in (self._overlay, self._builtin):
            versions = table.get(type.lower(), [])
            before = len(versions)
            versions[:] = [o for o in versions if _key(o) != (since, version)]
            if len(versions) != before:
                return

    def versions(self, type: str, load: bool = True) -> list[OpDef]:
        """Every version of `type` (case-insensitive), oldest first; overlay over built-ins."""
        if load:
            self._ensure_type(type)
        low = type.lower()
        over = self._overlay.get(low)
        if not over:
            return list(self._builtin.get(low, ()))
        keys = {_key(o) for o in over}
        merged = [o for o in self._builtin.get(low, ()) if _key(o) not in keys] + over
        return sorted(merged, key=_by_version)

    def all(self) -> list[OpDef]:
        self._ensure_loaded()
        types = dict.fromkeys(list(self._builtin) + list(self._overlay))
        return [op for t in types for op in self.versions(t)]

    def listing(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(category, op type, version labels) of every registered op, without importing a
        kernel module while no extension has registered anything (the index says it)."""
        if self._overlay or self._state == "loaded":
            by_type: dict[tuple[str, str], list[str]] = {}
            for op in self.all():
                by_type.setdefault((op.category or "other", op.type), []).append(op.label)
            return [(c, t, tuple(labels)) for (c, t), labels in by_type.items()]
        return [(category, type, labels) for type, category, _, labels in self.index().OPS]


def index_source(registry: "Registry") -> str:
    """The text of irrun/ops/_index.py for the kernels as they register themselves (every
    module imported): tools/sync_readme.py writes it, tests compare it with this."""
    import importlib
    import pkgutil

    package = importlib.import_module(registry._package)
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                   if not m.name.startswith("_"))
    registry._import(names)         # helpers that register nothing are imported too, here only
    registry._state = "loaded"
    rows: dict[str, list] = {}
    for type_, ops in registry._builtin.items():
        for op in ops:
            module = op.impl.__module__.rsplit(".", 1)[-1]
            row = rows.setdefault(op.type, [op.category or "other", [], []])
            if module not in row[1]:
                row[1].append(module)
            row[2].append(op.label)
    lines = ['"""Which kernel module registers which op: generated by tools/sync_readme.py from the',
             "kernels' @register lines (tests/test_op_index.py checks it is current), so that the",
             'registry imports only the modules a model needs (irrun/ir/registry.py)."""', "",
             "MODULES = ("]
    modules = sorted({m for row in rows.values() for m in row[1]})
    lines += [f"    {m!r}," for m in modules]
    lines += [")", "", "# (op type, category, modules, version labels)", "OPS = ("]
    for type_ in sorted(rows, key=str.lower):
        category, mods, labels = rows[type_]
        lines.append(f"    ({type_!r}, {category!r}, {tuple(sorted(mods))!r}, {tuple(labels)!r}),")
    lines += [")", "", "MODULES_OF = {type.lower(): modules for type, _, modules, _ in OPS}", ""]
    return "\n".join(lines)


REGISTRY = Registry()


def register(type: str, since: int | tuple[int, ...] | None = None, *, attrs=NoAttrs,
             version: str | None = None, category: str = "", replace: bool = False):
    """Class decorator: register an op version, or several versions served by one class.

    `since` is the opset that introduced the version (Bucketize-3 -> since=3); a tuple
    registers the class for each (SoftMax-1 and SoftMax-8: `since=(1, 8)`), with `attrs`
    one schema for all or a tuple of one schema per version (behaviour that differs between
    versions lives in ClassVar flags of those schemas). `version` registers a custom op under
    a non-opset version string such as "extension". The class has static
    `infer(attrs, *specs) -> list[TensorSpec]` and `run(attrs, *arrays) -> tuple[ndarray]`;
    optional inputs default to None. `replace=True` overrides a registered version (a
    built-in kernel included). Mistakes raise RegistrationError naming the op and file.
    """
    caller = sys._getframe(1)
    where = dict(file=caller.f_code.co_filename, line=caller.f_lineno)
    if (since is None) == (version is None):
        raise RegistrationError(f"register('{type}') takes exactly one of since= and version=",
                                **where)
    sinces = since if isinstance(since, tuple) else (since,)
    schemas = attrs if isinstance(attrs, tuple) else (attrs,) * len(sinces)
    if len(schemas) != len(sinces):
        raise RegistrationError(f"register('{type}', since={since}) has {len(schemas)} "
                                f"attribute schemas for {len(sinces)} versions", **where)
    for s in sinces:
        if version is None and (not isinstance(s, int) or isinstance(s, bool) or s < 1):
            raise RegistrationError(f"register('{type}'): since={s!r} is not an opset number "
                                    "(a whole number from 1)", **where)

    def deco(cls):
        # (The class's file and line are looked up only for an error: inspect reads and
        # tokenizes the source file, which made importing the kernels take seconds.)
        run = getattr(cls, "run", None)
        lo, hi = _arity(run) if callable(run) else (0, None)
        ops = [OpDef(type, s, version, cls, schema_cls, category, lo, hi)
               for s, schema_cls in zip(sinces, schemas)]
        for op in ops:
            REGISTRY.check(op, replace, cls)
        for name in ("infer", "run"):
            if not callable(getattr(cls, name, None)):
                raise RegistrationError(f"{cls.__name__} registered as '{type}' has no static "
                                        f"{name}() method", file=_origin(cls)[0],
                                        line=_origin(cls)[1])
        for op in ops:
            REGISTRY.add(op)
        cls.opdef = ops[-1]
        cls.opdefs = tuple(ops)
        return cls

    return deco


_EXTENSIONS: dict[str, object] = {}


def load_extension(path) -> None:
    """Import a Python file of custom ops (`irrun --extension my_ops.py`): its @register runs.

    A file is imported once per process; errors in it become a ReadError naming the file.
    """
    import importlib.util
    import os
    import sys

    from ..errors import IrrunError, ReadError

    path = os.path.abspath(os.fspath(path))
    if path in _EXTENSIONS:
        return
    if not os.path.isfile(path):
        raise ReadError(f"no such extension file: '{path}'", file=path)
    name = "irrun_extension_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    name += f"_{len(_EXTENSIONS)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ReadError("cannot import the extension (is it a .py file?)", file=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        line = None
        tb = e.__traceback__
        while tb is not None:      # the innermost frame inside the extension file
            if os.path.abspath(tb.tb_frame.f_code.co_filename) == path:
                line = tb.tb_lineno
            tb = tb.tb_next
        if isinstance(e, SyntaxError) and e.lineno:
            line = e.lineno
        detail = e.message if isinstance(e, IrrunError) else str(e)
        raise ReadError(f"the extension failed to import: {type(e).__name__}: {detail}",
                        file=path, line=line) from e
    _EXTENSIONS[path] = module


def unregister(type: str, since: int | None = None, version: str | None = None) -> None:
    """Remove a registered version (an overlaid built-in comes back)."""
    REGISTRY.remove(type, since, version)


def all_ops() -> list[OpDef]:
    return REGISTRY.all()


def registered_versions(type: str) -> list[OpDef]:
    return REGISTRY.versions(type)


# At most 9 digits: int() of a 5000-digit "opset999..." raises ValueError (fuzzing found it);
# anything that long is an unknown opset anyway.
_OPSET = re.compile(r"^opset(\d{1,9})$")


class LookupFailure(Exception):
    """Raised by lookup(); the message lists what is registered."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


# The opsets OpenVINO 2026.4 knows: it refuses any other "opsetN" (even when the op's
# newest version would be well defined), so irrun does too.
LATEST_OPSET = 17

# Name the registered types in an unknown-type message only while the list is short.
_LIST_TYPES_UP_TO = 30


def lookup(type: str, version: str | None) -> OpDef:
    """The op for a layer's type and version attribute (case-insensitive type, like OpenVINO)."""
    import difflib

    versions = REGISTRY.versions(type)
    if not versions:
        names = sorted({o.type for o in all_ops()}, key=str.lower)
        # Suggest by lower-case spelling: OpenVINO's type lookup ignores case, so RELUX is
        # as near to ReLU as ReLUX is.
        by_lower = {n.lower(): n for n in names}
        close = [by_lower[c] for c in difflib.get_close_matches(type.lower(), list(by_lower),
                                                                 n=3, cutoff=0.6)]
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        custom = ""
        if version == "extension":
            custom = ((" " if hint else ". ") + 'It looks like a custom op (version="extension"): '
                      "register a kernel with @irrun.register in a Python file and pass it with "
                      "--extension.")
        listed = (f"registered: {', '.join(names)}; " if len(names) <= _LIST_TYPES_UP_TO
                  else f"{len(names)} op types are registered; ")
        raise LookupFailure(f"unknown op type '{type}'{hint}{custom} ({listed}"
                            "`irrun ops` lists them with their versions)", "unknown-op")
    available = ", ".join(o.label for o in versions)
    m = _OPSET.match(version or "")
    if m:
        n = int(m.group(1))
        if not 1 <= n <= LATEST_OPSET:
            raise LookupFailure(f"unknown opset '{version}' (OpenVINO has opset1 to "
                                f"opset{LATEST_OPSET}); registered: {available}", "unknown-opset")
        candidates = [o for o in versions if o.since is not None and o.since <= n]
        if candidates:
            return candidates[-1]
        raise LookupFailure(f"no kernel for {type}-{version}; registered: {available}",
                            "unknown-opset")
    exact = [o for o in versions if o.version == version]
    if exact:
        return exact[-1]
    custom = " (a custom op: register it with @irrun.register)" if version == "extension" else ""
    raise LookupFailure(f"no kernel for {type} with version '{version}'{custom} (expected "
                        f"opset1 to opset{LATEST_OPSET}); registered: {available}", "unknown-opset")


# ---------------------------------------------------------------- attribute parsing

def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    raise ValueError("is not a boolean (true/false)")


_INT64 = range(-(1 << 63), 1 << 63)


def _parse_int(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("is not an integer") from None
    # OpenVINO's integer attributes are int64_t or size_t, and irrun computes shapes and
    # windows with them in int64 (fuzzing found a stride of 1e29 overflowing NumPy there).
    if value not in _INT64:
        raise ValueError(f"is outside the 64-bit integer range "
                         f"[{_INT64.start}, {_INT64.stop - 1}]")
    return value


def _parse_float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError("is not a number") from None


def _parse_tuple(text: str, item: Callable) -> tuple:
    s = text.strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
    if s.strip() == "":
        return ()
    values = []
    for p in s.split(","):
        try:
            values.append(item(p))
        except ValueError as e:
            raise ValueError(f"has the item '{p.strip()}', which {e}") from None
    return tuple(values)


def _parse_etype(text: str) -> str:
    # OpenVINO reads these through EnumNames<element::Type_t>, which ignores case ("F16" is
    # f16) but knows only the IR names ("FP16", a port precision, is refused).
    t = text.lower()
    from .etypes import ELEMENT_TYPES, UNSUPPORTED

    if t in ELEMENT_TYPES or t in UNSUPPORTED or t in ("undefined", "dynamic"):
        return t
    raise ValueError(f"is not an element type (one of {', '.join(ELEMENT_TYPES)})")


def _parser(annotation) -> Callable[[str], Any]:
    if annotation is bool:
        return _parse_bool
    if annotation is int:
        return _parse_int
    if annotation is float:
        return _parse_float
    if annotation is str:
        return str
    if annotation is ElementTypeName:
        return _parse_etype
    if annotation is PartialShapeText:
        def shape(text):
            try:
                from .shapes import parse_partial_shape

                parse_partial_shape(text)
            except ValueError as e:
                raise ValueError(f"is not a partial shape: {e}") from None
            return text
        return shape
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        def literal(text):
            if text in args:
                return text
            # OpenVINO's EnumNames::as_enum compares lower-cased names, so "HALF_TO_EVEN"
            # is half_to_even there; irrun accepts the same spellings, no more.
            for a in args:
                if isinstance(a, str) and a.lower() == text.lower():
                    return a
            import difflib

            words = [a for a in args if isinstance(a, str)]
            close = difflib.get_close_matches(text.lower(), words, n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"is not one of {', '.join(map(str, args))}{hint}")
        return literal
    if origin is tuple:
        return lambda text: _parse_tuple(text, _parser(args[0]))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        inner = [a for a in args if a is not type(None)]
        return _parser(inner[0])
    raise TypeError(f"unsupported attribute annotation {annotation!r}")


def schema(attrs_cls) -> dict[str, tuple[Callable, bool]]:
    """{IR attribute name: (parser, required)} for an attribute dataclass (cached on the class).

    An IR name that is not a Python identifier (AvgPool's `exclude-pad`) is given as
    `field(metadata={"ir_name": "exclude-pad"})`; the field keeps its Python name.
    """
    cached = attrs_cls.__dict__.get("_irrun_schema")
    if cached is not None:
        return cached
    hints = typing.get_type_hints(attrs_cls)
    result = {}
    for f in dataclasses.fields(attrs_cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        result[f.metadata.get("ir_name", f.name)] = (_parser(hints[f.name]), required)
    attrs_cls._irrun_schema = result
    return result


def parse_attrs(attrs_cls, data: dict[str, str]):
    """Parse <data> into the op's attribute dataclass.

    Returns (attrs or None, problems, unknown); problems are (name, message, code) of
    errors, unknown the attribute names the schema does not have.
    """
    problems: list[tuple[str, str, str]] = []
    values = {}
    spec = schema(attrs_cls)
    field_of = {f.metadata.get("ir_name", f.name): f.name for f in dataclasses.fields(attrs_cls)}
    for name, (parse, required) in spec.items():
        if name not in data:
            if required:
                problems.append((name, f"required attribute '{name}' is missing", "missing-attribute"))
            continue
        try:
            values[field_of[name]] = parse(data[name])
        except ValueError as e:
            problems.append((name, f"attribute {name}='{data[name]}' {e}", "bad-attribute"))
    unknown = [k for k in data if k not in spec]
    if problems:
        return None, problems, unknown
    return attrs_cls(**values), problems, unknown
