"""Where the tests find the repository, their own scenarios and the shared ones beside it."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SCENARIOS = TESTS / "scenarios"
SHARED_SCENARIOS = ROOT.parent / "shared" / "conformance" / "scenarios"
