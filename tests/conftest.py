"""Shared test setup: hypothesis profiles and small helpers."""
import os

from hypothesis import HealthCheck, settings

# CI runs a modest, fixed number of examples; IRRUN_HYPOTHESIS_PROFILE=long for local fuzzing.
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("IRRUN_HYPOTHESIS_PROFILE", "ci"))
