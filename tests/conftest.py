"""Hypothesis profiles for the property tests (tests/core/test_properties.py).

* ``ci`` (default): fast enough for every push.
* ``deep``: long runs, e.g. nightly: ``HYPOTHESIS_PROFILE=deep .venv/bin/python -m pytest tests/core/test_properties.py``.
* ``mutation``: ``ci`` drawing the same examples every run, keeping none between runs (a mutant
  is killed or not whatever ran before it) and not shrinking a failing example (a failure is
  all mutation testing needs); tests/mutation.py sets it.
"""

import os

from hypothesis import HealthCheck, Phase, settings

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
settings.register_profile("mutation", parent=settings.get_profile("ci"), derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.generate])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
