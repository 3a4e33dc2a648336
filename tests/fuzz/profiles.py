"""Hypothesis settings for the fuzz tier, chosen by the NODEGATE_FUZZ environment variable.

* `ci` (default; `make test`): derandomized, so every run tries the same examples and a
  failure is reproducible from the test name alone; few examples, a few seconds in all.
* `long` (`make fuzz`): random, many examples, failures saved in .hypothesis/ and replayed
  first on the next run.

The profiles are applied per test (`@fuzz`), not loaded globally, so the other tiers'
hypothesis tests keep their own settings.
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

_COMMON = settings(
    # Bounded time is part of every property: an input that takes seconds is a finding. The
    # bound is generous because the machine running `make test` may be busy.
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("nodegate-ci", _COMMON, max_examples=60, derandomize=True, database=None)
settings.register_profile("nodegate-long", _COMMON, max_examples=4_000)

PROFILE = os.environ.get("NODEGATE_FUZZ", "ci")
fuzz = settings.get_profile(f"nodegate-{PROFILE}")
"""Decorator for every property of the tier: `@fuzz` above `@given(...)`."""
