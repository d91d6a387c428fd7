"""``groupcoord.testing``'s public names (spec/testing.md) import from the package itself, each
listed in ``__all__``; the package alone (what the pytest plugin loads in every test run)
imports neither hypothesis nor the servers."""

from __future__ import annotations

import subprocess
import sys

import groupcoord.testing as testing


def test_the_public_names_import_from_the_package():
    from groupcoord.testing import CoordinatorStateMachine, strategies
    from groupcoord.testing.machine import CoordinatorStateMachine as in_machine

    assert CoordinatorStateMachine is in_machine
    assert callable(strategies.members) and callable(strategies.request_sequences)
    for name in testing.__all__:
        assert getattr(testing, name) is not None, name
    assert set(testing.__all__) <= set(dir(testing))


def test_the_package_alone_imports_no_hypothesis():
    code = "import sys, groupcoord.testing; print('hypothesis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
