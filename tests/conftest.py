"""Hypothesis profiles for the property tests (tests/core/test_properties.py).

* ``ci`` (default): fast enough for every push.
* ``deep``: long runs, e.g. nightly: ``HYPOTHESIS_PROFILE=deep .venv/bin/python -m pytest tests/core/test_properties.py``.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "deep",
    max_examples=2000,
    stateful_step_count=120,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
