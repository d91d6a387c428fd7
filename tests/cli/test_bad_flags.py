"""Every command of ``groupcoord`` refuses bad input the same way: exit status 2, one line on
stderr, ``groupcoord <command>: error: <what>`` (no usage block, no traceback), nothing on
stdout, nothing written, and at once: before connecting anywhere, opening a store or starting
Spark or TLC.

The table has rows for every command of the argparse tree (``test_every_command_has_rows``
walks it, so a new command without a row fails). ``{inputs}`` in a row is a directory of inputs
made once (unchanged by any row); ``{busy}`` a port something listens on; each row runs in an
empty working directory that must stay empty.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import ROOT

from groupcoord.adapters.cli.main import build_parser

ROWS = [
    # --- serve: numbers, choices, the address, Kafka settings, the properties file, storage
    (["serve", "--port", "-1"], "argument --port: expected a port number from 0 to 65535, got '-1'"),
    (["serve", "--port", "70000"], "argument --port: expected a port number from 0 to 65535, got '70000'"),
    (["serve", "--port", "nine"], "argument --port: expected a port number"),
    (["serve", "--port", "{busy}"], "cannot listen on 127.0.0.1:{busy}"),
    (["serve", "--host", "192.0.2.1", "--port", "0"], "cannot listen on 192.0.2.1:0"),  # not this machine's
    (["serve", "--host", "no-such-host.invalid"], "--host no-such-host.invalid"),
    (["serve", "--host", ""], "argument --host: expected a host name or address"),
    (["serve", "--log-format", "xml"], "argument --log-format: invalid choice: 'xml'"),
    (["serve", "--storage", "disk"], "argument --storage: invalid choice: 'disk'"),
    (["serve", "--port"], "argument --port: expected one argument"),
    (["serve", "--group.max.sise", "5"], "unrecognized arguments: --group.max.sise 5"),
    (["serve", "--group.max.size", "0"], "group.max.size must be at least 1, got 0"),
    (["serve", "--group.min.session.timeout.ms", "abc"], "group.min.session.timeout.ms must be an integer"),
    (["serve", "--socket.request.max.bytes", "big"], "socket.request.max.bytes must be an integer"),
    (["serve", "--config", "{inputs}/missing.properties"], "--config {inputs}/missing.properties: No such file"),
    (["serve", "--config", "{inputs}"], "--config {inputs}: Is a directory"),
    (["serve", "--config", "{inputs}/words.properties"], "words.properties:2: expected KEY=VALUE"),
    (["serve", "--config", "{inputs}/binary.properties"], "not a text file"),
    (["serve", "--config", "{inputs}/listeners.properties"], "listeners: expected PLAINTEXT://HOST:PORT"),
    (["serve", "--config", "{inputs}/value.properties"], "group.max.size must be at least 1, got -3"),
    (["serve", "--topic", "orders"], "expected NAME=PARTITIONS"),
    (["serve", "--topic", "orders=0"], "needs at least 1 partition"),
    (["serve", "--sqlite-max-bytes", "100"], "argument --sqlite-max-bytes: expected a size in bytes"),
    (["serve", "--storage", "broker"], "--storage broker needs --bootstrap-server"),
    (["serve", "--storage", "broker", "--bootstrap-server", "nowhere"], "argument --bootstrap-server: expected"),
    (["serve", "--coordinator-session-ms", "10"], "argument --coordinator-session-ms: expected milliseconds"),
    (["serve", "--trace", "{inputs}/afile/t.jsonl"], "--trace {inputs}/afile/t.jsonl: {inputs}/afile is not a"),
    # --- the admin commands: fail before connecting
    (["groups"], "missing a command: one of list, describe, delete"),
    (["groups", "rename"], "unknown command 'rename'"),
    (["groups", "list", "--bootstrap-server", "localhost"], "argument --bootstrap-server: expected HOST:PORT"),
    (["groups", "list", "--timeout", "0"], "argument --timeout: expected seconds"),
    (["groups", "list", "--state", "Sleeping"], "argument --state: expected one of Stable"),
    (["groups", "describe"], "the following arguments are required: group"),
    (["groups", "describe", "g", "--timeout", "soon"], "argument --timeout: expected seconds"),
    (["groups", "delete"], "the following arguments are required: group"),
    (["groups", "delete", "g", "--bootstrap-server", "h:0"], "argument --bootstrap-server: expected HOST:PORT"),
    (["offsets"], "missing a command: one of list, reset, delete"),
    (["offsets", "list"], "the following arguments are required: group"),
    (["offsets", "list", "g", "--timeout", "-1"], "argument --timeout: expected seconds"),
    (["offsets", "reset", "g"], "one of the arguments --to-earliest --to-latest --to-offset --shift-by is required"),
    (["offsets", "reset", "g", "--to-earliest", "--to-latest"], "not allowed with argument"),
    (["offsets", "reset", "g", "--to-offset", "x"], "argument --to-offset: expected an offset of at least 0"),
    (["offsets", "reset", "g", "--to-offset", "-1"], "argument --to-offset: expected an offset of at least 0"),
    (["offsets", "reset", "g", "--shift-by", "1.5"], "argument --shift-by: invalid int value: '1.5'"),
    (["offsets", "reset", "g", "--to-latest", "--topic", "t:one"], "argument --topic: expected TOPIC or"),
    (["offsets", "delete", "g"], "the following arguments are required: --topic"),
    (["offsets", "delete", "g", "--topic", "t:"], "argument --topic: expected TOPIC or"),
    # --- scenario, demo
    (["scenario"], "the following arguments are required: FILE_OR_DIR"),
    (["scenario", "{inputs}/missing.json"], "{inputs}/missing.json: no such file or directory"),
    (["scenario", "{inputs}/empty"], "no scenario files (*.json) in {inputs}/empty"),
    (["scenario", str(ROOT / "tests" / "scenarios"), "--trace", "{inputs}/afile"],
     "--trace {inputs}/afile: exists and is not a directory"),
    (["demo", "--members", "1"], "argument --members: expected a whole number of at least 2, got '1'"),
    (["demo", "--members", "three"], "argument --members: expected a whole number"),
    (["demo", "--partitions", "0"], "argument --partitions: expected a whole number of at least 1"),
    # --- bench
    (["bench"], "missing a command: one of core, server, storage, replay"),
    (["bench", "disk"], "unknown command 'disk'"),
    (["bench", "core", "--records", "5"], "unrecognized arguments: --records 5"),
    (["bench", "core", "--quick=yes"], "argument --quick: ignored explicit argument 'yes'"),
    (["bench", "server", "--workers", "2"], "unrecognized arguments: --workers 2"),
    (["bench", "storage", "extra"], "unrecognized arguments: extra"),
    (["bench", "replay", "--records", "0"], "argument --records: expected a whole number of at least 1"),
    (["bench", "replay", "--groups", "x"], "argument --groups: expected a whole number"),
    (["bench", "replay", "--engines", "plain,gpu"], "argument --engines: unknown engines 'gpu'"),
    (["bench", "replay", "--trace", "{inputs}/missing"], "--trace {inputs}/missing: no such file or directory"),
    (["bench", "data", "--messages", "10"], "argument --messages: expected a whole number of at least 100, got '10'"),
    (["bench", "data", "--storage-compare=yes"], "argument --storage-compare/--no-storage-compare: ignored explicit argument 'yes'"),
    (["bench", "proxy", "--count", "5"], "argument --count: expected a whole number of at least 10, got '5'"),
    (["bench", "proxy", "--quick"], "unrecognized arguments: --quick"),
    (["bench", "fixture", "--starts", "0"], "argument --starts: expected a whole number of at least 1, got '0'"),
    (["bench", "fixture", "--cold", "x"], "argument --cold: expected a whole number of at least 1, got 'x'"),
    # --- record: the addresses, the output directory, then the upstream and the listener (nothing written)
    (["probe"], "the following arguments are required: --bootstrap"),
    (["probe", "--bootstrap", "nohost"], "argument --bootstrap: expected HOST:PORT"),
    (["probe", "--bootstrap", "127.0.0.1:9092", "--examples", "0"],
     "argument --examples: expected a whole number of at least 1, got '0'"),
    (["probe", "--bootstrap", "127.0.0.1:9092", "--group.min.session.timeout.ms", "-1"],
     "group.min.session.timeout.ms must be at least 0, got -1"),
    (["record"], "the following arguments are required: --out"),
    (["record", "--out", "o"], "one of the arguments --upstream --pcap is required"),
    (["record", "--pcap", "{inputs}/missing.pcap", "--out", "o"], "{inputs}/missing.pcap: No such file or directory"),
    (["record", "--pcap", "x.pcap", "--upstream", "127.0.0.1:1", "--out", "o"], "not allowed with argument"),
    (["record", "--pcap", "x.pcap", "--port", "70000", "--out", "o"], "argument --port: expected a port number"),
    (["record", "--upstream", "localhost", "--out", "o"], "argument --upstream: expected HOST:PORT, got 'localhost'"),
    (["record", "--upstream", "h:99999", "--out", "o"], "argument --upstream: expected HOST:PORT"),
    (["record", "--upstream", "127.0.0.1:{busy}", "--listen", "nowhere", "--out", "o"],
     "argument --listen: expected HOST:PORT, got 'nowhere'"),
    (["record", "--upstream", "127.0.0.1:{busy}", "--out", "o", "--format", "csv"],
     "argument --format: invalid choice: 'csv'"),
    (["record", "--upstream", "127.0.0.1:{busy}", "--out", "{inputs}/afile"], "--out {inputs}/afile: "
     "exists and is not a directory"),
    (["record", "--upstream", "127.0.0.1:{busy}", "--out", "{inputs}/afile/o"], "{inputs}/afile is not a directory"),
    (["record", "--upstream", "127.0.0.1:1", "--out", "o"], "cannot reach the upstream 127.0.0.1:1: Connection refused"),
    (["record", "--upstream", "127.0.0.1:{busy}", "--listen", "127.0.0.1:{busy}", "--out", "o"],
     "cannot listen on 127.0.0.1:{busy}"),
    # --- the trace commands
    (["simulate"], "the following arguments are required: --out"),
    (["simulate", "--out", "t", "--groups", "0"], "argument --groups: expected a whole number of at least 1"),
    (["simulate", "--out", "t", "--duration", "nan"], "argument --duration: expected seconds"),
    (["simulate", "--out", "t", "--format", "csv"], "argument --format: invalid choice: 'csv'"),
    (["timeline", "{inputs}/trace", "--out", "g.html"], "the following arguments are required: --group"),
    (["timeline", "{inputs}/trace", "--group", "g", "--out", "g.svg"], "expected FILE.png or FILE.html"),
    (["timeline", "{inputs}/missing", "--group", "g", "--out", "g.html"], "{inputs}/missing: no such file"),
    (["replay"], "the following arguments are required: TRACE"),
    (["replay", "{inputs}/missing"], "{inputs}/missing: no such file or directory"),  # before Spark starts
    (["replay", "{inputs}/missing", "--engine", "plain"], "{inputs}/missing: no such file or directory"),
    (["replay", "{inputs}/trace", "--engine", "flink"], "argument --engine: invalid choice: 'flink'"),
    (["replay", "{inputs}/trace", "--processes", "0"], "argument --processes: expected a whole number"),
    (["replay", "{inputs}/trace", "--out", "{inputs}/trace/report"], "the report would be inside the trace"),
    (["inject-faults", "{inputs}/trace"], "the following arguments are required: --out"),
    (["inject-faults", "{inputs}/trace", "--out", "o", "--faults", "gremlins"], "unknown faults 'gremlins'"),
    (["inject-faults", "{inputs}/missing", "--out", "o"], "{inputs}/missing: no such file or directory"),
    (["verify"], "give a recording (DIR) or --kafka-log FILE..."),
    (["verify", "--kafka-log", "{inputs}/missing.log"], "{inputs}/missing.log: No such file or directory"),
    (["bench", "verify", "--groups", "0"], "argument --groups: expected a whole number of at least 1"),
    (["bench", "frames", "--groups", "0"], "argument --groups: expected a whole number of at least 1, got '0'"),
    (["bench", "frames", "--rounds", "two"], "argument --rounds: expected a whole number of at least 1, got 'two'"),
    (["bench", "load", "--groups", "0", "--members", "1"], "argument --groups: expected a whole number of at least 1, got '0'"),
    (["bench", "load", "--groups", "1", "--members", "1", "--duration", "0"], "argument --duration: expected seconds, at least 1, got '0'"),
    (["bench", "load", "--groups", "1", "--members", "1", "--settle", "-1"], "argument --settle: expected seconds, at least 0, got '-1'"),
    (["verify", "{inputs}/missing"], "{inputs}/missing: no such file or directory"),
    (["verify", "{inputs}/trace", "--engine", "flink"], "argument --engine: invalid choice: 'flink'"),
    (["verify", "{inputs}/trace", "--budget", "0"], "argument --budget: expected a whole number of at least 1"),
    (["verify", "{inputs}/trace", "--timer-tolerance-ms", "-1"], "argument --timer-tolerance-ms: expected"),
    (["verify", "{inputs}/trace", "--group.max.size", "0"], "group.max.size must be at least 1"),
    # --- tla: before Java or TLC
    (["tla"], "missing a command: one of check, validate, mutants"),
    (["tla", "check", "--only", "mc5"], "argument --only: unknown checks 'mc5'; choose from mc3, mc4"),
    (["tla", "check", "--workers", "-1"], "argument --workers: expected a whole number of at least 0"),
    (["tla", "validate"], "the following arguments are required: trace"),
    (["tla", "validate", "{inputs}/missing"], "{inputs}/missing: no such file or directory"),
    (["tla", "mutants", "--only", "KAFKA-1"],
     "unknown mutant 'KAFKA-1'; choose from static-rejoin-keeps-old-id (KAFKA-8500), "),
    (["tla", "mutants", "--only", ","], "expected mutant names or bug ids"),
    (["tla", "mutants", "--workers", "many"], "argument --workers: expected a whole number"),
    (["tla", "check", "--only", "mc3", "--write-docs"], "--write-docs records the full check"),
    (["tla", "mutants", "--only", "KAFKA-8500", "--write-docs"], "--write-docs records the whole catalogue"),
    # --- no command, or an unknown one
    ([], "missing a command: one of serve, groups, offsets"),
    (["serve-all"], "unknown command 'serve-all'"),
]


def _subcommands(parser: argparse.ArgumentParser):
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def leaf_commands(parser: argparse.ArgumentParser, path: tuple = ()) -> list[tuple]:
    """Every command that runs something: ("serve",), ("groups", "list"), ("bench", "core"), ..."""
    sub = _subcommands(parser)
    if sub is None:
        return [path]
    return [leaf for name, p in sub.choices.items() for leaf in leaf_commands(p, path + (name,))]


def command_of(argv: list[str]) -> tuple:
    """The command (path in the tree) a command line names, as far as it names one."""
    parser, path = build_parser(), ()
    for word in argv:
        sub = _subcommands(parser)
        if sub is None or word not in sub.choices:
            break
        parser, path = sub.choices[word], path + (word,)
    return path


def test_every_command_has_rows():
    covered = {command_of(argv) for argv, _ in ROWS}
    assert sorted(set(leaf_commands(build_parser())) - covered) == []


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    (d / "words.properties").write_text("# a comment\njust some words\n")
    (d / "binary.properties").write_bytes(b"group.max.size=\xff\xfe\n")
    (d / "listeners.properties").write_text("listeners=PLAINTEXT://127.0.0.1:99999\n")
    (d / "value.properties").write_text("group.max.size=-3\n")
    (d / "afile").write_text("a file, not a directory\n")
    (d / "empty").mkdir()
    (d / "trace").mkdir()
    (d / "trace" / "part-00000.jsonl").write_text("")
    return d


@pytest.fixture(scope="module")
def busy():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.is_dir(), p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("argv, message", ROWS, ids=[" ".join(argv) or "(none)" for argv, _ in ROWS])
def test_a_bad_input_is_one_line_and_exit_2(argv, message, inputs, busy, tmp_path):
    def fill(s: str) -> str:
        return s.replace("{inputs}", str(inputs)).replace("{busy}", str(busy))

    argv, message = [fill(a) for a in argv], fill(message)
    work = tmp_path / "work"
    work.mkdir()
    before = _snapshot(inputs)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", *argv], cwd=work,
                            capture_output=True, text=True, timeout=30, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    seconds = time.monotonic() - started
    lines = result.stderr.splitlines()
    prog = " ".join(["groupcoord", *command_of(argv)])
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    assert message in lines[0], lines[0]
    assert result.stdout == ""
    assert sorted(p.name for p in work.iterdir()) == []  # nothing written where it ran
    assert _snapshot(inputs) == before  # nor beside its inputs
    assert seconds < 20, f"{seconds:.1f} s: the refusal should come before any real work"


def test_mutants_help_lists_names_with_their_bug_ids():
    result = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "tla", "mutants", "--help"],
                            capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()
            if line.startswith("  ") and len(line.split()) >= 2 and "-" in line.split()[0]}
    assert rows["static-rejoin-keeps-old-id"] == "KAFKA-8500"
    assert rows["static-join-completing-no-rebalance"] == "KAFKA-9801"
    assert rows["leave-in-preparing-no-complete"] == "KoP-380"
    assert rows["disconnected-never-removed"] == "Redpanda-3300"


@pytest.mark.parametrize("given, picked", [
    ("KAFKA-8500", ["static-rejoin-keeps-old-id", "spec-static-rejoin-keeps-old-id"]),
    ("KAFKA-10284", ["static-replace-not-persisted", "spec-static-replace-answered-before-write"]),
    ("kafka-9801", ["static-join-completing-no-rebalance"]),
    ("KoP-380", ["leave-in-preparing-no-complete"]),
    ("KoP #380", ["leave-in-preparing-no-complete"]),
    ("redpanda-3300", ["disconnected-never-removed", "spec-disconnected-never-removed"]),
    ("No-Sync-Timer,KAFKA-8500", ["static-rejoin-keeps-old-id", "no-sync-timer", "spec-static-rejoin-keeps-old-id"]),
])
def test_mutants_are_chosen_by_name_or_bug_id_in_any_case(given, picked):
    from groupcoord.adapters.tla.mutants import select

    assert select(given) == picked
