"""Where the tests find the repository and its conformance suite (spec/conformance/scenarios
and tests/scenarios; scenarios from ../shared are added when present, see
``groupcoord.adapters.conformance.suite.suite_files``)."""

from pathlib import Path

from groupcoord.adapters.conformance.suite import suite_files

TESTS = Path(__file__).resolve().parent.parent  # tests/ (this file is in tests/support/)
ROOT = TESTS.parent
SCENARIOS = TESTS / "scenarios"  # the project's own
KAFKA_SCENARIOS = ROOT / "spec" / "conformance" / "scenarios"  # encoded from Kafka's tests
SUITE = suite_files(ROOT)
