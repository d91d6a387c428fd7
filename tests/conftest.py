"""Hypothesis profiles for the property tests (tests/core/test_properties.py).

* ``ci`` (default): fast enough for every push.
* ``deep``: long runs, e.g. nightly: ``HYPOTHESIS_PROFILE=deep .venv/bin/python -m pytest tests/core/test_properties.py``.
* ``mutation``: ``ci`` drawing the same examples every run, keeping none between runs (a mutant
  is killed or not whatever ran before it) and not shrinking a failing example (a failure is
  all mutation testing needs); tests/support/mutation.py sets it.
"""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

# The tests' helper modules (tests/support/: paths, server_harness, observe_harness, ...) are
# imported by their bare names (``from server_harness import ServerProcess``) from any wing's tests.
SUPPORT = str(Path(__file__).resolve().parent / "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)

# The files that take longest, longest first. xdist hands each worker whole files in the order
# collected (addopts: --no-loadscope-reorder, which would put the files with most tests first):
# started first, a long file runs beside the short ones, which fill in around it; started last,
# it would run alone at the end and decide the length of the whole run.
LONGEST_FIRST = ("tla/test_tla.py", "core/test_mutation_sample.py", "verify/test_peer_librdkafka_mock.py",
                 "replay/test_spark_replay.py", "testing/test_probe.py", "wire/test_broker_failover.py",
                 "storage/test_crash.py", "verify/test_bugs_on_the_wire.py", "cli/test_flows.py")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0].removeprefix("tests/")
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the random order of the rest is kept

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
