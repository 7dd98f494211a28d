"""Checking and casting user inputs against the model's Parameters, and reading input .npz files."""
from __future__ import annotations

import ast
import contextlib
import os
import stat
import zipfile
import zlib

import ml_dtypes
import numpy as np

from ..errors import FeedError, ReadError, ResourceError
from ..ir.etypes import ElementType
from ..ir.shapes import format_shape, shape_matches
from ..ir.weights import max_tensor_bytes


def _value_kind(dtype: np.dtype) -> str:
    """float | int | uint | bool | other, seeing ml_dtypes' bfloat16 (numpy kind 'V') as a float."""
    kind = dtype.kind
    if kind == "f":
        return "float"
    if kind in "iu":
        return "int" if kind == "i" else "uint"
    if kind == "b":
        return "bool"
    if kind == "V" and dtype.fields is None:
        try:
            ml_dtypes.finfo(dtype)
            return "float"
        except (ValueError, TypeError, KeyError):
            pass
        try:
            info = ml_dtypes.iinfo(dtype)
            return "int" if info.min < 0 else "uint"
        except (ValueError, TypeError, KeyError):
            pass
    return "other"


def _shape_problem(shape, got: tuple[int, ...]) -> str | None:
    if shape is None:
        return None
    if len(shape) != len(got):
        return f"rank {len(got)} (shape {list(got)}), expected rank {len(shape)}"
    for axis, (d, n) in enumerate(zip(shape, got)):
        if not d.contains(n):
            return f"shape {list(got)}: dim {axis} is {n}, expected {d}"
    return None


def cast_input(name: str, value, etype: ElementType, shape) -> np.ndarray:
    """The value as an array of the Parameter's type, or a FeedError saying what is wrong.

    A same-kind cast is silent (f64 data for an f32 input, i64 for i32 when the values fit,
    Python lists). A lossy or foreign value is an error: floats for an integer input,
    integers out of range, strings, objects. OpenVINO would silently truncate or wrap.
    """
    # The usual feed first: an array of the Parameter's own numeric type and a shape that
    # fits, which the checks below would return as it is.
    if (type(value) is np.ndarray and value.dtype == etype.dtype and value.dtype.kind in "fiub"
            and etype.kind != "string" and shape_matches(shape, value.shape)):
        return value

    def fail(problem: str):
        raise FeedError(f"input '{name}': {problem}; expected {etype.name}{format_shape(shape)}")

    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError) as e:
            fail(f"cannot make an array of the value ({e})")
    if etype.kind == "string":
        return _cast_strings(arr, shape, fail)
    kind = _value_kind(arr.dtype)
    if kind == "other":
        if arr.dtype == np.dtype("V2") and etype.name in ("bf16", "f16"):
            fail("got raw 2-byte void values (an .npz cannot hold bfloat16); save them as "
                 "float32 and irrun rounds them")
        fail(f"got {arr.dtype} values")
    problem = _shape_problem(shape, arr.shape)
    if problem:
        fail(f"got {problem}")
    if arr.dtype == etype.dtype:
        return arr
    if etype.kind == "bool" or kind == "bool":
        fail(f"got {arr.dtype} values" + (" for a boolean input" if kind != "bool" else ""))
    if etype.is_float:
        if kind == "float":
            with np.errstate(over="ignore", invalid="ignore"):
                cast = arr.astype(etype.dtype)
            # Rounding to fewer bits is the same-kind cast a user expects; turning a finite
            # value into infinity is not.
            grew = np.isinf(cast) & np.isfinite(arr.astype(np.float64))
            if grew.any():
                bad = arr.reshape(-1)[np.flatnonzero(grew.reshape(-1))[0]]
                fail(f"value {float(bad)!r} overflows {etype.name} (it would become inf)")
            return cast
        # Integers for a float input: only when every value survives the round trip.
        with np.errstate(invalid="ignore", over="ignore"):
            cast = arr.astype(etype.dtype)
            back = cast.astype(arr.dtype)
        if not np.array_equal(back, arr) or not np.isfinite(cast).all():
            fail(f"{arr.dtype} values are not exactly representable in {etype.name}")
        return cast
    if kind == "float":
        fail(f"got {arr.dtype} values for an integer input (it would truncate them)")
    if arr.dtype.kind == "V":
        arr = arr.astype(np.int64)
    if arr.size:
        lo, hi = _range(etype)
        amin, amax = int(arr.min()), int(arr.max())
        if amin < lo or amax > hi:
            bad = amin if amin < lo else amax
            fail(f"value {bad} is out of the range of {etype.name} [{lo}, {hi}]")
    return arr.astype(etype.dtype)


def _cast_strings(arr: np.ndarray, shape, fail) -> np.ndarray:
    """A string input as irrun holds strings: an object array of Python str. NumPy unicode
    ('U'), variable-width (StringDType) and object arrays of str give their strings; bytes
    ('S', or bytes objects) are decoded from UTF-8 with 'surrogateescape', so that any bytes
    reach the model unchanged (OpenVINO's strings are bytes)."""
    if arr.dtype.kind not in "USOT":
        fail(f"got {arr.dtype} values for a string input")
    problem = _shape_problem(shape, arr.shape)
    if problem:
        fail(f"got {problem}")
    flat = arr.reshape(-1).tolist()
    if arr.dtype.kind == "O":
        odd = next((v for v in flat if not isinstance(v, (str, bytes))), None)
        if odd is not None:
            fail(f"got an object array holding {type(odd).__name__} values, not str or bytes")
    out = np.empty(len(flat), dtype=object)
    out[:] = [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)
              for v in flat]
    # A str holding a surrogate that is not a surrogate escape (U+DC80..U+DCFF, one per
    # byte) has no bytes: OpenVINO's strings are bytes, and the ops encode each string.
    others = [s for s in out.tolist() if not s.isascii()]
    try:
        "".join(others).encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        for i, s in enumerate(out.tolist()):
            try:
                s.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError as e:
                where = np.unravel_index(i, arr.shape) if arr.ndim else ()
                fail(f"string {list(map(int, where))} holds {s[e.start]!r}, a lone surrogate "
                     "that UTF-8 cannot encode (only U+DC80..U+DCFF stand for raw bytes)")
    return out.reshape(arr.shape)


def npz_array(a: np.ndarray) -> np.ndarray:
    """An output as an .npz can hold it: a string tensor (an object array of str) becomes a
    NumPy unicode array (code points, surrogate escapes included; as NumPy does, trailing
    NUL characters of each string are not kept). check_writable first."""
    if a.dtype == object:
        return np.array(a.tolist(), dtype=str).reshape(a.shape) if a.size else \
            np.zeros(a.shape, dtype="U1")
    return a


def _range(etype: ElementType) -> tuple[int, int]:
    if etype.bits < 8:
        if etype.kind == "int":
            return -(1 << (etype.bits - 1)), (1 << (etype.bits - 1)) - 1
        return 0, (1 << etype.bits) - 1
    info = np.iinfo(etype.dtype)
    return int(info.min), int(info.max)


# ---------------------------------------------------------------- .npz files

def _npy_header(f) -> tuple[np.dtype, tuple[int, ...], bool]:
    """dtype, shape and Fortran order from a .npy header, without unpickling anything."""
    version = np.lib.format.read_magic(f)
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f"unknown .npy format version {version}")
    header_len_size = 2 if version == (1, 0) else 4
    raw = f.read(header_len_size)
    if len(raw) != header_len_size:
        raise ValueError("the .npy header is truncated")
    n = int.from_bytes(raw, "little")
    if n > 1 << 16:
        raise ValueError(f"the .npy header claims {n} bytes")
    text = f.read(n)
    if len(text) != n:
        raise ValueError("the .npy header is truncated")
    header = ast.literal_eval(text.decode("latin-1" if version != (3, 0) else "utf-8"))
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ValueError("the .npy header is not a numpy header dict")
    shape = header["shape"]
    if not isinstance(shape, tuple) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"the .npy header has a bad shape {shape!r}")
    dtype = np.lib.format.descr_to_dtype(header["descr"])
    return dtype, shape, bool(header["fortran_order"])


def _read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, path: str, key: str,
                 budget: int | None = None) -> np.ndarray:
    with z.open(info) as f:
        dtype, shape, fortran = _npy_header(f)
        if dtype.hasobject:
            raise FeedError(f"input '{key}' is an object array ({dtype}); irrun never unpickles "
                            "inputs: save numeric arrays", file=path)
        count = 1
        for d in shape:
            count *= d
        need = count * dtype.itemsize
        limit = max_tensor_bytes()
        if need > limit:
            raise ResourceError(f"input '{key}' declares shape {list(shape)} of {dtype} "
                                f"({need} bytes), more than the limit of {limit} "
                                "bytes (IRRUN_MAX_BYTES)", file=path)
        if budget is not None and need > budget:
            raise ResourceError(f"input '{key}' declares shape {list(shape)} of {dtype} "
                                f"({need} bytes); with the inputs before it, more than the "
                                f"limit of {limit} bytes for all of them (IRRUN_MAX_BYTES)",
                                file=path)
        if need > info.file_size:
            raise ReadError(f"input '{key}' is truncated: shape {list(shape)} of {dtype} needs "
                            f"{need} bytes, the member holds at most {info.file_size}", file=path)
        data = f.read(need)
    if len(data) != need:
        raise ReadError(f"input '{key}' is truncated: got {len(data)} of {need} bytes", file=path)
    arr = np.frombuffer(data, dtype=dtype, count=count)
    return arr.reshape(shape[::-1]).transpose() if fortran else arr.reshape(shape)


def load_npz(path: str, inputs=None) -> dict[str, np.ndarray]:
    """The arrays of an input .npz keyed by name; never unpickles (object arrays are refused).

    `inputs` (the model's PortInfos) names what may be in the file: a member for no input
    is refused before anything is decompressed. Each member's declared size and header are
    checked before its data is read, and no more than its header's shape needs is ever
    decompressed, all members together within the memory budget (IRRUN_MAX_BYTES), so a zip
    bomb or a header declaring a huge shape is refused instead of allocated.
    """
    path = str(path)
    regular_file(path, "inputs file")
    try:
        z = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise ReadError(f"no such inputs file: '{path}'", file=path) from None
    except IsADirectoryError:
        raise ReadError(f"the inputs file '{path}' is a directory", file=path) from None
    except (zipfile.BadZipFile, EOFError, ValueError) as e:
        raise ReadError(f"the inputs file is not an .npz (a zip of .npy arrays): {e}",
                        file=path) from None
    except OSError as e:
        raise ReadError(f"cannot read the inputs file: {e.strerror or e}", file=path) from None
    result = {}
    with z:
        members = [(info.filename[:-4] if info.filename.endswith(".npy") else info.filename, info)
                   for info in z.infolist() if not info.is_dir()]
        # Names first, from the zip's directory alone: nothing is decompressed for a member
        # that no input takes, or for a file that cannot be used anyway.
        keys = [k for k, _ in members]
        twice = sorted({k for k in keys if keys.count(k) > 1}) if len(set(keys)) < len(keys) else []
        if twice:
            raise FeedError(f"the inputs file holds {', '.join(repr(k) for k in twice)} more "
                            "than once", file=path)
        if inputs is not None:
            known = {n for i in inputs for n in i.names}
            unknown = [k for k in keys if k not in known]
            if unknown:
                raise FeedError(f"unknown input name{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(repr(k) for k in unknown)} in the inputs file; the "
                                "model's inputs are " + ", ".join(str(i) for i in inputs)
                                + did_you_mean(unknown, known), file=path)
        limit = max_tensor_bytes()
        declared = sum(info.file_size for _, info in members)
        if declared > limit + 4096 * len(members):    # headers are at most a few KiB each
            raise ResourceError(f"the inputs file's members declare {declared} bytes in all, "
                                f"more than the limit of {limit} bytes (IRRUN_MAX_BYTES)",
                                file=path)
        total = 0
        for key, info in members:
            try:
                result[key] = _read_member(z, info, path, key, limit - total)
            except (FeedError, ReadError, ResourceError):
                raise
            except (ValueError, SyntaxError, TypeError, MemoryError, EOFError, OSError,
                    zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError) as e:
                raise ReadError(f"input '{key}' in the inputs file cannot be read: {e}",
                                file=path) from None
            total += result[key].nbytes
    return result


def did_you_mean(unknown, known) -> str:
    """'; did you mean 'x' for 'X'?' for the unknown names that differ from a known one only
    in case, or are close to one; '' when none is."""
    import difflib

    lower = {k.lower(): k for k in known}
    hints = []
    for name in unknown:
        match = lower.get(name.lower()) or next(iter(difflib.get_close_matches(
            name, list(known), n=1, cutoff=0.75)), None)
        if match is not None:
            hints.append(f"'{match}' for '{name}'")
    return f"; did you mean {', '.join(hints)}?" if hints else ""


# ---------------------------------------------------------------- writing outputs

def npz_member(name: str) -> str:
    """The zip member an output is stored under: the name plus `.npy`, whatever the name.

    np.load() and irrun's own reader give the member's name without `.npy` back as the key,
    so any name round-trips, also those np.savez cannot take as a keyword (`file`,
    `allow_pickle`, `args`, ...): irrun writes the zip members itself.
    """
    return name + ".npy"


def output_clashes(names) -> list[str]:
    """Names that two outputs share (one would overwrite the other in an .npz)."""
    seen, clash = set(), []
    for n in names:
        if n in seen and n not in clash:
            clash.append(n)
        seen.add(n)
    return clash


def check_output_path(path: str) -> None:
    """Refuse, before the model runs, an output path that cannot be written."""
    from ..errors import IrrunError

    def fail(problem):
        raise IrrunError(f"cannot write the outputs: {problem}", file=path, code="write")

    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        fail("it is a directory")
    if not os.path.isdir(parent):
        fail(f"the directory '{parent}' does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        fail(f"the directory '{parent}' is not writable")
    if os.path.lexists(path) and not os.path.isfile(path):
        fail("it exists and is not a regular file")


def check_writable(name: str, a: np.ndarray) -> None:
    """Refuse a string tensor whose unicode array (see npz_array) would not fit the memory
    budget: NumPy's is fixed-width, 4 bytes a character, every string as wide as the
    longest, so one long string among many short ones makes it far larger than the strings
    (a ResourceError naming `name`, before anything is converted or written)."""
    if a.dtype != object or a.size == 0:
        return
    width = max(1, max(len(v) if isinstance(v, str) else len(str(v))
                       for v in a.reshape(-1).tolist()))
    need, limit = a.size * width * 4, max_tensor_bytes()
    if need > limit:
        raise ResourceError(
            f"'{name}' holds {a.size} strings, the longest of {width} characters: an .npz "
            f"stores them as one unicode array ('<U{width}', 4 bytes a character, every string "
            f"as wide as the longest) of {need} bytes, more than the limit of {limit} bytes (set "
            "IRRUN_MAX_BYTES to change it, or take the strings from Python: "
            "irrun.read_model(...).infer(...) gives them as str objects)")


def save_npz(path: str, arrays: dict[str, np.ndarray], where=None) -> None:
    """Write `arrays` as an uncompressed .npz at exactly `path`, atomically.

    The zip is written to a temporary file beside `path` and renamed over it once complete,
    so a failed or interrupted write leaves the previous file as it was (and no partial file).
    Errors (disk full, permissions) are IrrunErrors naming the path. String tensors too large
    for the memory budget as unicode arrays (check_writable) are refused before anything is
    written, located by `where(name)` (the location fields of the layer it comes from), else
    at `path`.
    """
    import tempfile

    from ..errors import IrrunError

    path = os.fspath(path)
    for name, a in arrays.items():
        try:
            check_writable(name, np.asanyarray(a))
        except ResourceError as e:
            located = e.locate(**where(name)) if where is not None else e
            raise located.locate(file=path) from None     # else the .npz it was to go to
    parent = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                                   dir=parent)
        with os.fdopen(fd, "wb") as raw:
            with zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
                for name, a in arrays.items():
                    with z.open(npz_member(name), "w", force_zip64=True) as f:
                        np.lib.format.write_array(f, npz_array(np.asanyarray(a)), allow_pickle=False)
            raw.flush()
            os.fsync(raw.fileno())
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)          # mkstemp makes 0600; keep what a plain open() would give
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise IrrunError(f"cannot write the outputs: {e.strerror or e}", file=path,
                         code="write") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def load_npy(path: str, inputs) -> dict[str, np.ndarray]:
    """A single `.npy` array as the feed of a model with one input (its header's shape and
    dtype checked against the memory budget before the data is read; never unpickles)."""
    from ..ir.weights import check_alloc

    path = str(path)
    if len(inputs) != 1:
        names = ", ".join(i.name for i in inputs)
        raise FeedError(f"a .npy file holds one array, not an .npz of named arrays, but the "
                        f"model has {len(inputs)} inputs ({names}): give an .npz keyed by input "
                        "name", file=path)
    regular_file(path, "inputs file")
    try:
        with open(path, "rb") as f:
            dtype, shape, _ = _npy_header(f)
            if dtype.hasobject:
                raise FeedError("the .npy holds Python objects, which irrun does not load",
                                file=path)
            check_alloc(shape, dtype, "the .npy array")
            f.seek(0)
            value = np.load(f, allow_pickle=False)
    except FileNotFoundError:
        raise ReadError(f"no such inputs file: '{path}'", file=path) from None
    except (ValueError, EOFError) as e:
        raise ReadError(f"the inputs file is not a .npy array: {e}", file=path) from None
    except OSError as e:
        raise ReadError(f"cannot read the inputs file: {e.strerror or e}", file=path) from None
    return {inputs[0].name: value}


def sample_inputs_for(model_path: str) -> str | None:
    """The sample inputs shipped beside a model: <stem>.inputs.npz or inputs.npz."""
    stem = os.path.splitext(model_path)[0]
    for candidate in (stem + ".inputs.npz",
                      os.path.join(os.path.dirname(model_path), "inputs.npz")):
        if os.path.exists(candidate):
            return candidate
    return None


def write_text(path: str, text: str) -> None:
    """`text` into `path`, atomically and without following links: a temporary file made
    beside it (never an existing one) is renamed over it, so a symbolic link planted at
    `path` is replaced, not written through, and a reader never sees half a file."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def regular_file(path: str, what: str) -> None:
    """Refuse a path that is not a regular file before opening it: a FIFO would block
    forever, a device never end."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return          # opening it says what is wrong (no such file, no permission)
    if stat.S_ISDIR(mode):
        raise ReadError(f"the {what} '{path}' is a directory", file=path)
    if not stat.S_ISREG(mode):
        raise ReadError(f"the {what} '{path}' is not a regular file (a FIFO, socket or "
                        "device): give a file", file=path)
