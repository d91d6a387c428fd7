"""The project's conformance suite: the scenario files its tests and ``groupcoord tla validate``
run (``suite_files``), each run by the scenario runner (``groupcoord.adapters.scenarios.runner``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from groupcoord.adapters.scenarios.runner import scenario_files

# The suite the project runs, relative to the repository's root: scenarios encoded from Kafka's
# own tests (with their format, spec/conformance/FORMAT.md) and the project's own.
SUITE_DIRS = ("spec/conformance/scenarios", "tests/scenarios")
# Directories of further scenarios (os.pathsep-separated; empty for none). Unset: the team's
# shared folder beside the repository, when it is there.
EXTRA_SCENARIOS_ENV = "GROUPCOORD_EXTRA_SCENARIOS"


def extra_scenario_dirs(root: str | Path) -> list[Path]:
    setting = os.environ.get(EXTRA_SCENARIOS_ENV)
    if setting is None:
        shared = Path(root).resolve().parent / "shared" / "conformance" / "scenarios"
        return [shared] if shared.is_dir() else []
    return [Path(d) for d in setting.split(os.pathsep) if d]


def suite_files(root: str | Path, extra: Iterable[str | Path] | None = None) -> list[Path]:
    """The repository's suite, then every scenario of the extra directories (default:
    ``extra_scenario_dirs``) whose file name the suite does not already have."""
    files = scenario_files([Path(root) / d for d in SUITE_DIRS if (Path(root) / d).is_dir()])
    names = {f.name for f in files}
    for f in scenario_files(extra_scenario_dirs(root) if extra is None else extra):
        if f.name not in names:
            names.add(f.name)
            files.append(f)
    return files


# KIP-848's consumer group protocol: scenarios encoded from Kafka's GroupMetadataManagerTest,
# CurrentAssignmentBuilderTest and OffsetMetadataManagerTest (MANIFEST: spec/conformance/MANIFEST.md,
# "Consumer group protocol"). Kept out of SUITE_DIRS: the classic suite's other users (verify's
# mutants, ``tla validate``) do not model consumer groups.
CONSUMER_SUITE_DIR = "tests/conformance/consumer"

# Scenarios where the core answers differently from Kafka (file name -> why): run, and expected
# to fail until the core follows Kafka (the tests mark them xfail, strict).
CONSUMER_EXPECTED_FAILURES: dict[str, str] = {}


def consumer_suite_files(root: str | Path) -> list[Path]:
    """The consumer group protocol's scenarios, by name."""
    directory = Path(root) / CONSUMER_SUITE_DIR
    return scenario_files([directory]) if directory.is_dir() else []
