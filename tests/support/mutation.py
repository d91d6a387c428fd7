"""Mutation testing of the core (spec/mutation.md): mutmut changes one thing at a time in a
function of ``core/`` and the fast suite (tests/core and the conformance scenarios through the
core) must fail on each change.

    .ci/mutation                                   # every mutant
    .ci/mutation --sample 40 --seed 1              # what CI runs (tests/core/test_mutation_sample.py)
    .ci/mutation --workdir DIR 'groupcoord.core.offsets.*'   # some mutants; DIR is kept

mutmut imports the mutated code under the name the tests import (``groupcoord.core``), so the
run works on a copy of the repository laid out that way (``groupcoord/core``,
``groupcoord/adapters``, ``tests``, ``spec``) in a temporary directory, removed afterwards, or
in ``--workdir DIR``, kept (a second run there re-tests only functions that changed and the
mutants it is given by name).

Prints how many mutants were killed, timed out, survived (each with its diff), had no test,
or are listed as equivalent in spec/mutation.md; then the score, killed / (mutants -
equivalent); exit status 1 below ``--min-score`` (95 %).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is tests/support/mutation.py)
MUTMUT = Path(sys.executable).parent / "mutmut"
EQUIVALENTS = ROOT / "spec" / "mutation.md"

# The fast suite, as mutmut runs it from the copy's mutants/ directory. Left out: the wire
# conformance run (the same scenarios over TCP: adapters, not the core), the sample test (it
# would run itself) and the check of what importing the core loads (the mutated core imports
# mutmut's trampolines, which load more).
TESTS = ["tests/core", "tests/conformance/test_conformance.py", "tests/conformance/test_table_edges.py",
         "--ignore=tests/core/test_mutation_sample.py", "-m", "not deep",
         # it edits core/'s source text by path, which the mutants' copy lays out otherwise
         "--ignore=tests/core/test_oracle_mutants.py",
         "--deselect=tests/core/test_core_contract.py::test_importing_the_core_pulls_in_no_io_or_clock_modules"]
CONFIG = f"""\
[tool.mutmut]
source_paths = ["groupcoord/core"]
also_copy = ["groupcoord/adapters", "spec"]
pytest_add_cli_args_test_selection = {json.dumps(TESTS)}
pytest_add_cli_args = ["-p", "no:cacheprovider"]
# A mutant is timed out after 3 times (CPU: 6 times) its tests' normal time plus 10 s (pytest's
# start, and room for a busy machine).
timeout_multiplier = 3.0
timeout_constant = 10.0
use_git_change_detection = false

[tool.pytest.ini_options]
markers = ["deep: long hypothesis runs"]
"""

# mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code), folded into our counts.
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout",
          -9: "timeout", -11: "crashed", None: "not checked"}
CAUGHT = ("killed", "timeout", "crashed")

_GENERATE = """\
from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants
from mutmut.mutation.trampoline import set_mutant_under_test
set_mutant_under_test("mutant_generation")
copy_src_dir(); copy_also_copy_files(); create_mutants(1)
"""
_DIFFS = """\
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
print(json.dumps({name: get_diff_for_mutant(name) for name in sys.argv[1:]}))
"""


def lay_out(workdir: Path) -> None:
    """The copy mutmut works on: the package as imported, the tests and the scenarios."""
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", ".pytest_cache")
    for source, target in (("core", "groupcoord/core"), ("adapters", "groupcoord/adapters"), ("tests", "tests"),
                           ("spec", "spec")):
        shutil.copytree(ROOT / source, workdir / target, ignore=ignore, dirs_exist_ok=True)
    (workdir / "pyproject.toml").write_text(CONFIG)


def environment() -> dict:
    # No scenarios from beside the repository; the hypothesis profile of tests/conftest.py that
    # draws the same examples every run and keeps no database between mutants.
    return dict(os.environ, GROUPCOORD_EXTRA_SCENARIOS="", HYPOTHESIS_PROFILE="mutation", PYTHONHASHSEED="0")


def python(code: str, workdir: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=workdir, env=environment(), text=True,
                          capture_output=True)
    if done.returncode:
        sys.exit(f"mutation: mutmut failed in {workdir}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done.stdout


def results(workdir: Path) -> dict[str, int | None]:
    """Every mutant's exit code (None: not run yet), read from mutmut's files."""
    found: dict[str, int | None] = {}
    for meta in sorted((workdir / "mutants" / "groupcoord" / "core").rglob("*.py.meta")):  # core/classic/ too
        found.update(json.loads(meta.read_text())["exit_code_by_key"])
    return found


def listed_equivalents(path: Path = EQUIVALENTS) -> dict[tuple[str, str, str], str]:
    """The table under "## Equivalent mutants" in spec/mutation.md, one row per mutant:
    | `name` | `line` | `mutated line` | why |, returned as (function, line, mutated line) ->
    name. A mutant is matched by its function and its change, not by its number, which shifts
    when an earlier line of the function changes; a changed line no longer matches."""
    listed = {}
    section = ""
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("## "):
                section = line[3:].strip()
            m = re.match(r"\|\s*`(groupcoord\.core\.[^`]+__mutmut_\d+)`\s*\|\s*`(.*?)`\s*\|\s*`(.*?)`\s*\|", line)
            if m and section == "Equivalent mutants":
                removed, added = (text.replace("\\|", "|").strip() for text in (m[2], m[3]))
                listed[(function_of(m[1]), removed, added)] = m[1]
    return listed


def function_of(mutant: str) -> str:
    return mutant.partition("__mutmut_")[0]


def change_of(diff: str) -> tuple[str, str]:
    """A mutant's diff as (the lines it changed, what it wrote instead), each stripped and joined."""
    lines = diff.splitlines()
    removed = [line[1:].strip() for line in lines if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in lines if line.startswith("+") and not line.startswith("+++")]
    return " ".join(removed), " ".join(added)


def _in_order(name: str):
    function, _, number = name.partition("__mutmut_")
    return function, int(number or 0)


def report(codes: dict[str, int | None], diffs: dict[str, str], equivalents: dict[tuple[str, str, str], str],
           every: bool = False, out=print) -> float:
    """Prints the counts, each survivor's diff and the score; returns the score in per cent.
    ``every``: all mutants were run, so a listed equivalent that matched none is stale."""
    status = {name: STATUS.get(code, "suspicious") for name, code in codes.items()}
    matched = set()
    for name, diff in diffs.items():
        key = (function_of(name), *change_of(diff))
        if key in equivalents:
            status[name] = "equivalent"
            matched.add(key)
    if every:
        for key in sorted(set(equivalents) - matched):
            out(f"listed as equivalent in spec/mutation.md but no surviving mutant makes that change: "
                f"{equivalents[key]} ({key[1]!r} -> {key[2]!r})")
    counts = Counter(status.values())
    for name in sorted((n for n, s in status.items() if s not in CAUGHT + ("equivalent",)), key=_in_order):
        out(f"\n{status[name]}: {name}\n{diffs.get(name, '')}")
    counted = len(status) - counts["equivalent"] - counts["skipped"]
    caught = sum(counts[s] for s in CAUGHT)
    score = 100.0 * caught / counted if counted else 100.0
    out("\n" + ", ".join(f"{counts[s]} {s}" for s in ("killed", "timeout", "crashed", "survived", "no tests",
                                                         "suspicious", "not checked", "equivalent", "skipped")
                         if counts[s] or s in ("killed", "timeout", "survived")))
    out(f"mutation score: {score:.1f} % ({caught}/{counted} mutants of core/ caught"
        f"{', ' + str(counts['equivalent']) + ' equivalent left out' if counts['equivalent'] else ''})")
    return score


def summarize(workdir: Path, chosen: list[str], partial: bool = False, out=print) -> float:
    """The report of the results in ``workdir`` (of the ``chosen`` mutants; none: all).
    ``partial``: leave out mutants not run yet (a run still going or interrupted)."""
    codes = results(workdir)
    if chosen:
        from fnmatch import fnmatch

        codes = {n: c for n, c in codes.items() if any(n == p or fnmatch(n, p) for p in chosen)}
    if None in codes.values():
        missing = sum(c is None for c in codes.values())
        if not partial:
            sys.exit(f"mutation: {missing} mutants were not run (see {workdir})")
        out(f"{missing} of {len(codes)} mutants not run yet; the rest:")
        codes = {n: c for n, c in codes.items() if c is not None}
        chosen = chosen or ["*"]  # not every mutant: no stale listings
    survivors = [n for n, c in codes.items() if STATUS.get(c, "suspicious") not in CAUGHT]
    diffs = json.loads(python(_DIFFS, workdir, *survivors)) if survivors else {}
    return report(codes, diffs, listed_equivalents(), every=not chosen, out=out)


def run(workdir: Path, names: list[str], jobs: int, sample: int | None, seed: int, out=print) -> float:
    started = time.monotonic()
    lay_out(workdir)
    python(_GENERATE, workdir)
    everything = sorted(results(workdir))
    chosen = names
    if sample is not None:
        chosen = sorted(random.Random(seed).sample(everything, min(sample, len(everything))))
        out(f"{len(chosen)} of {len(everything)} mutants (seed {seed})")
    else:
        out(f"{len(everything)} mutants" + (f", those matching {' '.join(names)}" if names else ""))
    sys.stdout.flush()
    log = workdir / "mutmut.log"
    with log.open("w") as f:
        # its own process group: mutmut forks a process per mutant, all stopped with it
        mutmut = subprocess.Popen([str(MUTMUT), "run", "--max-children", str(jobs), *chosen], cwd=workdir,
                                  env=environment(), stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = mutmut.wait()
        finally:
            if mutmut.poll() is None:
                os.killpg(mutmut.pid, signal.SIGKILL)
                mutmut.wait()
    if returncode:
        sys.exit(f"mutation: mutmut run failed (exit {returncode}):\n{log.read_text()[-6000:]}")
    score = summarize(workdir, chosen, out=out)
    out(f"({time.monotonic() - started:.0f} s, {jobs} job{'s' if jobs > 1 else ''})")
    return score


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=".ci/mutation", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mutants", nargs="*", metavar="MUTANT",
                        help="only these mutants (names or globs, e.g. 'groupcoord.core.offsets.*')")
    parser.add_argument("--sample", type=int, default=None, metavar="N", help="a random sample of N mutants")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="work here and keep it (default: a temporary directory, removed)")
    parser.add_argument("--min-score", type=float, default=95.0, help="exit 1 below this score (default 95)")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: report the results already in --workdir (e.g. of an interrupted run)")
    args = parser.parse_args(argv)
    if args.report:
        if args.workdir is None or args.sample is not None:
            parser.error("--report reads the results of a --workdir and takes no --sample")
        return 0 if summarize(args.workdir.resolve(), args.mutants, partial=True) >= args.min_score else 1
    if args.sample is not None and (args.sample < 1 or args.mutants):
        parser.error("--sample takes N >= 1 and no MUTANT names")
    if not MUTMUT.exists():
        parser.error(f"needs mutmut in {Path(sys.executable).parent} (.ci/bootstrap installs it)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("mutation: terminated"))  # clean up as on Ctrl-C
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="groupcoord-mutation-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        score = run(workdir.resolve(), args.mutants, args.jobs, args.sample, args.seed)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if score >= args.min_score else 1


if __name__ == "__main__":
    sys.exit(main())
