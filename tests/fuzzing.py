"""What the fuzz tests share: one mutated model through validate, read_model and infer, the
verdict on it, and the loop over a range of cases.

tests/test_fuzz.py mutates IR files as text and bytes, tests/test_fuzz_attrs.py mutates op
attributes and values; both hold every mutant to the same promise: a located diagnostic or
error, or a run to the end, within a time bound, never a crash or an internal error.
"""
from __future__ import annotations

import collections
import os
import shutil
import signal
import traceback
from pathlib import Path

import irrun
from irrun.errors import Diagnostic, IrrunError


class CaseTimeout(BaseException):   # not swallowed by a catch-all in irrun
    pass


def check_mutant(xml: Path, feed_for, outcomes: collections.Counter, *, seconds: int,
                 describe) -> str | None:
    """Run the mutant at `xml`; None when irrun kept its promise, else what went wrong, made
    by describe(stage, message, exc).

    feed_for(model) gives (feed, stage): the inputs for infer (None when they would be too
    large to make) and the stage's name in a failure ("infer", or what the feed's mutation
    makes of it). Outcomes are counted in `outcomes`, so that a test can check the cases
    were not all rejected (or all run)."""
    stage = "validate"

    def alarm(signum, frame):
        raise CaseTimeout(f"the case took longer than {seconds} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        diags = irrun.validate(xml)
        assert isinstance(diags, list) and all(isinstance(d, Diagnostic) for d in diags)
        internal = [str(d) for d in diags if d.code == "internal"]
        if internal:
            return describe(stage, "\n".join(internal), None)
        errors = [d for d in diags if d.severity == "error"]
        stage = "read_model"
        try:
            model = irrun.read_model(xml)
        except IrrunError:
            if not errors:
                raise
            outcomes["rejected"] += 1
            return None
        if errors:
            return describe(stage, "read_model accepted a model validate() rejects:\n"
                            + "\n".join(map(str, errors)), None)
        stage = "infer"
        feed, stage = feed_for(model)
        if feed is None:
            outcomes["inputs too large"] += 1
            return None
        try:
            model.infer(feed)
        except IrrunError as e:
            if "internal error" in str(e):
                return describe(stage, str(e), e)
            outcomes["run error"] += 1
            return None
        outcomes["ran"] += 1
        return None
    except CaseTimeout as e:
        return describe(stage, str(e), e)
    except Exception as e:   # noqa: BLE001 - anything else is a crash
        return describe(stage, f"{type(e).__name__}: {e}", e)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def failure(seed: int, log: list[str], stage: str, message: str, xml: Path, exc=None, *,
            saved_as: str) -> str:
    """A failed case in one text: its seed, its mutations, the stage, the message and where
    in irrun it was raised. With IRRUN_FUZZ_SAVE=DIR the model is kept as DIR/<saved_as>."""
    save = os.environ.get("IRRUN_FUZZ_SAVE")
    if save:
        target = Path(save) / saved_as
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(xml, target / "model.xml")
        shutil.copy(xml.with_suffix(".bin"), target / "model.bin")
    where = ""
    if exc is not None:
        tb = traceback.extract_tb(exc.__traceback__)
        cause = exc.__cause__ or exc.__context__
        if cause is not None and cause.__traceback__ is not None:
            tb = traceback.extract_tb(cause.__traceback__)
        if tb:
            where = f" [{tb[-1].filename}:{tb[-1].lineno}]"
    return f"case {seed} ({'; '.join(log)}) at {stage}: {message}{where}"


def fuzz(run_case, outcomes: collections.Counter, first: int, count: int, *,
         least_ran: float, least_rejected: float) -> None:
    """Cases first .. first + count - 1, every failure in one assertion; and not vacuous: at
    least those shares of the cases ran to the end and were rejected."""
    failures = []
    outcomes.clear()
    for seed in range(first, first + count):
        problem = run_case(seed)
        if problem:
            failures.append(problem)
    assert not failures, f"{len(failures)} of {count} cases failed:\n" + "\n".join(failures)
    assert (outcomes["ran"] >= int(count * least_ran)
            and outcomes["rejected"] >= int(count * least_rejected)), outcomes
