"""Shared test setup: hypothesis profiles and small helpers."""
import functools
import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# CI runs a modest, fixed number of examples; IRRUN_HYPOTHESIS_PROFILE=long for local fuzzing.
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("IRRUN_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def without_llvmlite(monkeypatch):
    """This process as one where llvmlite cannot be imported: nothing compiled yet, the
    CPU's features not asked yet (irrun.opkit.llvm keeps both per process once known)."""
    from irrun.opkit import llvm

    monkeypatch.setitem(sys.modules, "llvmlite.binding", None)    # import fails
    monkeypatch.setattr(llvm, "_compiled", {})
    monkeypatch.setattr(llvm, "_host_features",
                        functools.lru_cache(maxsize=1)(llvm._host_features.__wrapped__))
