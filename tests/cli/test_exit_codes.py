"""README's table of exit codes, walked: every command it names has a row, every command of the
``groupcoord`` parser is named, and each command given a bad input exits 2 with one line
(``groupcoord <command>: error: <what>``) and no traceback, at once. Then the bad inputs a
newcomer meets first (an unreachable or malformed Spark master, an output path that cannot be
written, the wrong kind of input file, a broker nobody listens on), and the codes 0 and 1 the
rest of the suite does not already show cheaply.

The command-line flags' own refusals are ``test_bad_flags.py``'s table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import ROOT

from groupcoord.adapters.cli.main import build_parser

CLI = [sys.executable, "-m", "groupcoord.adapters.cli.main"]


def readme_rows() -> dict[str, str]:
    """``command -> row`` of README's "Exit codes" table (a row may name several commands)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            for name in re.findall(r"`([^`]+)`", first):
                rows[name] = line
    return rows


def parser_commands() -> set[str]:
    """The parser's commands, ``tla``'s by their own names (their codes differ)."""
    def subs(parser):
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    top = subs(build_parser())
    return {name for name in top if name != "tla"} | {f"tla {name}" for name in subs(top["tla"])}


# One bad input per command of the table: {free} is a port nothing listens on, {dir} a scratch
# directory with notes.md (a text file) and afile (a file where a directory is expected).
BAD = {
    "serve": ["serve", "--trace", "{dir}/afile/trace.jsonl"],
    "groups": ["groups", "list", "--bootstrap-server", "127.0.0.1:{free}", "--timeout", "2"],
    "offsets": ["offsets", "list", "g", "--bootstrap-server", "127.0.0.1:{free}", "--timeout", "2"],
    "record": ["record", "--upstream", "127.0.0.1:{free}", "--out", "{dir}/rec"],
    "verify": ["verify", "{dir}/notes.md"],
    "probe": ["probe", "--bootstrap", "127.0.0.1:{free}"],
    "simulate": ["simulate", "--out", "{dir}/afile", "--groups", "1"],
    "inject-faults": ["inject-faults", "{dir}/notes.md", "--out", "{dir}/copy"],
    "timeline": ["timeline", "{dir}/notes.md", "--group", "g", "--out", "{dir}/nodir/t.png"],
    "demo": ["demo", "--members", "1"],
    "replay": ["replay", "{dir}/notes.md", "--engine", "plain"],
    "scenario": ["scenario", "{dir}/notes.md"],
    "tla check": ["tla", "check", "--only", "nothing"],
    "tla mutants": ["tla", "mutants", "--only", "KAFKA-1"],
    "tla validate": ["tla", "validate", "{dir}/notes.md"],
    "bench": ["bench", "replay", "--trace", "{dir}/missing"],
}

# The bad inputs of issue #33, each with what its line must say.
FIRST_HOUR = [
    (["replay", "{dir}/trace", "--master", "spark:/nowhere"], "--master: expected a Spark master"),
    (["replay", "{dir}/trace", "--master", "spark://127.0.0.1:{free}"],
     "--master spark://127.0.0.1:{free}: cannot reach the Spark master"),
    (["verify", "{dir}/rec", "--engine", "spark", "--master", "local[0]"], "--master: expected a Spark master"),
    (["verify", "{dir}/rec", "--engine", "spark", "--master", "spark://127.0.0.1:{free}"],
     "cannot reach the Spark master"),
    (["timeline", "{dir}/trace", "--group", "g", "--out", "{dir}/nodir/x.png"],
     "--out {dir}/nodir/x.png: no such directory: {dir}/nodir"),
    (["timeline", "{dir}/trace", "--group", "g", "--out", "{dir}/trace.html"], "--out {dir}/trace.html: is a directory"),
    (["simulate", "--out", "{dir}/afile", "--format", "jsonl"], "--out {dir}/afile: exists and is not a directory"),
    (["replay", "{dir}/trace", "--engine", "plain", "--out", "{dir}/afile"], "--out {dir}/afile: exists and is not"),
    (["verify", "{dir}/rec", "--out", "{dir}/afile/report"], "--out {dir}/afile/report: {dir}/afile is not a directory"),
    (["inject-faults", "{dir}/trace", "--out", "{dir}/afile"], "--out {dir}/afile: exists and is not a directory"),
    (["verify", "{dir}/notes.md"], "{dir}/notes.md: expected a recording of groupcoord record"),
    (["verify", "{dir}/trace"], "{dir}/trace: expected a recording of groupcoord record"),
    (["replay", "{dir}/rec/observed.jsonl", "--engine", "plain"],
     "{dir}/rec/observed.jsonl: expected a coordinator trace"),
    (["timeline", "{dir}/rec", "--group", "g", "--out", "{dir}/t.html"], "observed.jsonl: expected a coordinator trace"),
    (["tla", "validate", "{dir}/rec"], "observed.jsonl: expected a coordinator trace"),
    (["scenario", "{dir}/notes.md"], "{dir}/notes.md: expected a scenario"),
    (["groups", "list", "--bootstrap-server", "127.0.0.1:{free}", "--timeout", "2"], "cannot reach"),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    (d / "notes.md").write_text("# notes\nnot a trace\n")
    (d / "afile").write_text("a file, not a directory\n")
    (d / "rec").mkdir()
    (d / "rec" / "observed.jsonl").write_text(json.dumps(
        {"conn": 1, "broker": 0, "recv_us": 1, "send_us": 2, "api": "Heartbeat", "api_key": 12, "version": 4,
         "client_id": "c", "request": {}, "response": {}}) + "\n")
    (d / "trace.html").mkdir()
    subprocess.run(CLI + ["scenario", str(ROOT / "tests" / "scenarios" / "kafka-delete-groups-batch.json"),
                          "--trace", str(d / "trace")], check=True, capture_output=True, timeout=120)
    return d


@pytest.fixture(scope="module")
def free() -> int:
    with socket.socket() as s:  # bound and closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(argv: list[str], scratch: Path, free: int) -> tuple[subprocess.CompletedProcess, list[str], float]:
    argv = [a.replace("{dir}", str(scratch)).replace("{free}", str(free)) for a in argv]
    started = time.monotonic()
    result = subprocess.run(CLI + argv, capture_output=True, text=True, timeout=60, cwd=scratch,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    return result, argv, time.monotonic() - started


def test_the_table_names_every_command():
    assert set(readme_rows()) == parser_commands()
    assert set(BAD) == parser_commands()


@pytest.mark.parametrize("command", sorted(BAD))
def test_each_command_given_a_bad_input_exits_2_with_one_line(command, scratch, free):
    result, argv, seconds = run(BAD[command], scratch, free)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    words = command.split()
    prog = " ".join(["groupcoord", *argv[:len(words) + (argv[0] in ("groups", "offsets", "bench"))]])
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    assert seconds < 20


@pytest.mark.parametrize("argv, message", FIRST_HOUR, ids=[" ".join(a) for a, _ in FIRST_HOUR])
def test_a_first_hour_bad_input_is_named_in_one_line(argv, message, scratch, free):
    result, argv, seconds = run(argv, scratch, free)
    message = message.replace("{dir}", str(scratch)).replace("{free}", str(free))
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert message in lines[0], lines[0]
    assert seconds < 15, f"{seconds:.1f} s: refused before any session or work starts"
    assert not (scratch / "nodir").exists() and (scratch / "afile").is_file()


def test_the_codes_0_and_1_of_a_trace_replayed(scratch, free, tmp_path):
    pytest.importorskip("pyarrow")
    clean, _, _ = run(["replay", str(scratch / "trace"), "--engine", "plain", "--out", str(tmp_path / "r0")],
                      scratch, free)
    assert clean.returncode == 0, clean.stderr[-2000:]
    demo, _, _ = run(["demo"], scratch, free)
    assert demo.returncode == 0, demo.stderr[-2000:]
