"""Fuzzing the loader, the validator and the executor with mutated IR files.

Seed models are written by OpenVINO's ov.save_model (plus every model in models/). Each
case applies 1-3 seeded random mutations: delete, duplicate, swap or truncate lines, change
a number or an attribute value, corrupt the .bin; one case in five also sets a size-driving
attribute (num_splits, kernel, pads, strides, ...) to a huge value. Then:

- irrun.validate() never raises and returns Diagnostics, none of them an "internal" error;
- irrun.read_model() either returns a Model or raises an IrrunError, exactly when
  validate() reported an error;
- Model.infer() on random inputs either succeeds or raises an IrrunError that is not an
  "internal error" (a kernel bug);
- each case ends within a time bound (SIGALRM), with a small IRRUN_MAX_BYTES so a
  mutated shape cannot eat the machine.

The default run is modest (FUZZ_DEFAULT cases); IRRUN_FUZZ_EXAMPLES=N runs N cases in the
slow variant: `IRRUN_FUZZ_EXAMPLES=5000 python -m pytest -m slow tests/test_fuzz.py`, from
case 10,000 on (IRRUN_FUZZ_FIRST=K starts elsewhere, for a campaign of new cases).
IRRUN_FUZZ_SAVE=DIR keeps the file of every failing case there.
"""
from __future__ import annotations

import collections
import os
import random
import re
import signal
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from fuzzing import check_mutant, failure, fuzz

import irrun
from irrun.run.feed import sample_inputs_for
from irrun.run.feed import load_npz
from irrun.ir.registry import all_ops

ov = pytest.importorskip("openvino")
if not hasattr(signal, "SIGALRM"):
    pytest.skip("the per-case time bound needs SIGALRM (POSIX)", allow_module_level=True)

FUZZ_DEFAULT = 400
CASE_SECONDS = 20          # generous: a case normally takes milliseconds
MAX_BYTES = str(16 << 20)  # IRRUN_MAX_BYTES while fuzzing
# IRRUN_FUZZ_INDEPENDENT_DIMS=1: every dynamic dim of every input gets its own random size.
INDEPENDENT_DIMS = bool(os.environ.get("IRRUN_FUZZ_INDEPENDENT_DIMS"))
ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ seed models

def _seed_models(directory: Path) -> list[Path]:
    import openvino.opset8 as o
    import openvino.opset3 as o3
    import openvino.opset6 as o6
    import openvino.opset12 as o12   # its range() is Range-4 (opset4's writes Range-1)

    f32, i32, i64 = ov.Type.f32, ov.Type.i32, ov.Type.i64
    models = {}

    x = o.parameter([2, 5, 4], f32, name="logits")
    ctc = o6.ctc_greedy_decoder_seq_len(x, o.constant(np.array([5, 3], np.int32)),
                                        o.constant(np.array(3, np.int32)), merge_repeated=True)
    b = o3.bucketize(x, o.constant(np.array([-1.0, 0.0, 0.5, 2.0], np.float32)), "i32", True)
    models["seq"] = ov.Model([o.result(ctc.output(0)), o.result(ctc.output(1)), o.result(b)],
                             [x], "seq")

    ids = o.parameter([4], i32, name="ids")
    table = o.constant(np.arange(18, dtype=np.float32).reshape(6, 3) / 7)
    ess = o3.embedding_segments_sum(table, ids, o.constant(np.array([0, 0, 2, 3], np.int32)),
                                    o.constant(np.array(5, np.int32)),
                                    o.constant(np.array(1, np.int32)),
                                    o.constant(np.array([1, 0.5, 2, -1], np.float32)))
    models["ess"] = ov.Model([o.result(ess)], [ids], "ess")

    idx = o.parameter([-1], i64, name="idx")
    seg = o.parameter([-1], i64, name="seg")
    n = o.parameter([], i64, name="n")
    ess2 = o3.embedding_segments_sum(o.constant(np.ones((5, 2), np.float32)), idx, seg, n)
    models["ess_dynamic"] = ov.Model([o.result(ess2)], [idx, seg, n], "ess_dynamic")

    x = o.parameter([-1, 4], f32, name="x")
    h = o.relu(o.add(o.matmul(x, o.constant(np.linspace(-1, 1, 32, dtype=np.float32)
                                            .reshape(4, 8)), False, False),
                     o.constant(np.full(8, 0.1, np.float32))))
    y = o.softmax(o.matmul(h, o.constant(np.ones((8, 3), np.float32)), False, False), 1)
    batch = o.gather(o.shape_of(x), o.constant(np.array([0], np.int64)),
                     o.constant(np.array(0, np.int64)))
    shape = o.concat([batch, o.constant(np.array([3, 1], np.int64))], 0)
    r = o.reshape(y, shape, False)
    models["mlp"] = ov.Model([o.result(r), o.result(o.convert(y, "f16"))], [x], "mlp")

    x = o.parameter([2, -1, 3], f32, name="x")
    length = o.gather(o.shape_of(x), o.constant(np.array(1, np.int64)),
                      o.constant(np.array(0, np.int64)))
    rng = o12.range(o.constant(np.array(0, np.int64)), length,
                   o.constant(np.array(1, np.int64)), "i64")
    t = o.tile(o.transpose(x, o.constant(np.array([2, 0, 1], np.int64))),
               o.constant(np.array([1, 2, 1], np.int64)))
    s = o.reduce_sum(t, o.constant(np.array([0], np.int64)), True)
    top = o.topk(o.squeeze(s, o.constant(np.array([0], np.int64))), o.constant(np.array(2, np.int64)),
                 1, "max", "value")
    sel = o.select(o.greater(x, o.constant(np.float32(0))), x, o.negative(x))
    parts = o.split(sel, o.constant(np.array(0, np.int64)), 2)
    bc = o.broadcast(o.constant(np.array([1.0, 2.0, 3.0], np.float32)),
                     o.constant(np.array([2, 3], np.int64)))
    models["shape"] = ov.Model([o.result(rng), o.result(top.output(0)), o.result(top.output(1)),
                                o.result(parts.output(0)), o.result(bc)], [x], "shape")

    x = o.parameter([1, 2, 6, 6], f32, name="image")
    c = o.convolution(x, o.constant(np.linspace(-1, 1, 36, dtype=np.float32).reshape(2, 2, 3, 3)),
                      [1, 1], [1, 1], [1, 1], [1, 1])
    p = o.max_pool(c, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2])
    a = o.avg_pool(c, [1, 1], [0, 0], [0, 0], [2, 2], True)
    models["conv"] = ov.Model([o.result(p.output(0)), o.result(a)], [x], "conv")

    paths = []
    for i, (name, model) in enumerate(models.items()):
        path = directory / f"{name}.xml"
        ov.save_model(model, str(path), compress_to_fp16=bool(i % 2))
        paths.append(path)
    paths += sorted((ROOT / "models").glob("**/*.xml"))
    return paths


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    directory = tmp_path_factory.mktemp("seeds")
    paths = _seed_models(directory)
    seeds = []
    for xml in paths:
        bin_path = xml.with_suffix(".bin")
        blob = bin_path.read_bytes() if bin_path.exists() else b""
        name = f"{xml.parent.name}/{xml.name}"
        seeds.append((name, xml.read_text(), blob))
        SAMPLES[name] = sample_inputs_for(str(xml))
    return seeds


SAMPLES: dict[str, str | None] = {}   # seed name -> its shipped sample inputs, if any


def test_seeds_load_and_run(seeds, tmp_path):
    """Unmutated seeds work, so mutations start from a good model."""
    for name, text, blob in seeds:
        xml = _write(tmp_path, text, blob)
        assert not [d for d in irrun.validate(xml) if d.severity == "error"], name
        model = irrun.read_model(xml)
        sample = SAMPLES.get(name)
        model.infer(load_npz(sample) if sample else _feed(model, random.Random(0)))


# ------------------------------------------------------------------ mutations

INTERESTING_NUMBERS = ["0", "1", "-1", "-2", "2", "3", "7", "255", "256", "65535", "2147483647",
                       "2147483648", "4294967296", "9223372036854775807", "9223372036854775808",
                       "1000000", "1000000000", "1000000000000", "100000000000000000000000000000",
                       "0.5", "-0.0", "1e38", "nan", "9" * 5000]
INTERESTING_VALUES = ["", " ", "0", "-1", "1", "abc", "f32", "f16", "i64", "i32", "u1", "u4",
                      "boolean", "bf16", "string", "nf4", "undefined", "dynamic", "?", "...",
                      "-1,-1", "1..3", "..5", "2..", "2,3", "1,?,3", "[]", "true", "false",
                      "opset1", "opset3", "opset99", "extension", "Parameter", "Const", "Result",
                      "999999999999", "1e400", "nan", "sum", "mean", "max", "explicit",
                      "same_upper", "valid", "numpy", "none", "value", "index", "i32,i64"]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
ATTRIBUTE = re.compile(r'([\w:-]+)="([^"]*)"')


def _mutate_text(text: str, rng: random.Random, log: list) -> str:
    lines = text.split("\n")
    kind = rng.choice(["delete", "duplicate", "swap", "truncate", "number", "number", "number",
                       "attribute", "attribute", "attribute", "op type"])
    i = rng.randrange(len(lines))
    if kind == "op type":
        # Another registered op on the same ports: shape rules and kernels meet inputs,
        # attributes and arities they were not written for.
        layers = list(re.finditer(r'type="(\w+)" version="(opset\d+)"', text))
        if not layers:
            return text
        m = rng.choice(layers)
        new = rng.choice(sorted({(op.type, op.since) for op in all_ops() if op.since}))
        log.append(f"op type {m.group(1)}-{m.group(2)} -> {new[0]}-opset{new[1]}")
        return text[:m.start()] + f'type="{new[0]}" version="opset{new[1]}"' + text[m.end():]
    if kind == "delete":
        log.append(f"delete line {i + 1}: {lines[i].strip()[:60]}")
        del lines[i]
    elif kind == "duplicate":
        log.append(f"duplicate line {i + 1}: {lines[i].strip()[:60]}")
        lines.insert(i, lines[i])
    elif kind == "swap":
        j = rng.randrange(len(lines))
        log.append(f"swap lines {i + 1} and {j + 1}")
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "truncate":
        cut = rng.randrange(len(lines[i]) + 1)
        log.append(f"truncate line {i + 1} at {cut}: {lines[i].strip()[:60]}")
        lines[i] = lines[i][:cut]
    else:
        pattern = NUMBER if kind == "number" else ATTRIBUTE
        found = list(pattern.finditer(text))
        if not found:
            return text
        m = rng.choice(found)
        if kind == "number":
            try:   # an earlier mutation may have left "1e400" here: int(float()) would overflow
                near = str(int(m.group()) + rng.choice([-1, 1]))
            except ValueError:
                near = "0"
            new = near if rng.random() < 0.3 else rng.choice(INTERESTING_NUMBERS)
            log.append(f"number {m.group()!r} at offset {m.start()} -> {new[:40]!r}")
            return text[:m.start()] + new + text[m.end():]
        others = [a.group(2) for a in found]
        new = rng.choice(INTERESTING_VALUES + [rng.choice(others)])
        if m.group(1) == "type" and rng.random() < 0.7:
            new = rng.choice(sorted({op.type for op in all_ops()}))   # another op, same ports
        elif m.group(1) == "version" and rng.random() < 0.7:
            new = f"opset{rng.randint(1, 16)}"
        log.append(f"attribute {m.group(1)}={m.group(2)[:40]!r} at offset {m.start()} -> "
                   f"{new[:40]!r}")
        return text[:m.start(2)] + new + text[m.end(2):]
    return "\n".join(lines)


# Attributes that set how much work or memory a layer takes (a 955-byte file with
# num_splits=10000000 once took 124 s and 6 GB). Set to huge values, they must be refused against
# the memory budget, or run within the time bound.
SIZE_ATTRIBUTES = ("num_splits", "kernel", "pads_begin", "pads_end", "strides", "dilations",
                   "axis", "group", "k", "depth", "output_padding", "shape")
HUGE = ["10000000", "100000", "65537", "2147483647", "4294967295", "1000000000000"]


def _mutate_size(text: str, rng: random.Random, log: list) -> str:
    found = [m for m in ATTRIBUTE.finditer(text) if m.group(1) in SIZE_ATTRIBUTES]
    if not found:
        return text
    m = rng.choice(found)
    parts = m.group(2).split(",") if m.group(2) else ["1"]
    huge = rng.choice(HUGE)
    if rng.random() < 0.5:
        parts = [huge] * len(parts)
    else:
        parts[rng.randrange(len(parts))] = huge
    new = ",".join(parts)
    log.append(f"size attribute {m.group(1)}={m.group(2)[:40]!r} -> {new[:40]!r}")
    return text[:m.start(2)] + new + text[m.end(2):]


def _mutate_bin(blob: bytes, rng: random.Random, log: list) -> bytes:
    data = bytearray(blob)
    kind = rng.choice(["flip", "word", "nan", "truncate", "extend"] if data else ["extend"])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            k = rng.randrange(len(data))
            data[k] ^= 1 << rng.randrange(8)
        log.append("bin: flip bits")
    elif kind == "word":
        k = rng.randrange(0, max(1, len(data) - 8) + 1) & ~3
        word = rng.choice([-1, -2**31, 2**31 - 1, 2**62, 10**6, 7, 0x7FC00000, 0xFF800000])
        data[k:k + 8] = int(word).to_bytes(8, "little", signed=True)[:len(data[k:k + 8])]
        log.append(f"bin: word {word} at {k}")
    elif kind == "nan":
        k = rng.randrange(len(data)) & ~3
        data[k:k + 4] = b"\xff\xff\xff\xff"[:len(data[k:k + 4])]
        log.append(f"bin: 0xffffffff at {k}")
    elif kind == "truncate":
        cut = rng.randrange(len(data))
        log.append(f"bin: truncate to {cut}")
        del data[cut:]
    else:
        log.append("bin: extend")
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(data)


# ------------------------------------------------------------------ one case

def _write(directory: Path, text: str, blob: bytes) -> Path:
    xml = directory / "model.xml"
    xml.write_text(text)
    (directory / "model.bin").write_bytes(blob)
    return xml


def _feed(model, rng: random.Random, independent: bool = False) -> dict:
    """Random inputs that fit the model's inputs. Unbounded dynamic dims all get the same
    size (like a batch or sequence length shared by several inputs) unless `independent`."""
    feed = {}
    shared = rng.randint(1, 3)
    for info in model.inputs:
        if info.shape is None:
            dims = [2]
        else:
            dims = []
            for d in info.shape:
                if d.is_static:
                    dims.append(d.value)
                else:
                    lo, hi = max(d.lo, 1), d.hi if d.hi is not None else max(d.lo, 1) + 3
                    if not independent and d.contains(shared):
                        dims.append(shared)
                    else:
                        dims.append(rng.randint(min(lo, hi), max(lo, hi)) if lo <= hi else d.lo)
        count = int(np.prod(dims, dtype=np.float64))
        if count > 1_000_000:
            return None
        np_rng = np.random.default_rng(rng.randrange(2**32))
        et = irrun.ir.etypes.element_type(info.element_type)
        if et.kind == "bool":
            value = np_rng.random(dims) < 0.5
        elif et.kind == "string":      # a tokenizer's text: short words from a few letters
            words = np.array(["", "a", "ab c", "the cat", "\u00e9t\u00e9 1"], dtype=object)
            value = np.asarray(words[np_rng.integers(0, len(words), size=dims)], dtype=object)
        elif et.is_float:
            value = np_rng.standard_normal(dims).astype(np.float32)
        else:
            # Small ids, and scalars (counts such as num_segments) above them, so that an
            # unmutated seed runs; mutations make the values wrong often enough.
            value = np_rng.integers(0, 3, size=dims) if dims else np.array(3)
            value = value.astype(np.int64).clip(*irrun.run.feed._range(et))
        feed[info.name] = value
    return feed


def _mutate_feed(feed: dict, model, rng: random.Random, log: list) -> dict:
    """A feed that is wrong in one way: a name, a dtype, a shape or a value."""
    feed = dict(feed)
    kind = rng.choice(["drop", "extra", "dtype", "dtype", "shape", "value", "list"])
    name = rng.choice(list(feed)) if feed else None
    if kind == "drop" and name:
        del feed[name]
    elif kind == "extra" or name is None:
        feed[rng.choice(["", "x", "not_an_input", "0"])] = np.zeros(2)
    elif kind == "dtype":
        dtype = rng.choice(["f8", "f4", "f2", "i8", "i4", "u1", "?", "c8", "U3", "S2", "O", "V2",
                            "bfloat16", "M8[s]"])
        dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
        try:
            feed[name] = np.asarray(feed[name]).astype(dtype)
        except (ValueError, TypeError):
            feed[name] = np.zeros(np.shape(feed[name]), dtype)
    elif kind == "shape":
        shape = list(np.shape(feed[name]))
        op = rng.choice(["add", "drop", "grow"])
        if op == "add" or not shape:
            shape.insert(rng.randrange(len(shape) + 1), rng.choice([0, 1, 2]))
        elif op == "drop":
            shape.pop(rng.randrange(len(shape)))
        else:
            shape[rng.randrange(len(shape))] += rng.choice([-1, 1, 5])
        feed[name] = np.zeros([max(d, 0) for d in shape], np.asarray(feed[name]).dtype)
    elif kind == "value":
        a = np.array(feed[name])
        if a.dtype.kind == "f":
            choices = [-1.0, 1e6, 1e30, np.nan, np.inf, -np.inf]
        elif a.dtype.kind == "b":
            choices = [True, False]
        else:   # integer feeds are int64 here; irrun range-checks them against the input type
            choices = [-1, -2**31, 2**31 - 1, 2**40, 10**6, 255]
        if a.size:
            a.reshape(-1)[rng.randrange(a.size)] = rng.choice(choices)
        feed[name] = a
    else:
        feed[name] = np.asarray(feed[name]).tolist()
    log.append(f"feed: {kind} {name!r}")
    return feed


OUTCOMES: collections.Counter = collections.Counter()


def run_case(seed: int, seeds, directory: Path) -> str | None:
    """One mutated model through validate, read_model and infer; a failure description or None."""
    rng = random.Random(seed)
    name, text, blob = seeds[rng.randrange(len(seeds))]
    log = [f"seed model {name}"]
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if blob and rng.random() < 0.3:
            blob = _mutate_bin(blob, rng, log)
        else:
            text = _mutate_text(text, rng, log)
    # Its own random stream, so the cases drawn before this mutation existed stay the same.
    sizes = random.Random(seed ^ 0x5172E5)
    if sizes.random() < 0.2:
        text = _mutate_size(text, sizes, log)
    xml = _write(directory, text, blob)

    def feed_for(model):
        feed = _feed(model, rng, INDEPENDENT_DIMS)
        if feed is not None and rng.random() < 0.25:
            return _mutate_feed(feed, model, rng, log), "infer with a bad feed"
        return feed, "infer"

    def describe(stage, message, exc):
        return failure(seed, log, stage, message, xml, exc, saved_as=f"case{seed}")
    return check_mutant(xml, feed_for, OUTCOMES, seconds=CASE_SECONDS, describe=describe)


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setenv("IRRUN_MAX_BYTES", MAX_BYTES)


def fuzz_cases(seeds, directory, first: int, count: int) -> None:
    # Many mutants load and run to the end, many others are rejected.
    fuzz(lambda seed: run_case(seed, seeds, directory), OUTCOMES, first, count,
         least_ran=0.1, least_rejected=0.2)


def test_fuzz(seeds, tmp_path, small_limit):
    fuzz_cases(seeds, tmp_path, 0, FUZZ_DEFAULT)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("IRRUN_FUZZ_EXAMPLES"),
                    reason="a long campaign: set IRRUN_FUZZ_EXAMPLES=N")
def test_fuzz_long(seeds, tmp_path, small_limit):
    first = int(os.environ.get("IRRUN_FUZZ_FIRST", 10_000))
    fuzz_cases(seeds, tmp_path, first, int(os.environ["IRRUN_FUZZ_EXAMPLES"]))
