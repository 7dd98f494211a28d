"""The openvino_tokenizers ops (version="extension"): what `convert_tokenizer(...,
with_detokenizer=True)` writes for byte-level BPE, WordPiece and SentencePiece-style BPE
tokenizers. No spec pages exist; the semantics follow openvino_tokenizers' C++ kernels
(src/*.cpp of openvinotoolkit/openvino_tokenizers 2026.4), read and re-implemented here.

Layouts, as openvino_tokenizers decomposes them:
- a string tensor is (begins i32, ends i32, chars u8): string k is chars[begins[k]:ends[k]];
- a ragged tensor is (begins i32 [rows], ends i32 [rows], elements): row r holds
  elements[begins[r]:ends[r]]; a ragged string tensor is (row begins, row ends, begins,
  ends, chars);
- patterns and other string scalars arrive as u8 Consts holding their UTF-8 bytes;
- "skips" (boolean, one per string) mark special tokens that later ops pass through.

Regular expressions are PCRE2 syntax (compiled with UTF and UCP) and run here with the
`regex` package on the text decoded from UTF-8; match offsets are turned back into byte
offsets. Work is per string (a Python loop: tokenizing is string work), with NumPy for the
offsets. Deviations from openvino_tokenizers are noted where they arise and listed in
docs/tokenizers.md.
"""
from __future__ import annotations

import heapq
import unicodedata
from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import DYNAMIC, Dim, NoAttrs, TensorSpec, check_alloc, fail, register

CATEGORY = "tokenizer"

# Seconds of matching one string may take before the op fails (a pattern with catastrophic
# backtracking), plus REGEX_SECONDS_PER_CHAR for each character: the `regex` package counts
# a whole finditer/sub against one timeout, and a GPT-2 split of 11M characters takes 2-4 s.
# PCRE2's JIT in OpenVINO has a match limit instead; either way the work is bounded.
REGEX_TIMEOUT = 10.0
REGEX_SECONDS_PER_CHAR = 2e-6


def _budget(text: str) -> float:
    return REGEX_TIMEOUT + REGEX_SECONDS_PER_CHAR * len(text)


# ---------------------------------------------------------------- layouts

def _spec(etype, rank_or_shape=1) -> TensorSpec:
    shape = (DYNAMIC,) * rank_or_shape if isinstance(rank_or_shape, int) else rank_or_shape
    return TensorSpec.make(etype, shape)


def _string_specs(shape) -> list[TensorSpec]:
    return [TensorSpec.make("i32", shape), TensorSpec.make("i32", shape), _spec("u8")]


def _ragged_string_specs(shape) -> list[TensorSpec]:
    return [TensorSpec.make("i32", shape), TensorSpec.make("i32", shape), _spec("i32"),
            _spec("i32"), _spec("u8")]


def _check_i32(name: str, *specs: TensorSpec) -> None:
    for s in specs:
        if s.etype.name != "i32":
            fail(f"expected i32 {name}, got {s.etype.name}")


def _check_u8(name: str, spec: TensorSpec) -> None:
    if spec.etype.name != "u8":
        fail(f"expected u8 {name} (a string's UTF-8 bytes), got {spec.etype.name}")


def _text(arr: np.ndarray) -> bytes:
    """A string scalar input (u8 bytes) as bytes."""
    a = np.asarray(arr)
    if a.dtype != np.uint8:
        fail(f"expected a string as u8 bytes, got {a.dtype.name if a.dtype != object else 'string'} "
             f"values")
    return a.tobytes()


def _one(value, what: str):
    """The one value of a scalar input (0-D or one element), refused when it holds none or
    several."""
    a = np.asarray(value).reshape(-1)
    if a.size != 1:
        fail(f"expected one {what}, got {a.size} values")
    return a[0]


def _offsets(begins: np.ndarray, ends: np.ndarray, size: int, what: str):
    """begins/ends as flat int64, refused where a range is not inside [0, size]."""
    b = np.asarray(begins).reshape(-1).astype(np.int64)
    e = np.asarray(ends).reshape(-1).astype(np.int64)
    if b.shape != e.shape:
        fail(f"expected {what} begins and ends of one shape, got {b.size} and {e.size} items")
    bad = np.flatnonzero((b < 0) | (e < b) | (e > size))
    if bad.size:
        i = int(bad[0])
        fail(f"expected {what} ranges inside [0, {size}], got [{int(b[i])}, {int(e[i])}) "
             f"at index {i}")
    return b, e


def _strings(begins, ends, chars, what="string") -> list[bytes]:
    data = np.asarray(chars, dtype=np.uint8).tobytes()
    b, e = _offsets(begins, ends, len(data), what)
    # Ranges may overlap (every string the whole chars, say): the strings can hold far more
    # bytes than the inputs, so their total is held to the memory budget before any is made
    # (summed in f64: exact below 2**53, never wrapping around as int64 could).
    check_alloc([int(np.sum(e - b, dtype=np.float64))], np.uint8,
                f"the {what}s' bytes (the sum of ends - begins; ranges may overlap)")
    return [data[x:y] for x, y in zip(b.tolist(), e.tolist())]


def _pack(parts: list[bytes], shape=None):
    """(begins, ends, chars) of a list of byte strings, offsets i32."""
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if ends.size else 0
    if total >= 1 << 31:
        fail(f"expected at most {(1 << 31) - 1} bytes of strings (i32 offsets), got {total}")
    check_alloc([total], np.uint8, "chars")
    chars = np.frombuffer(b"".join(parts), dtype=np.uint8).copy()
    begins = (ends - lengths).astype(np.int32)
    ends = ends.astype(np.int32)
    if shape is not None:
        begins, ends = begins.reshape(shape), ends.reshape(shape)
    return begins, ends, chars


def _rows(ragged_begins, ragged_ends, count: int, what="rows"):
    return _offsets(ragged_begins, ragged_ends, count, what)


def _skips_or_none(skips):
    return None if skips is None else np.asarray(skips).reshape(-1).astype(bool)


# ---------------------------------------------------------------- string tensors

@dataclass(frozen=True)
class StringModeAttrs:
    mode: Literal["begins_ends"] = "begins_ends"


@register("StringTensorUnpack", version="extension", attrs=StringModeAttrs, category="string")
class StringTensorUnpackExtension:
    """openvino_tokenizers' own StringTensorUnpack (what files written with it loaded hold):
    opset15's for a string tensor, and it also unpacks a u8 tensor in the packed layout
    (batch size i32, batch + 1 offsets i32, the bytes). Outputs: begins, ends, chars."""

    @staticmethod
    def infer(attrs, data: TensorSpec) -> list[TensorSpec]:
        if data.etype.kind == "string":
            return _string_specs(data.shape)
        if data.etype.name == "u8":
            if data.rank not in (None, 1):
                fail(f"expected a string tensor or a packed u8 tensor of rank 1, got {data}")
            return _string_specs((DYNAMIC,))
        fail(f"expected a string or u8 tensor, got {data.etype.name}")

    @staticmethod
    def run(attrs, data: np.ndarray):
        data = np.asarray(data)
        if data.dtype == np.uint8:
            blob = data.tobytes()
            if len(blob) < 4:
                fail("expected a packed string tensor (batch size, offsets, bytes), got "
                     f"{len(blob)} bytes")
            batch = int.from_bytes(blob[:4], "little", signed=True)
            if batch < 0 or len(blob) < 8 + 4 * batch:
                fail(f"packed string tensor: {len(blob)} bytes cannot hold {batch} strings' "
                     "offsets")
            offsets = np.frombuffer(blob[4:8 + 4 * batch], dtype="<i4").astype(np.int64)
            chars = np.frombuffer(blob[8 + 4 * batch:], dtype=np.uint8)
            begins, ends = offsets[:-1], offsets[1:]
            _offsets(begins, ends, chars.size, "packed string")
            count = int(ends[-1]) if batch else 0
            return begins.astype(np.int32), ends.astype(np.int32), chars[:count].copy()
        flat = data.reshape(-1).tolist()
        # A tensor of many references to one long string (a Tile of it, 8 bytes an element)
        # can stand for far more bytes than memory holds: its characters (1 to 4 bytes each)
        # are counted at C speed and checked before any is encoded; _pack checks the bytes.
        try:
            count = sum(map(len, flat))
        except TypeError:
            count = sum(len(v) if isinstance(v, (str, bytes)) else len(str(v)) for v in flat)
        check_alloc([count], np.uint8, "chars")
        parts = [v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape")
                 for v in flat]
        return _pack(parts, data.shape)


@register("StringTensorPack", version="extension", attrs=StringModeAttrs, category="string")
class StringTensorPackExtension:
    """openvino_tokenizers' own StringTensorPack: opset15's (begins, ends, chars -> a string
    tensor of begins' shape); ranges outside the chars are refused."""

    @staticmethod
    def infer(attrs, begins, ends, chars) -> list[TensorSpec]:
        if begins.etype.name not in ("i32", "i64") or ends.etype != begins.etype:
            fail(f"expected begins and ends of one type, i32 or i64, got {begins.etype.name} "
                 f"and {ends.etype.name}")
        _check_u8("chars", chars)
        return [TensorSpec.make("string", begins.shape)]

    @staticmethod
    def run(attrs, begins, ends, chars):
        parts = _strings(begins, ends, chars)
        out = np.empty(len(parts), dtype=object)
        out[:] = [p.decode("utf-8", "surrogateescape") for p in parts]
        return (out.reshape(np.asarray(begins).shape),)


# ---------------------------------------------------------------- regular expressions

_PATTERNS: dict[bytes, object] = {}


def _regex():
    try:
        import regex
    except ImportError:    # pragma: no cover - a dependency of irrun
        fail("the tokenizer ops need the `regex` package (pip install regex)", code="unsupported")
    return regex


def _translate(pattern: str) -> str:
    """PCRE2 syntax -> the `regex` package's: `\\x{HHHH}` is `\\U0000HHHH` there, a script
    \\p{Name} is \\p{scx=Name} (see _property); the rest of what openvino_tokenizers
    writes (lookarounds, possessive and atomic groups, (?| ...) branch reset) reads the same."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            if pattern[i + 1] == "x" and i + 2 < n and pattern[i + 2] == "{":
                close = pattern.find("}", i + 3)
                if close > 0:
                    try:
                        code = int(pattern[i + 3:close], 16)
                    except ValueError:
                        code = None
                    if code is not None:
                        out.append(f"\\U{code:08X}")
                        i = close + 1
                        continue
            if pattern[i + 1] in "pP" and i + 2 < n and pattern[i + 2] == "{":
                close = pattern.find("}", i + 3)
                if close > 0:
                    out.append(pattern[i:i + 3] + _property(pattern[i + 3:close]) + "}")
                    i = close + 1
                    continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


# General categories and the properties both libraries read alike; any other \p{Name} is a
# script, which PCRE2 (10.40 on) matches by Script_Extensions: \p{Han} takes U+3280 (㊀).
_CATEGORIES = {"L", "Lu", "Ll", "Lt", "Lm", "Lo", "LC", "L&", "M", "Mn", "Mc", "Me", "N", "Nd",
               "Nl", "No", "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk",
               "So", "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf", "Cs", "Co", "Cn", "Any"}


def _property(name: str) -> str:
    bare = name.removeprefix("^")
    if bare in _CATEGORIES or ":" in bare or "=" in bare:
        return name
    return ("^" if name.startswith("^") else "") + "scx=" + bare


def _compile(pattern: bytes):
    """The compiled pattern (cached by its bytes); a pattern PCRE2 would refuse fails here."""
    got = _PATTERNS.get(pattern)
    if got is None:
        regex = _regex()
        try:
            text = pattern.decode("utf-8")
        except UnicodeDecodeError:
            fail(f"the regular expression {pattern!r} is not UTF-8")
        try:
            got = regex.compile(_translate(text), regex.VERSION0)
        except regex.error as e:
            fail(f"cannot compile the regular expression {text!r}: {e}")
        _PATTERNS[pattern] = got
    return got


def _decode(data: bytes) -> tuple[str, bool]:
    """The text of a string's bytes and whether they were valid UTF-8 (invalid bytes become
    U+DC80..U+DCFF, Python's surrogateescape, one per byte)."""
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape"), False


def _byte_offsets(text: str, data: bytes) -> np.ndarray | None:
    """byte offset of each character position of `text` (len(text) + 1 values), None when
    they are the character positions (ASCII)."""
    if len(text) == len(data):
        return None
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    widths = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
    widths[(cps >= 0xDC80) & (cps <= 0xDCFF)] = 1          # an escaped byte
    out = np.zeros(len(cps) + 1, dtype=np.int64)
    np.cumsum(widths, out=out[1:])
    return out


def _matches(pattern, data: bytes, with_group: bool = False):
    """Byte spans of the successive matches PCRE2's match loop in openvino_tokenizers finds:
    search from the end of the previous match, stop at the first empty match or at no
    match (finditer, cut at its first empty match, finds the same). openvino_tokenizers
    matches with PCRE2's JIT, which does not check UTF-8: invalid bytes are read as
    _unchecked says. With `with_group`, each item is (match span, group span) where the
    group is the last capturing group that took part inside the match (SpecialTokensSplit's
    rule)."""
    text, valid = _decode(data)
    offsets = _byte_offsets(text, data) if valid else None
    if not valid:
        text, offsets = _unchecked(data)
    spans, groups = [], []
    ngroups = pattern.groups or 0
    regex = _regex()
    try:
        for m in pattern.finditer(text, timeout=_budget(text)):
            s, e = m.span()
            if s == e:
                break
            spans.append((s, e))
            if with_group:
                group = None
                for g in range(1, ngroups + 1):
                    gs, ge = m.span(g)
                    if gs >= 0 and s <= gs and ge <= e:
                        group = (gs, ge)
                groups.append(group)
    except TimeoutError:
        fail(f"the regular expression took over {_budget(text):g} s on a string of "
             f"{len(text)} characters; a pattern with catastrophic backtracking?",
             code="resource")
    except regex.error as e:     # pragma: no cover - compile errors are caught earlier
        fail(f"regular expression error: {e}")
    if offsets is not None and spans:
        spans = [tuple(p) for p in offsets[np.array(spans)].tolist()]
        groups = [None if g is None else (int(offsets[g[0]]), int(offsets[g[1]]))
                  for g in groups]
    return list(zip(spans, groups)) if with_group else spans


def _replacement(template: str):
    """PCRE2 substitute's replacement: `$n`, `${n}`, `${name}`, `$$`; openvino_tokenizers
    first rewrites `\\1`..`\\9` to `$1`..`$9`. A reference to a group that did not take
    part makes pcre2_substitute fail (PCRE2_ERROR_UNSET): the string is then returned
    unchanged (see _substitute)."""
    for d in "123456789":
        template = template.replace("\\" + d, "$" + d)
    parts: list = []       # str literals and group references (int or name)
    i, n, lit = 0, len(template), []
    while i < n:
        c = template[i]
        if c == "$" and i + 1 < n:
            nxt = template[i + 1]
            if nxt == "$":
                lit.append("$")
                i += 2
                continue
            if nxt.isdigit():
                j = i + 1
                while j < n and template[j].isdigit():
                    j += 1
                parts += ["".join(lit), int(template[i + 1:j])]
                lit, i = [], j
                continue
            if nxt == "{":
                close = template.find("}", i + 2)
                if close > 0:
                    ref = template[i + 2:close]
                    parts += ["".join(lit), int(ref) if ref.isdigit() else ref]
                    lit, i = [], close + 1
                    continue
            fail(f"invalid replacement string {template!r}: '$' at {i} is not a group "
                 "reference")
        lit.append(c)
        i += 1
    parts.append("".join(lit))
    return parts


def _unchecked(data: bytes) -> tuple[str, np.ndarray]:
    """The characters PCRE2 reads from `data` when it does not check UTF-8 (its JIT, and
    pcre2_substitute with PCRE2_NO_UTF_CHECK, as openvino_tokenizers runs them): a byte
    below 0xC0 is the code point of its value (a stray continuation byte included:
    OpenVINO's outputs agree); a lead byte 0xC0..0xF7 takes the next 1..3 bytes whatever
    they are, their low six bits the code point's (PCRE2's GETCHARINC); 0xF8..0xFF stand
    alone. For a cut sequence what OpenVINO computes is undefined (it depends on the
    pattern's compiled form) and differs from this in places. Returns the text (code points
    past U+10FFFF or in the surrogates become U+FFFD) and the byte offset of each character
    (len + 1 values)."""
    chars, starts, i, n = [], [], 0, len(data)
    while i < n:
        c = data[i]
        starts.append(i)
        extra = 0 if c < 0xC0 or c >= 0xF8 else 1 if c < 0xE0 else 2 if c < 0xF0 else 3
        cp = c if not extra else c & (0x3F >> extra)
        for k in range(1, extra + 1):
            cp = (cp << 6) | ((data[i + k] if i + k < n else 0) & 0x3F)
        chars.append(chr(cp) if cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF else "\ufffd")
        i = min(n, i + 1 + extra)
    return "".join(chars), np.array(starts + [n], dtype=np.int64)


def _substitute(pattern, parts, data: bytes, global_replace: bool) -> bytes:
    """pcre2_substitute as openvino_tokenizers calls it, byte for byte. It passes
    PCRE2_NO_UTF_CHECK, so PCRE2 reads invalid UTF-8 as it comes (see _unchecked): a
    stray continuation byte 0x80..0xBF is U+0080..U+00BF, which patterns may match."""
    text, valid = _decode(data)
    if valid:
        offsets = _byte_offsets(text, data)
    else:
        text, offsets = _unchecked(data)

    def at(i: int) -> int:
        return i if offsets is None else int(offsets[i])

    out, last, regex = [], 0, _regex()
    try:
        for m in pattern.finditer(text, timeout=_budget(text)):
            piece = []
            for p in parts:
                if isinstance(p, str):
                    piece.append(p.encode("utf-8", "surrogateescape"))
                    continue
                try:
                    gs, ge = m.span(p)
                except (IndexError, regex.error):
                    fail(f"the replacement refers to group {p!r}, which the pattern lacks")
                if gs < 0:
                    # PCRE2_ERROR_UNSET: openvino_tokenizers returns the string unchanged.
                    return data
                piece.append(data[at(gs):at(ge)])
            s, e = m.span()
            out += [data[at(last):at(s)], b"".join(piece)]
            last = e
            if not global_replace:
                break
    except TimeoutError:
        fail(f"the regular expression took over {_budget(text):g} s on a string of "
             f"{len(text)} characters; a pattern with catastrophic backtracking?",
             code="resource")
    out.append(data[at(last):])
    return b"".join(out)


# ---------------------------------------------------------------- normalization

def _normalize(begins, ends, chars, skips, fn):
    parts = _strings(begins, ends, chars)
    skip = _skips_or_none(skips)
    out = [p if (skip is not None and skip[i]) else fn(p) for i, p in enumerate(parts)]
    shape = np.asarray(begins).shape
    result = _pack(out, shape)
    return result if skips is None else result + (np.asarray(skips),)


def _normalization_infer(attrs, begins, ends, chars, *rest):
    _check_i32("begins and ends", begins, ends)
    _check_u8("chars", chars)
    out = _string_specs(begins.shape)
    return out


# openvino_tokenizers rewrites these old patterns before compiling them (fix_search_pattern).
_REWRITES = {
    r" ([\\.\\?\\!,])| ('[ms])| (') | ('[rv]e)| (n't)":
        r"(?| ([\\.\\?\\!,])| ('[ms])| (') | ('[rv]e)| (n't))",
    r"(^)(.)": r"(^)([\s\S])",
    r"(^)(.+)": r"(^)([\s\S])",
}


@dataclass(frozen=True)
class RegexNormalizationAttrs:
    global_replace: bool = True


@register("RegexNormalization", version="extension", attrs=RegexNormalizationAttrs,
          category=CATEGORY)
class RegexNormalization:
    """Replace matches of a PCRE2 pattern in each string (all, or the first with
    global_replace=false); strings marked in `skips` pass unchanged. Inputs: begins, ends,
    chars, [skips], pattern, replacement."""

    @staticmethod
    def infer(attrs, begins, ends, chars, *rest):
        if len(rest) not in (2, 3):
            fail(f"expected 5 or 6 inputs (begins, ends, chars, [skips], pattern, "
                 f"replacement), got {3 + len(rest)}")
        out = _normalization_infer(attrs, begins, ends, chars)
        if len(rest) == 3:
            out.append(TensorSpec(rest[0].etype, rest[0].shape))
        return out

    @staticmethod
    def run(attrs, begins, ends, chars, *rest):
        skips, pattern, replace = (None, *rest) if len(rest) == 2 else rest
        source = _text(pattern)
        text = source.decode("utf-8", "surrogateescape")
        source = _REWRITES.get(text, text).encode("utf-8", "surrogateescape")
        compiled = _compile(source)
        parts = _replacement(_text(replace).decode("utf-8", "surrogateescape"))
        return _normalize(begins, ends, chars, skips,
                          lambda s: _substitute(compiled, parts, s, attrs.global_replace))


# Simple case folding (one code point to one, as ICU's u_foldCase, which sentencepiece's
# charsmap builder applies): str.casefold() when it gives one character, else lower() when
# that does (the S entries of CaseFolding.txt), else the character itself.
def _simple_fold(c: str) -> str:
    f = c.casefold()
    if len(f) == 1:
        return f
    low = c.lower()
    return low if len(low) == 1 else c


_FORMS = {"nfc": "NFC", "nfd": "NFD", "nfkc": "NFKC", "nfkd": "NFKD", "identity": None}


@dataclass(frozen=True)
class CharsMapNormalizationAttrs:
    add_dummy_prefix: bool = False
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = False
    normalization_form: str = ""
    case_fold: bool = False
    nmt: bool = False


_CHARMAPS: dict[tuple, dict] = {}


class _Charsmap:
    """A SentencePiece precompiled charsmap: <trie size u32><darts-clone double array of
    u32 units><NUL-terminated replacement strings>; the trie maps byte strings to offsets
    of their replacements."""

    def __init__(self, blob: bytes):
        if len(blob) < 4:
            fail(f"expected a precompiled charsmap (trie size, trie, strings), got {len(blob)} "
                 "bytes")
        size = int.from_bytes(blob[:4], "little")
        if size % 4 or 4 + size > len(blob):
            fail(f"precompiled charsmap: a trie of {size} bytes does not fit in {len(blob)}")
        self.units = np.frombuffer(blob[4:4 + size], dtype="<u4").astype(np.int64).tolist()
        self.strings = blob[4 + size:]
        self.cache: dict[bytes, tuple[bytes, int]] = {}

    def longest(self, data: bytes, i: int) -> tuple[bytes, int] | None:
        """(replacement, bytes consumed) of the longest key at data[i:] (Darts'
        commonPrefixSearch, its first 32 results as SentencePiece keeps), None if none."""
        units, n = self.units, len(self.units)
        pos = units[0] >> 10 << ((units[0] & (1 << 9)) >> 6) if n else 0
        best, found = None, 0
        for k in range(i, len(data)):
            c = data[k]
            pos ^= c
            if pos >= n:
                break
            unit = units[pos]
            if unit & ((1 << 31) | 0xFF) != c:
                break
            pos ^= unit >> 10 << ((unit & (1 << 9)) >> 6)
            if (unit >> 8) & 1:
                found += 1
                if found <= 32 and pos < n:
                    best = (units[pos] & ((1 << 31) - 1), k + 1 - i)
        if best is None:
            return None
        start = best[0]
        end = self.strings.find(b"\0", start)
        return self.strings[start:end if end >= 0 else len(self.strings)], best[1]


def _next_char(data: bytes, i: int) -> tuple[bytes, int]:
    """SentencePiece's fallback for a position no rule matches: the UTF-8 character there,
    or U+FFFD for one invalid byte."""
    c = data[i]
    size = 1 if c < 0x80 else 2 if 0xC2 <= c < 0xE0 else 3 if 0xE0 <= c < 0xF0 else \
        4 if 0xF0 <= c < 0xF5 else 0
    if size:
        part = data[i:i + size]
        try:
            part.decode("utf-8")
            return part, size
        except UnicodeDecodeError:
            pass
    return b"\xef\xbf\xbd", 1


def _sp_normalize(data: bytes, prefix, attrs) -> bytes:
    """SentencePiece's Normalizer::Normalize: `prefix(data, i)` gives (replacement,
    consumed) at each position; leading, repeated and trailing spaces are dropped with
    remove_extra_whitespaces, a space (or U+2581 with escape_whitespaces) goes first with
    add_dummy_prefix, spaces become U+2581 with escape_whitespaces."""
    if not data:
        return data
    i, n = 0, len(data)
    remove = attrs.remove_extra_whitespaces
    if remove:
        while i < n:
            rep, used = prefix(data, i)
            if rep != b" ":
                break
            i += used
        if i == n:
            return b""
    space = "\u2581".encode() if attrs.escape_whitespaces else b" "
    out = bytearray(space if attrs.add_dummy_prefix else b"")
    prev_space = remove
    while i < n:
        rep, used = prefix(data, i)
        if prev_space:
            rep = rep.lstrip(b" ")
        if rep:
            out += rep.replace(b" ", space) if attrs.escape_whitespaces else rep
            prev_space = rep.endswith(b" ")
        i += used
        if not remove:
            prev_space = False
    if remove:
        while out.endswith(space):
            del out[len(out) - len(space):]
    return bytes(out)


@register("CharsMapNormalization", version="extension", attrs=CharsMapNormalizationAttrs,
          category=CATEGORY)
class CharsMapNormalization:
    """SentencePiece's normalizer, with the file's precompiled charsmap (normalization_form
    "": the last input) or one of openvino_tokenizers' built-in maps (nfd/nfkd/nfc/nfkc/
    identity, with or without case folding). A built-in map maps each character alone: NFD/
    NFKD decompose it, then each resulting character is simply case folded; no canonical
    reordering happens across characters (as the per-character map does not). Invalid
    UTF-8 becomes U+FFFD, one per byte. Inputs: begins, ends, chars, [skips],
    [precompiled charsmap]."""

    @staticmethod
    def infer(attrs, begins, ends, chars, *rest):
        form = attrs.normalization_form.lower()
        if form and form not in _FORMS:
            fail(f"unknown normalization_form '{attrs.normalization_form}' (expected one of "
                 f"{', '.join(_FORMS)}, or \"\" with a precompiled charsmap input)")
        if len(rest) > 2:
            fail(f"expected 3 to 5 inputs, got {3 + len(rest)}")
        skips = len(rest) == 2 or (form != "" and len(rest) == 1)
        if not form and len(rest) - skips != 1:
            fail("expected the precompiled charsmap as the last input (normalization_form "
                 "is \"\")")
        out = _normalization_infer(attrs, begins, ends, chars)
        if skips:
            out.append(TensorSpec(rest[0].etype, rest[0].shape))
        return out

    @staticmethod
    def run(attrs, begins, ends, chars, *rest):
        form_name = attrs.normalization_form.lower()
        has_skips = len(rest) == 2 or (form_name != "" and len(rest) == 1)
        skips = rest[0] if has_skips else None
        if not form_name:
            blob = _text(rest[-1])
            charsmap = _cached("charsmap", [rest[-1]], lambda: _Charsmap(blob))

            def prefix(data: bytes, i: int):
                got = charsmap.longest(data, i)
                return got if got is not None else _next_char(data, i)

            return _normalize(begins, ends, chars, skips,
                              lambda d: _sp_normalize(d, prefix, attrs))
        return _normalize(begins, ends, chars, skips,
                          _builtin_normalizer(_FORMS[form_name], attrs.case_fold, attrs))


def _builtin_normalizer(form: str | None, case_fold: bool, flags):
    """SentencePiece's normalizer with one of openvino_tokenizers' built-in charsmaps, as a
    function of a string's bytes (see CharsMapNormalization)."""
    table = _CHARMAPS.setdefault((form, case_fold), {})

    def char(c: str) -> str:
        got = table.get(c)
        if got is None:
            got = unicodedata.normalize(form, c) if form else c
            if case_fold:
                got = "".join(_simple_fold(x) for x in got)
            table[c] = got
        return got

    def per_char(data: bytes, i: int):
        part, used = _next_char(data, i)
        return char(part.decode("utf-8")).encode("utf-8"), used

    if form in ("NFC", "NFKC"):
        rules, longest = _composition_rules(form)
        decompose = "NFD" if form == "NFC" else "NFKD"

        def composing(data: bytes, i: int):
            # The longest sequence rule at i (characters whose one-character decompositions
            # spell a composed character's decomposition), else the character's own rule.
            part, used = _next_char(data, i)
            first = part.decode("utf-8")
            if part[0] < 0x80 and (i + 1 == len(data) or data[i + 1] < 0x80):
                # ASCII before ASCII: no sequence rule starts here (NFC leaves ASCII pairs)
                return char(first).encode("utf-8"), used
            chars, spans, j = [first], [used], i + used
            while len(chars) < longest and j < len(data):
                nxt, width = _next_char(data, j)
                chars.append(nxt.decode("utf-8"))
                spans.append(width)
                j += width
            singles = []
            for c in chars:
                d = unicodedata.normalize(decompose, c)
                if len(d) != 1:
                    break
                singles.append(d)
            for m in range(len(singles), 1, -1):
                value = rules.get("".join(singles[:m]))
                if value is not None:
                    if case_fold:
                        value = "".join(_simple_fold(x) for x in value)
                    return value.encode("utf-8"), sum(spans[:m])
            return char(first).encode("utf-8"), used

        return lambda data: _sp_normalize(data, composing, flags)

    return lambda data: _sp_normalize(data, per_char, flags)


_RULES: dict[str, tuple[dict[str, str], int]] = {}


def _composition_rules(form: str) -> tuple[dict[str, str], int]:
    """SentencePiece's sequence rules of an NFC/NFKC charsmap (Builder::BuildNFKCMap): for
    each character whose decomposition (NFD for NFC, NFKD for NFKC) has several characters
    and composes into something else, that decomposition maps to its NFC. Keys are the
    decompositions; a key matches any characters that decompose one by one into its
    characters. Returns the rules and the longest key. Built once (about a second)."""
    got = _RULES.get(form)
    if got is None:
        decompose = "NFD" if form == "NFC" else "NFKD"
        rules: dict[str, str] = {}
        for cp in range(1, 0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            c = chr(cp)
            if not unicodedata.decomposition(c) and not 0xAC00 <= cp <= 0xD7A3:
                continue
            d = unicodedata.normalize(decompose, c)
            if len(d) >= 2:
                composed = unicodedata.normalize("NFC", d)
                if composed != d:
                    rules[d] = composed
        got = _RULES[form] = (rules, max(map(len, rules), default=1))
    return got


@dataclass(frozen=True)
class _PlainFlags:
    add_dummy_prefix: bool = False
    remove_extra_whitespaces: bool = False
    escape_whitespaces: bool = False


_PLAIN = _PlainFlags()


@dataclass(frozen=True)
class NormalizeUnicodeAttrs:
    normalization_form: Literal["NFC", "NFD", "NFKC", "NFKD"] = "NFD"


@register("NormalizeUnicode", version="extension", attrs=NormalizeUnicodeAttrs,
          category=CATEGORY)
class NormalizeUnicode:
    """Unicode normalization of each string: SentencePiece's normalizer with a built-in
    charsmap of the form, no case folding (see CharsMapNormalization for how irrun computes
    it). Inputs: begins, ends, chars, [skips]."""

    @staticmethod
    def infer(attrs, begins, ends, chars, *rest):
        if len(rest) > 1:
            fail(f"expected 3 or 4 inputs, got {3 + len(rest)}")
        out = _normalization_infer(attrs, begins, ends, chars)
        if rest:
            out.append(TensorSpec(rest[0].etype, rest[0].shape))
        return out

    @staticmethod
    def run(attrs, begins, ends, chars, skips=None):
        return _normalize(begins, ends, chars, skips,
                          _builtin_normalizer(attrs.normalization_form, False, _PLAIN))


@dataclass(frozen=True)
class CaseFoldAttrs:
    encoding: str = "utf-8"
    lower: bool = True


@register("CaseFold", version="extension", attrs=CaseFoldAttrs, category=CATEGORY)
class CaseFold:
    """Case folding of each string: encoding "utf-8" folds every character simply (the
    built-in "identity" charsmap with case folding); encoding "" maps the ASCII letters
    only, to lower case (lower=true) or upper case, and ignores skips as openvino_tokenizers
    does. Inputs: begins, ends, chars, [skips]."""

    @staticmethod
    def infer(attrs, begins, ends, chars, *rest):
        if attrs.encoding not in ("", "utf-8") or (attrs.encoding == "utf-8" and not attrs.lower):
            fail(f"expected encoding \"\" or \"utf-8\" (the latter with lower=true), got "
                 f"encoding '{attrs.encoding}' and lower={str(attrs.lower).lower()}")
        if len(rest) > 1:
            fail(f"expected 3 or 4 inputs, got {3 + len(rest)}")
        out = _normalization_infer(attrs, begins, ends, chars)
        if rest:
            out.append(TensorSpec(rest[0].etype, rest[0].shape))
        return out

    @staticmethod
    def run(attrs, begins, ends, chars, skips=None):
        if attrs.encoding == "":
            ascii_case = bytes.lower if attrs.lower else bytes.upper
            out = _normalize(begins, ends, chars, None, ascii_case)
            return out if skips is None else out + (np.asarray(skips),)
        return _normalize(begins, ends, chars, skips, _builtin_normalizer(None, True, _PLAIN))


# ---------------------------------------------------------------- splitting

def _ragged_split_infer(rb, re_, begins, ends, chars):
    _check_i32("ragged begins and ends", rb, re_)
    _check_i32("begins and ends", begins, ends)
    _check_u8("chars", chars)
    return _ragged_string_specs(rb.shape)


@register("SpecialTokensSplit", version="extension", attrs=NoAttrs, category=CATEGORY)
class SpecialTokensSplit:
    """Split each string around matches of the special-tokens pattern: the text between
    matches becomes a piece, each match (its capturing group when one took part) a piece
    marked in the skips output. Inputs: ragged begins, ends, begins, ends, chars, [skips],
    pattern. Outputs: the ragged string pieces and the skips."""

    @staticmethod
    def infer(attrs, rb, re_, begins, ends, chars, *rest):
        if len(rest) not in (1, 2):
            fail(f"expected 6 or 7 inputs, got {5 + len(rest)}")
        return _ragged_split_infer(rb, re_, begins, ends, chars) + [_spec("boolean")]

    @staticmethod
    def run(attrs, rb, re_, begins, ends, chars, *rest):
        skips, pattern = (None, rest[0]) if len(rest) == 1 else rest
        compiled = _compile(_text(pattern))
        data = np.asarray(chars, dtype=np.uint8).tobytes()
        b, e = _offsets(begins, ends, len(data), "string")
        r0, r1 = _rows(rb, re_, b.size)
        skip = _skips_or_none(skips)
        nb, ne, ns, row_b, row_e = [], [], [], [], []
        for row in range(r0.size):
            row_b.append(len(nb))
            for col in range(int(r0[row]), int(r1[row])):
                start = int(b[col])
                if skip is not None and skip[col]:
                    nb.append(start), ne.append(int(e[col])), ns.append(True)
                    continue
                piece = data[start:int(e[col])]
                cur = 0
                for (ms, me), group in _matches(compiled, piece, with_group=True):
                    gs, ge = group if group is not None and group[0] != group[1] else (ms, me)
                    if cur < ms:
                        nb.append(start + cur), ne.append(start + ms), ns.append(False)
                    nb.append(start + gs), ne.append(start + ge), ns.append(True)
                    cur = me
                if cur < len(piece):
                    nb.append(start + cur), ne.append(start + len(piece)), ns.append(False)
            row_e.append(len(nb))
        shape = np.asarray(rb).shape
        return (np.array(row_b, np.int32).reshape(shape), np.array(row_e, np.int32).reshape(shape),
                np.array(nb, np.int32), np.array(ne, np.int32), np.asarray(chars, np.uint8),
                np.array(ns, dtype=bool))


def _split_spans(n: int, matches, mode: str, invert: bool, max_splits: int | None):
    """The pieces RegexSplit cuts a string of n bytes into, given the matches' spans:
    openvino_tokenizers' add_split, case by case (a merged mode holds a match's begin until
    the next piece)."""
    out: list[tuple[int, int]] = []
    last = -1

    def add(begin: int, end: int, inverted: bool) -> None:
        nonlocal last
        if mode == "remove":
            if inverted:
                return
        elif mode == "mergedwithprevious":
            if not inverted and end != n:
                last = begin
                return
            if inverted:
                begin = last
        elif mode == "mergedwithnext":
            if not inverted:
                if last != -1:
                    begin = last
            else:
                last = begin
                return
        begin, end = max(0, begin), min(n, end)
        if max_splits is not None and len(out) == max_splits:
            end = n
        out.append((begin, end))

    pos = 0
    for ms, me in matches:
        if ms != pos:
            add(pos, ms, invert)
        add(ms, me, not invert)
        pos = me
    if pos < n:
        add(pos, n, invert)
    elif mode == "mergedwithnext" and last != n:
        add(last, n, invert)
    return out


@dataclass(frozen=True)
class RegexSplitAttrs:
    behaviour: Literal["remove", "isolate", "contiguous", "mergedwithprevious",
                       "mergedwithnext"] = "remove"
    invert: bool = False
    max_splits: int = -1


@register("RegexSplit", version="extension", attrs=RegexSplitAttrs, category=CATEGORY)
class RegexSplit:
    """Split each piece at the matches of a PCRE2 pattern, HF tokenizers' Split behaviours
    (remove, isolate, contiguous, merged with previous/next, invert). Pieces marked in
    skips, or equal to one of the skip tokens (9-input form), pass whole. Inputs: ragged
    begins, ends, begins, ends, chars, [skips], pattern, [skip tokens begins, ends, chars]."""

    @staticmethod
    def infer(attrs, rb, re_, begins, ends, chars, *rest):
        if len(rest) not in (1, 2, 4):
            fail(f"expected 6, 7 or 9 inputs, got {5 + len(rest)}")
        if attrs.max_splits != -1 and attrs.max_splits <= 0:
            fail(f"expected max_splits > 0 or -1, got {attrs.max_splits}")
        out = _ragged_split_infer(rb, re_, begins, ends, chars)
        # With no characters at all the rows become one (see run): their count is dynamic.
        rows = None if rb.shape is None else (DYNAMIC,) * len(rb.shape)
        out[0], out[1] = TensorSpec.make("i32", rows), TensorSpec.make("i32", rows)
        if len(rest) == 2:
            out.append(_spec("boolean"))
        return out

    @staticmethod
    def run(attrs, rb, re_, begins, ends, chars, *rest):
        skips, skip_tokens = None, None
        if len(rest) == 1:
            pattern = rest[0]
        elif len(rest) == 2:
            skips, pattern = rest
        else:
            pattern = rest[0]
            skip_tokens = set(_strings(*rest[1:4], what="skip token"))
        data = np.asarray(chars, dtype=np.uint8).tobytes()
        has_skips = skips is not None
        if len(data) == 0:
            # openvino_tokenizers: no characters at all -> one empty row, inputs passed on.
            zero = np.zeros(1, np.int32)
            out = (zero, zero.copy(), np.asarray(begins), np.asarray(ends), np.asarray(chars))
            return out + ((np.asarray(skips),) if has_skips else ())
        source = _text(pattern)
        if attrs.behaviour == "contiguous" and not source.endswith(b"+"):
            source = b"(" + source + b")+"
        compiled = _compile(source)
        mode = "isolate" if attrs.behaviour == "contiguous" else attrs.behaviour
        b, e = _offsets(begins, ends, len(data), "string")
        r0, r1 = _rows(rb, re_, b.size)
        skip = _skips_or_none(skips)
        nb, ne, row_b, row_e = [], [], [], []
        ns: list[bool] = []
        max_splits = attrs.max_splits if attrs.max_splits > 0 else None
        for row in range(r0.size):
            row_b.append(len(nb))
            for col in range(int(r0[row]), int(r1[row])):
                start, stop = int(b[col]), int(e[col])
                piece = data[start:stop]
                if skip is not None and skip[col]:
                    nb.append(start), ne.append(stop), ns.append(True)
                    continue
                if skip_tokens is not None and piece in skip_tokens:
                    nb.append(start), ne.append(stop), ns.append(False)
                    continue
                for x, y in _split_spans(len(piece), _matches(compiled, piece), mode,
                                         attrs.invert, max_splits):
                    nb.append(start + x), ne.append(start + y), ns.append(False)
            row_e.append(len(nb))
        shape = np.asarray(rb).shape
        out = (np.array(row_b, np.int32).reshape(shape), np.array(row_e, np.int32).reshape(shape),
               np.array(nb, np.int32), np.array(ne, np.int32), np.asarray(chars, np.uint8))
        return out + ((np.array(ns, dtype=bool),) if has_skips else ())


# ---------------------------------------------------------------- vocabularies

class _Trie:
    """Longest-prefix lookup over byte strings (openvino_tokenizers' Trie): a dict of the
    tokens and the set of their prefixes, walked one byte at a time."""

    def __init__(self, tokens: dict[bytes, int]):
        self.tokens = tokens
        self.prefixes = {t[:k] for t in tokens for k in range(1, len(t) + 1)}

    def longest(self, data: bytes, start: int) -> tuple[int, int]:
        """(token id, end) of the longest token at `start`; (-1, start) when none."""
        best, end = -1, start
        k, n = start + 1, len(data)
        prefixes, tokens = self.prefixes, self.tokens
        while k <= n:
            part = data[start:k]
            if part not in prefixes:
                break
            got = tokens.get(part)
            if got is not None:
                best, end = got, k
            k += 1
        return best, end


_MODELS: dict[tuple, object] = {}


def _cached(kind: str, arrays, build):
    key = (kind,) + tuple((a.dtype.str, a.shape, a.tobytes()) for a in map(np.asarray, arrays))
    got = _MODELS.get(key)
    if got is None:
        if len(_MODELS) > 32:
            _MODELS.clear()
        got = _MODELS[key] = build()
    return got


class _BPE:
    """openvino_tokenizers' BPETokenizerImpl: the vocabulary without the merged tokens
    seeds a longest-match split (unknown bytes -> <0xXX> with byte_fallback, else the unk
    token, else dropped), then merges apply by rank; equal ranks go to the pair queued
    first (a counter bumped once per initial pair and once per merge)."""

    def __init__(self, vocab: list[bytes], merges: list[tuple[bytes, bytes]],
                 added: list[tuple[bytes, int]], attrs):
        table: dict[bytes, int] = {}
        for i, tok in enumerate(vocab):
            table[tok] = i                         # insert_or_assign: the last id wins
        added_map: dict[bytes, int] = {}
        for tok, i in added:
            added_map.setdefault(tok, i)           # std::map::insert: the first wins
        for tok, i in added_map.items():
            table.setdefault(tok, i)
        self.unk = table.get(attrs.unk_token.encode("utf-8"), -1)
        self.merges: dict[tuple[int, int], tuple[int, int]] = {}
        merged = []
        for rank, (left, right) in enumerate(merges):
            try:
                ids = table[left], table[right], table[left + right]
            except KeyError as e:
                fail(f"BPETokenizer: merge {rank} ({left!r}, {right!r}) names the token "
                     f"{e.args[0]!r}, which the vocabulary lacks")
            # Merges::insert keeps the first rank of a repeated pair.
            self.merges.setdefault((ids[0], ids[1]), (rank, ids[2]))
            merged.append(left + right)
        for tok in merged:
            table.pop(tok, None)
        self.table = table
        self.trie = _Trie(table)
        self.byte_fallback = attrs.byte_fallback
        self.end_suffix = attrs.end_suffix.encode("utf-8")
        self.cache: dict[bytes, list[int]] = {}

    def tokenize(self, piece: bytes) -> list[int]:
        got = self.cache.get(piece)
        if got is not None:
            return got
        text = piece + self.end_suffix
        ids: list[int] = []
        i, n = 0, len(text)
        while i < n:
            tok, end = self.trie.longest(text, i)
            if tok != -1:
                ids.append(tok)
                i = end
                continue
            fallback = -1
            if self.byte_fallback:
                fallback = self.table.get(b"<0x%02X>" % text[i], -1)
            if fallback != -1:
                ids.append(fallback)
            elif self.unk != -1:
                # fuse_unk has no effect in openvino_tokenizers (it tests for an id of -1,
                # which is never queued): each unknown byte gives one unk token.
                ids.append(self.unk)
            i += 1
        out = self._merge(ids) if len(ids) >= 2 else ids
        if len(self.cache) < 20000 and ids:
            self.cache[piece] = out
        return out

    def _merge(self, ids: list[int]) -> list[int]:
        ident = list(ids)
        prev = list(range(-1, len(ids) - 1))
        nxt = list(range(1, len(ids))) + [-1]
        alive = [True] * len(ids)
        merges = self.merges
        queue: list = []
        counter = 0
        for a in range(len(ids) - 1):
            m = merges.get((ident[a], ident[a + 1]))
            if m is not None:
                queue.append((m[0], counter, a, a + 1, m[1]))
            counter += 1
        heapq.heapify(queue)
        head, live = 0, len(ids)
        while queue and live >= 2:
            _, _, a, b, new = heapq.heappop(queue)
            if not alive[a] or not alive[b] or nxt[a] != b:
                continue
            p, q = prev[a], nxt[b]
            k = len(ident)
            ident.append(new), prev.append(p), nxt.append(q), alive.append(True)
            alive[a] = alive[b] = False
            if p != -1:
                nxt[p] = k
            else:
                head = k
            if q != -1:
                prev[q] = k
            live -= 1
            counter += 1
            if p != -1:
                m = merges.get((ident[p], new))
                if m is not None:
                    heapq.heappush(queue, (m[0], counter, p, k, m[1]))
            if q != -1:
                m = merges.get((new, ident[q]))
                if m is not None:
                    heapq.heappush(queue, (m[0], counter, k, q, m[1]))
        out, k = [], head
        while k != -1:
            out.append(ident[k])
            k = nxt[k]
        return out


def _ragged_ids_infer(rb, re_, begins, ends, chars):
    _check_i32("ragged begins and ends", rb, re_)
    _check_i32("begins and ends", begins, ends)
    _check_u8("chars", chars)
    return [TensorSpec.make("i32", rb.shape), TensorSpec.make("i32", rb.shape), _spec("i32")]


def _tokenize_rows(rb, re_, begins, ends, chars, tokenize):
    data = np.asarray(chars, dtype=np.uint8).tobytes()
    b, e = _offsets(begins, ends, len(data), "string")
    r0, r1 = _rows(rb, re_, b.size)
    out: list[int] = []
    row_b, row_e = [], []
    for row in range(r0.size):
        row_b.append(len(out))
        for col in range(int(r0[row]), int(r1[row])):
            out.extend(tokenize(data[int(b[col]):int(e[col])]))
        row_e.append(len(out))
    shape = np.asarray(rb).shape
    return (np.array(row_b, np.int32).reshape(shape), np.array(row_e, np.int32).reshape(shape),
            np.array(out, np.int32))


@dataclass(frozen=True)
class BPETokenizerAttrs:
    unk_token: str = ""
    fuse_unk: bool = False
    suffix_indicator: str = ""
    end_suffix: str = ""
    byte_fallback: bool = False
    cache_capacity: int = 20000


@register("BPETokenizer", version="extension", attrs=BPETokenizerAttrs, category=CATEGORY)
class BPETokenizer:
    """Byte-pair encoding of each piece into token ids. Inputs: the ragged string pieces
    (5), the vocabulary (begins, ends, chars), the merges ("left right" strings, or left
    and right as two string tensors), [added tokens begins, ends, chars, ids]: 11, 14, 15
    or 18 inputs. Output: ragged ids (row begins, row ends, ids)."""

    @staticmethod
    def infer(attrs, *inputs):
        n = len(inputs)
        if n not in (11, 14, 15, 18):
            fail(f"expected 11, 14, 15 or 18 inputs, got {n}")
        # The string tables: vocabulary, merges (or left and right parts), added tokens.
        tables = [(5, "vocabulary"), (8, "merges")] + [(11, "right merge parts")] * (n in (14, 18))
        for at, what in tables + [(n - 4, "added tokens")] * (n in (15, 18)):
            _check_i32(f"{what} begins and ends", *inputs[at:at + 2])
            _check_u8(f"{what} chars", inputs[at + 2])
        return _ragged_ids_infer(*inputs[:5])

    @staticmethod
    def run(attrs, *inputs):
        def build():
            vocab = _strings(*inputs[5:8], what="vocabulary")
            if len(inputs) in (11, 15):
                merges = [tuple(m.split(b" ", 1)) if b" " in m else (m, b"")
                          for m in _strings(*inputs[8:11], what="merge")]
            else:
                left = _strings(*inputs[8:11], what="merge")
                right = _strings(*inputs[11:14], what="merge")
                if len(left) != len(right):
                    fail(f"expected as many right merge parts as left ones, got "
                         f"{len(right)} and {len(left)}")
                merges = list(zip(left, right))
            added = []
            if len(inputs) in (15, 18):
                tokens = _strings(*inputs[-4:-1], what="added token")
                ids = np.asarray(inputs[-1]).reshape(-1).tolist()
                if len(ids) != len(tokens):
                    fail(f"expected one id per added token, got {len(ids)} ids for "
                         f"{len(tokens)} tokens")
                added = list(zip(tokens, ids))
            return _BPE(vocab, merges, added, attrs)

        model = _cached("bpe" + repr(attrs), inputs[5:], build)
        return _tokenize_rows(*inputs[:5], model.tokenize)


@dataclass(frozen=True)
class WordpieceTokenizerAttrs:
    suffix_indicator: str = "##"
    max_bytes_per_word: int = 100


@register("WordpieceTokenizer", version="extension", attrs=WordpieceTokenizerAttrs,
          category=CATEGORY)
class WordpieceTokenizer:
    """WordPiece: the longest vocabulary word at the start of each piece, then the longest
    suffix-indicator words; a piece that cannot be covered (or is longer than
    max_bytes_per_word bytes) becomes one unk id. Inputs: the ragged string pieces (5), the
    vocabulary (begins, ends, chars), the unk id. Output: ragged ids."""

    @staticmethod
    def infer(attrs, *inputs):
        if len(inputs) != 9:
            fail(f"expected 9 inputs, got {len(inputs)}")
        return _ragged_ids_infer(*inputs[:5])

    @staticmethod
    def run(attrs, *inputs):
        suffix = attrs.suffix_indicator.encode("utf-8")

        def build():
            roots, subwords = {}, {}
            for i, word in enumerate(_strings(*inputs[5:8], what="vocabulary")):
                if word.startswith(suffix):
                    subwords[word[len(suffix):]] = i
                else:
                    roots[word] = i
            return _Trie(roots), _Trie(subwords)

        roots, subwords = _cached("wordpiece" + repr(attrs), inputs[5:8], build)
        unk = int(_one(inputs[8], "unknown-token id"))

        def tokenize(word: bytes) -> list[int]:
            if len(word) > attrs.max_bytes_per_word:
                return [unk]
            if not word:
                # openvino_tokenizers reads past an empty word; irrun gives no ids for it.
                return []
            tok, i = roots.longest(word, 0)
            if tok == -1:
                return [unk]
            ids = [tok]
            while i < len(word):
                tok, i = subwords.longest(word, i)
                if tok == -1:
                    return [unk]
                ids.append(tok)
            return ids

        return _tokenize_rows(*inputs[:5], tokenize)


def _f32(x: float) -> float:
    """x rounded to float32 (the sum of two float32 values in double, rounded once, is their
    float32 sum)."""
    return float(np.float32(x))


class _Unigram:
    """openvino_tokenizers' UnigramTokenizerImpl: a Viterbi pass over the piece's bytes,
    starting tokens at character starts (by the UTF-8 lead byte's length), scores summed in
    float32; a character no token starts with costs the lowest score minus 10 as unk; the
    best path is read back from the end, runs of unk fused into one."""

    def __init__(self, vocab: list[bytes], scores: list[float], unk: int):
        self.tokens: dict[bytes, int] = {}
        for i, tok in enumerate(vocab):
            key = tok.split(b"\0", 1)[0]          # Darts keys are C strings
            self.tokens.setdefault(key, i)
        self.trie = _Trie(self.tokens)
        self.scores = [_f32(x) for x in scores]
        self.unk = unk
        self.unk_score = _f32(min(self.scores) - 10.0) if self.scores else -10.0
        self.cache: dict[bytes, list[int]] = {}

    def tokenize(self, text: bytes) -> list[int]:
        got = self.cache.get(text)
        if got is not None:
            return got
        n = len(text)
        if not n:
            return []
        best = [0.0] * (n + 1)
        start = [-1] * (n + 1)
        token = [self.unk] * (n + 1)
        prefixes, tokens, scores = self.trie.prefixes, self.tokens, self.scores
        at = 0
        while at < n:
            base = best[at]
            lead = text[at]
            step = min(1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4,
                       n - at)
            found = False
            end = at + 1
            while end <= n:
                part = text[at:end]
                if part not in prefixes:
                    break
                tid = tokens.get(part)
                if tid is not None:
                    cand = _f32(scores[tid] + base)
                    if start[end] == -1 or cand > best[end]:
                        best[end], start[end], token[end] = cand, at, tid
                    if end - at == step:
                        found = True
                end += 1
            if not found:
                target = at + step
                cand = _f32(self.unk_score + base)
                if start[target] == -1 or cand > best[target]:
                    best[target], start[target], token[target] = cand, at, self.unk
            at += step
        out, end, prev = [], n, -1
        while end > 0:
            tid = token[end]
            end = start[end]
            if tid == self.unk and prev == self.unk:
                continue
            out.append(tid)
            prev = tid
        out.reverse()
        if len(self.cache) < 20000:
            self.cache[text] = out
        return out


@dataclass(frozen=True)
class UnigramTokenizerAttrs:
    byte_fallback: bool = False
    unk_token_id: int = 0
    fuse_unk: bool = False
    min_score: float = float("inf")


@register("UnigramTokenizer", version="extension", attrs=UnigramTokenizerAttrs,
          category=CATEGORY)
class UnigramTokenizer:
    """SentencePiece Unigram: the best-scoring segmentation of each piece into vocabulary
    tokens (see _Unigram). byte_fallback, fuse_unk and min_score are read but, as in
    openvino_tokenizers, unused: unknown characters always become one fused unk. Inputs: the
    ragged string pieces (5), the vocabulary (begins, ends, chars), the scores (f32).
    Output: ragged ids."""

    @staticmethod
    def infer(attrs, *inputs):
        if len(inputs) != 9:
            fail(f"expected 9 inputs, got {len(inputs)}")
        if inputs[8].etype.name != "f32":
            fail(f"expected f32 scores, got {inputs[8].etype.name}")
        if not -2**31 <= attrs.unk_token_id < 2**31:
            fail(f"unk_token_id must be an i32 id, got {attrs.unk_token_id}")
        return _ragged_ids_infer(*inputs[:5])

    @staticmethod
    def run(attrs, *inputs):
        def build():
            vocab = _strings(*inputs[5:8], what="vocabulary")
            scores = np.asarray(inputs[8], dtype=np.float32).reshape(-1).tolist()
            if len(scores) < len(vocab):
                fail(f"expected a score per token, got {len(scores)} for {len(vocab)} tokens")
            return _Unigram(vocab, scores[:len(vocab)], attrs.unk_token_id)

        model = _cached("unigram" + repr(attrs), inputs[5:], build)
        return _tokenize_rows(*inputs[:5], model.tokenize)


# ---------------------------------------------------------------- post-processing

@dataclass(frozen=True)
class TruncateAttrs:
    m_num_inputs: int = 1


@register("Truncate", version="extension", attrs=TruncateAttrs, category=CATEGORY)
class Truncate:
    """Cut ragged rows to max_length (one input) or a pair of inputs to max_length together
    (only_first, only_second, longest_first), from the right or the left. Inputs: 1 or 2
    ragged tensors (3 each), max_length (i32 scalar), side ("left"/"right"), mode."""

    @staticmethod
    def infer(attrs, *inputs):
        num = 0
        for i in range(len(inputs) // 3):
            num += 1
            nxt = inputs[3 * (i + 1)] if 3 * (i + 1) < len(inputs) else None
            if nxt is not None and nxt.etype.name == "i32" and nxt.rank == 0:
                break
        else:
            fail("expected a scalar i32 max_length after the ragged inputs")
        if num not in (1, 2) or len(inputs) != 3 * num + 3:
            fail(f"expected 1 or 2 ragged inputs then max_length, side and mode, got "
                 f"{len(inputs)} inputs")
        out = []
        for i in range(num):
            out += [TensorSpec(inputs[3 * i].etype, inputs[3 * i].shape),
                    TensorSpec(inputs[3 * i + 1].etype, inputs[3 * i + 1].shape),
                    TensorSpec(inputs[3 * i + 2].etype, inputs[3 * i + 2].shape)]
        return out

    @staticmethod
    def run(attrs, *inputs):
        num = (len(inputs) - 3) // 3
        max_length = int(_one(inputs[-3], "max_length"))
        side = _text(inputs[-2]).decode("utf-8", "replace")
        mode = _text(inputs[-1]).decode("utf-8", "replace")
        if side not in ("left", "right"):
            fail(f"unknown truncation side '{side}' (expected left or right)")
        begins = [np.asarray(inputs[3 * i]).astype(np.int32, copy=True) for i in range(num)]
        ends = [np.asarray(inputs[3 * i + 1]).astype(np.int32, copy=True) for i in range(num)]
        for b, e in zip(begins, ends):
            if b.shape != e.shape:
                fail(f"expected ragged begins and ends of one shape, got {list(b.shape)} and "
                     f"{list(e.shape)}")
        if num == 1:
            length = np.minimum(ends[0].astype(np.int64) - begins[0], max_length)
            if side == "right":
                ends[0] = (begins[0] + length).astype(np.int32)
            else:
                begins[0] = (ends[0] - length).astype(np.int32)
        else:
            if mode not in ("only_first", "only_second", "longest_first"):
                fail(f"unknown truncation mode '{mode}'")
            if begins[0].size != begins[1].size:
                fail(f"expected two inputs with as many rows, got {begins[0].size} and "
                     f"{begins[1].size}")
            fb, fe, sb, se = (a.reshape(-1) for a in (begins[0], ends[0], begins[1], ends[1]))
            half, odd = max_length // 2, max_length % 2
            for i in range(fb.size):     # a row at a time, as openvino_tokenizers
                f, s = int(fe[i] - fb[i]), int(se[i] - sb[i])
                if f + s <= max_length:
                    continue
                fr, sr = odd * (f >= s), odd * (f < s)
                if mode == "only_first":
                    cut = (max_length if f > max_length else None), None
                elif mode == "only_second":
                    cut = None, (max_length if s > max_length else None)
                elif f >= half + odd and s <= half:
                    cut = max_length - s, None
                elif f < half + odd and s > half:
                    cut = None, max_length - f
                else:
                    cut = half + fr, half + sr
                for (b, e), k in zip(((fb, fe), (sb, se)), cut):
                    if k is None:
                        continue
                    if side == "right":
                        e[i] = b[i] + k
                    else:
                        b[i] = e[i] - k
        out = []
        for i in range(num):
            out += [begins[i], ends[i], np.asarray(inputs[3 * i + 2])]
        return tuple(out)


@register("CombineSegments", version="extension", attrs=NoAttrs, category=CATEGORY)
class CombineSegments:
    """Concatenate ragged segments row by row (a segment with one row is broadcast to every
    row: the special tokens), and give each element its segment's id. Inputs: n ragged
    tensors (3 each), then the n segment ids. Outputs: the ragged elements and the ragged
    segment ids."""

    @staticmethod
    def infer(attrs, *inputs):
        if len(inputs) < 4 or (len(inputs) - 1) % 3:
            fail(f"expected 3n + 1 inputs (n ragged tensors and the segment ids), got "
                 f"{len(inputs)}")
        n = (len(inputs) - 1) // 3
        shape = None
        etype = inputs[2].etype
        for i in range(n):
            _check_i32("ragged begins and ends", inputs[3 * i], inputs[3 * i + 1])
            if inputs[3 * i + 2].etype != etype:
                fail(f"expected the segments' elements of one type, got {etype.name} and "
                     f"{inputs[3 * i + 2].etype.name}")
            if inputs[3 * i + 2].rank not in (None, 1):
                fail(f"expected 1-D elements (input {3 * i + 2}) of a ragged tensor, got "
                     f"{inputs[3 * i + 2]}")
            if inputs[3 * i].rank:
                shape = inputs[3 * i].shape
        shape = shape if shape is not None else (DYNAMIC,)
        ids = inputs[-1].etype
        return [TensorSpec.make("i32", shape), TensorSpec.make("i32", shape),
                TensorSpec(etype, (DYNAMIC,)), TensorSpec.make("i32", shape),
                TensorSpec.make("i32", shape), TensorSpec(ids, (DYNAMIC,))]

    @staticmethod
    def run(attrs, *inputs):
        n = (len(inputs) - 1) // 3
        seg_ids = np.asarray(inputs[-1]).reshape(-1)
        if seg_ids.size != n:
            fail(f"expected {n} segment ids, got {seg_ids.size}")
        segs = []
        rows, shape = 0, None
        for i in range(n):
            elems = np.asarray(inputs[3 * i + 2])
            if elems.ndim != 1:
                fail(f"expected 1-D elements (input {3 * i + 2}) of a ragged tensor, got "
                     f"shape {list(elems.shape)}")
            b, e = _offsets(inputs[3 * i], inputs[3 * i + 1], elems.shape[0], "ragged")
            segs.append((b, e, elems))
            rows = max(rows, b.size)
            if np.asarray(inputs[3 * i]).ndim > 0:
                shape = np.asarray(inputs[3 * i]).shape
        for j, (b, _, _) in enumerate(segs):
            if b.size not in (1, rows):
                fail(f"expected each segment to have 1 row or as many as the batch ({rows}), "
                     f"got {b.size} in "
                     f"segment {j} (rows per segment: {[int(s[0].size) for s in segs]})")
        if shape is None or int(np.prod(shape)) != rows:
            fail(f"expected a segment of {rows} rows, got rows per segment "
                 f"{[int(s[0].size) for s in segs]}")
        # Per row: every segment's elements in order (vectorised over rows).
        lengths = np.stack([np.broadcast_to(e - b, (rows,)) for b, e, _ in segs], axis=1)
        row_len = lengths.sum(axis=1)
        row_end = np.cumsum(row_len)
        row_begin = row_end - row_len
        total = int(row_end[-1]) if rows else 0
        check_alloc([total], segs[0][2].dtype, "combined segments")
        out = np.empty((total,) + segs[0][2].shape[1:], dtype=segs[0][2].dtype)
        out_ids = np.empty(total, dtype=seg_ids.dtype)
        seg_start = row_begin[:, None] + np.cumsum(lengths, axis=1) - lengths
        for j, (b, e, elems) in enumerate(segs):
            src_b = np.broadcast_to(b, (rows,))
            ln = lengths[:, j]
            if not ln.sum():
                continue
            # flat source and destination indices of every element of segment j
            rep = np.repeat(np.arange(rows), ln)
            within = np.arange(int(ln.sum())) - np.repeat(np.cumsum(ln) - ln, ln)
            dst = seg_start[rep, j] + within
            out[dst] = elems[src_b[rep] + within]
            out_ids[dst] = seg_ids[j]
        rb = row_begin.astype(np.int32).reshape(shape)
        re_ = row_end.astype(np.int32).reshape(shape)
        return rb, re_, out, rb.copy(), re_.copy(), out_ids


@dataclass(frozen=True)
class RaggedToDenseAttrs:
    pad_right: bool = True
    m_pad_max_length: bool = False


def _target_length(target) -> int:
    t = int(_one(target, "target length"))
    if t < 0:
        fail(f"expected a target length >= 0, got {t}")
    return t


@register("RaggedToDense", version="extension", attrs=RaggedToDenseAttrs, category=CATEGORY)
class RaggedToDense:
    """Rows of a ragged tensor into a dense [rows, target] tensor padded with a value, and
    the mask (boolean). A row longer than target is cut to its first target elements;
    m_pad_max_length pads every row to target. Inputs: begins, ends, elements, target
    (0D or [1] integer), pad value, [pad_right (overrides the attribute)]."""

    @staticmethod
    def infer(attrs, begins, ends, elems, target, value, pad_right=None):
        _check_i32("ragged begins and ends", begins, ends)
        if target.etype.kind not in ("int", "uint"):
            fail(f"expected an integer target length, got {target.etype.name}")
        if value.etype != elems.etype:
            fail(f"expected a pad value of the elements' type {elems.etype.name}, got "
                 f"{value.etype.name}")
        if begins.shape is None or elems.shape is None:
            return [TensorSpec(elems.etype, None), TensorSpec.make("boolean", None)]
        dim = DYNAMIC
        if target.value is not None:
            dim = Dim.of(_target_length(target.value))
        shape = tuple(begins.shape) + (dim,) + tuple(elems.shape[1:])
        return [TensorSpec(elems.etype, shape), TensorSpec.make("boolean", shape)]

    @staticmethod
    def run(attrs, begins, ends, elems, target, value, pad_right=None):
        elems = np.asarray(elems)
        b, e = _offsets(begins, ends, elems.shape[0] if elems.ndim else 0, "ragged")
        t = _target_length(target)
        right = attrs.pad_right if pad_right is None else bool(_one(pad_right, "pad_right"))
        inner = elems.shape[1:]
        shape = tuple(np.asarray(begins).shape) + (t,) + inner
        check_alloc(list(shape), elems.dtype, "dense output")
        lengths = np.minimum(e - b, t)
        if attrs.m_pad_max_length:
            # openvino_tokenizers copies target elements from each row's begin, past its end.
            lengths = np.full_like(lengths, t)
            if b.size and int((b + t).max()) > elems.shape[0]:
                fail(f"m_pad_max_length reads {t} elements from each row, past the "
                     f"{elems.shape[0]} elements")
        pos = np.arange(t)
        if right:
            mask = pos[None, :] < lengths[:, None]
            src = b[:, None] + pos[None, :]
        else:
            pad = t - lengths
            mask = pos[None, :] >= pad[:, None]
            src = b[:, None] + pos[None, :] - pad[:, None]
        out = np.empty((b.size, t) + inner, dtype=elems.dtype)
        out[...] = _one(value, "pad value")
        out[mask] = elems[src[mask]]
        return out.reshape(shape), np.broadcast_to(
            mask.reshape(mask.shape + (1,) * len(inner)), (b.size, t) + inner).reshape(shape).copy()


# ---------------------------------------------------------------- detokenization

@dataclass(frozen=True)
class VocabDecoderAttrs:
    skip_tokens: tuple[int, ...] = ()


@register("VocabDecoder", version="extension", attrs=VocabDecoderAttrs, category=CATEGORY)
class VocabDecoder:
    """Token ids [B, T] into their vocabulary strings: a ragged string tensor with T pieces
    per row (one empty piece per row when T = 0). Ids in skip_tokens (or the optional input
    that replaces them) and ids past the vocabulary give empty pieces. Inputs: ids, the
    vocabulary (begins, ends, chars), [skip tokens]."""

    @staticmethod
    def infer(attrs, ids, vb, ve, vc, skip=None):
        if ids.rank is not None and ids.rank != 2:
            fail(f"expected ids of rank 2 [batch, tokens], got {ids}")
        if ids.etype.kind not in ("int", "uint"):
            fail(f"expected integer ids, got {ids.etype.name}")
        _check_i32("vocabulary begins and ends", vb, ve)
        _check_u8("vocabulary chars", vc)
        batch = (ids.shape[0],) if ids.shape is not None else (DYNAMIC,)
        return _ragged_string_specs(batch)

    @staticmethod
    def run(attrs, ids, vb, ve, vc, skip=None):
        ids = np.asarray(ids).astype(np.int64)
        vocab = _strings(vb, ve, vc, "vocabulary")
        skips = np.asarray(skip).reshape(-1) if skip is not None else np.array(attrs.skip_tokens)
        batch, seq = ids.shape
        # Deviation: a negative id reads outside the vocabulary in openvino_tokenizers;
        # irrun gives an empty piece, as for an id past its end.
        usable = (ids >= 0) & (ids < len(vocab)) & ~np.isin(ids, skips)
        pieces = np.empty(len(vocab) + 1, dtype=object)
        pieces[:-1] = vocab
        pieces[-1] = b""
        flat = np.where(usable, ids, len(vocab)).reshape(-1)
        per = max(seq, 1)
        parts = list(pieces[flat]) if seq else [b""] * batch
        begins, ends, chars = _pack(parts)
        rows = np.arange(batch, dtype=np.int32) * per
        return rows, rows + per, begins, ends, chars


@register("FuzeRagged", version="extension", attrs=NoAttrs, category=CATEGORY)
class FuzeRagged:
    """Each row of a ragged string tensor as one string spanning its pieces: begins of the
    first piece to ends of the last (the pieces must be contiguous, as VocabDecoder's are).
    Inputs: ragged begins, ends, begins, ends. Outputs: begins, ends."""

    @staticmethod
    def infer(attrs, rb, re_, begins, ends):
        _check_i32("ragged and string offsets", rb, re_, begins, ends)
        return [TensorSpec.make("i32", rb.shape), TensorSpec.make("i32", rb.shape)]

    @staticmethod
    def run(attrs, rb, re_, begins, ends):
        b = np.asarray(begins).reshape(-1)
        e = np.asarray(ends).reshape(-1)
        r0, r1 = _rows(rb, re_, b.size)
        last = np.where(r1 > r0, r1 - 1, r1)
        if r0.size and (int(r0.max(initial=0)) >= b.size or int(last.max(initial=0)) >= b.size):
            fail(f"expected rows inside the {b.size} pieces (an empty row past the last piece "
                 "has no string to point at)")
        shape = np.asarray(rb).shape
        return b[r0].astype(np.int32).reshape(shape), e[last].astype(np.int32).reshape(shape)


def _piece_to_byte(token: bytes) -> int:
    """SentencePiece's PieceToByte: <0x00>..<0xFF> (upper-case hex) to the byte, else -1
    (which openvino_tokenizers stores as 0xFF)."""
    if token[:3] == b"<0x" and all(c in b"0123456789ABCDEF" for c in token[3:5]):
        return int(token[3:5], 16)
    return 0xFF


@register("ByteFallback", version="extension", attrs=NoAttrs, category=CATEGORY)
class ByteFallback:
    """Byte pieces <0xXX> into their byte; any other string unchanged. A six-byte string
    of the form <....> that is not a byte piece becomes the byte 0xFF, as in
    openvino_tokenizers. Inputs and outputs: begins, ends, chars."""

    @staticmethod
    def infer(attrs, begins, ends, chars):
        return _normalization_infer(attrs, begins, ends, chars)

    @staticmethod
    def run(attrs, begins, ends, chars):
        def one(token: bytes) -> bytes:
            if len(token) == 6 and token[0] == 0x3C and token[5] == 0x3E:
                return bytes([_piece_to_byte(token)])
            return token

        return _pack([one(t) for t in _strings(begins, ends, chars)], np.asarray(begins).shape)


def _utf8_repair(data: bytes, replace: bool) -> bytes:
    """openvino_tokenizers' UTF8Validate state machine: lead bytes announce 1-3 continuation
    bytes; a broken sequence gives one U+FFFD (replace) or nothing and its next byte is read
    again as a lead; an overlong sequence gives one U+FFFD per byte. Surrogates and code
    points past U+10FFFF (F5..F7 leads) pass, as there."""
    try:
        data.decode("utf-8")
        return data                      # valid UTF-8 is valid there too
    except UnicodeDecodeError:
        pass
    bad = b"\xef\xbf\xbd" if replace else b""
    out = bytearray()
    starts = (0, 0x80, 0x800, 0x10000)
    j, n = 0, len(data)
    need = size = cp = 0
    while j < n:
        c = data[j]
        if not need:
            if c < 0x80:
                out.append(c)
            elif c >> 5 == 0b110:
                size, need, cp = 2, 1, (c & 0x1F) << 6
            elif c >> 4 == 0b1110:
                size, need, cp = 3, 2, (c & 0x0F) << 12
            elif c >> 3 == 0b11110:
                size, need, cp = 4, 3, (c & 0x07) << 18
            else:
                out += bad
            j += 1
            continue
        if c >> 6 != 0b10:
            need = 0
            out += bad
            continue                     # the byte is read again as a lead
        need -= 1
        cp |= (c & 0x3F) << (6 * need)
        if not need:
            if cp < starts[size - 1]:
                out += bad * size
            else:
                out += data[j + 1 - size:j + 1]
            cp = 0
        j += 1
    if need and replace:
        out += bad
    return bytes(out)


@dataclass(frozen=True)
class UTF8ValidateAttrs:
    replace_mode: bool = False


@register("UTF8Validate", version="extension", attrs=UTF8ValidateAttrs, category=CATEGORY)
class UTF8Validate:
    """Repair invalid UTF-8 in each string: replace_mode puts U+FFFD where a sequence
    breaks, else the broken bytes are dropped. Inputs and outputs: begins, ends, chars."""

    @staticmethod
    def infer(attrs, begins, ends, chars):
        return _normalization_infer(attrs, begins, ends, chars)

    @staticmethod
    def run(attrs, begins, ends, chars):
        parts = [_utf8_repair(p, attrs.replace_mode) for p in _strings(begins, ends, chars)]
        return _pack(parts, np.asarray(begins).shape)


# ---------------------------------------------------------------- GPT-2's byte alphabet

def _byte_alphabet() -> list[bytes]:
    """GPT-2's bytes_to_unicode as UTF-8: printable bytes stand for themselves, the other 68
    for U+0100 onwards, in byte order."""
    keep = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, extra = [], 0
    for byte in range(256):
        if byte in keep:
            table.append(chr(byte).encode("utf-8"))
        else:
            table.append(chr(256 + extra).encode("utf-8"))
            extra += 1
    return table


_ALPHABET = _byte_alphabet()
_ALPHABET_BACK = {c: bytes([b]) for b, c in enumerate(_ALPHABET)}


@register("BytesToChars", version="extension", attrs=NoAttrs, category=CATEGORY)
class BytesToChars:
    """Each byte of each piece as its GPT-2 alphabet character (byte-level BPE's input side,
    written by older openvino_tokenizers); pieces marked in skips pass unchanged. Inputs and
    outputs: the ragged string pieces (5), [skips]."""

    @staticmethod
    def infer(attrs, rb, re_, begins, ends, chars, skips=None):
        out = _ragged_split_infer(rb, re_, begins, ends, chars)
        if skips is not None:
            out.append(TensorSpec(skips.etype, skips.shape))
        return out

    @staticmethod
    def run(attrs, rb, re_, begins, ends, chars, skips=None):
        parts = _strings(begins, ends, chars)
        _rows(rb, re_, len(parts))
        skip = _skips_or_none(skips)
        # (openvino_tokenizers rewrites only the pieces its rows reach; the rows of a
        # tokenizer cover every piece)
        new = [p if skip is not None and skip[i] else b"".join(_ALPHABET[c] for c in p)
               for i, p in enumerate(parts)]
        b, e, c = _pack(new, np.asarray(begins).shape)
        out = (np.asarray(rb), np.asarray(re_), b, e, c)
        return out if skips is None else out + (np.asarray(skips),)


@register("CharsToBytes", version="extension", attrs=NoAttrs, category=CATEGORY)
class CharsToBytes:
    """GPT-2 alphabet characters back into bytes, the pieces of each row joined into one
    string (byte-level BPE's detokenizer, written by older openvino_tokenizers). A one-byte
    character stays; a two-byte one is its alphabet byte. Characters outside the alphabet
    read an unset table entry in openvino_tokenizers (undefined); irrun keeps their bytes.
    Inputs: the ragged string pieces (5). Outputs: begins, ends, chars, one string per row."""

    @staticmethod
    def infer(attrs, rb, re_, begins, ends, chars):
        _ragged_split_infer(rb, re_, begins, ends, chars)
        return _string_specs(rb.shape)

    @staticmethod
    def run(attrs, rb, re_, begins, ends, chars):
        parts = _strings(begins, ends, chars)
        r0, r1 = _rows(rb, re_, len(parts))
        rows = []
        for x, y in zip(r0.tolist(), r1.tolist()):
            data, out, k = b"".join(parts[x:y]), bytearray(), 0
            while k < len(data):
                if data[k] < 0x80:
                    out.append(data[k])
                    k += 1
                    continue
                pair = data[k:k + 2]
                out += _ALPHABET_BACK.get(pair, pair)
                k += 2
            rows.append(bytes(out))
        return _pack(rows, np.asarray(rb).shape)
