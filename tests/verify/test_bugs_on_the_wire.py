"""Bugs caught on the wire: a core mutant of the catalogue applied to a running ``GroupServer``
(in this process, so the mutation reaches it), real kafka-python consumers through
``groupcoord record``, and ``verify`` (with the true core) finds the group diverging.

The catalogue's bugs that plain consumers show: the first generation 0, the generation bumped
twice, a member that disconnects and is never removed (Redpanda #3300: the survivor's
heartbeats go on answered NONE past the dead member's session). Two more with a raw client
sending what consumers do not (one request at a time, each answered at once): a heartbeat to
an Empty group, a commit from an older generation. The others need requests in flight
together and timers; they are caught on the answers to scenarios and scripts
(test_bugs_caught.py)."""

from __future__ import annotations

import time

import pytest
from observe_harness import RecorderProcess, connect, read_frame, request, response_fields
from server_harness import InProcessServer, Worker, balanced, wait_until

from groupcoord.core.config import CoordinatorConfig
from groupcoord.adapters.cli.main import main
from groupcoord.adapters.protocol.codec import API_KEYS
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.tla.mutants import MUTANTS, applied
from groupcoord.adapters.wire.broker_apis import TopicCatalog

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500}
SESSION_MS = 3000  # the workers' session timeout


def _record(mutant_name: str, out, kill: bool) -> None:
    mutant = next(m for m in MUTANTS if m.name == mutant_name)
    with applied(mutant):
        server = InProcessServer(config=CoordinatorConfig.from_kafka(SETTINGS), catalog=TopicCatalog.parse(["t6=6"]),
                                 storage=MemoryStorage())
        recorder = RecorderProcess(f"127.0.0.1:{server.port}", out)
        workers = []
        try:
            workers = [Worker("kafka-python", recorder.bootstrap, "bug", client_id=f"kp-{i}") for i in range(2)]
            wait_until(lambda: all(w.assignment is not None for w in workers), 60, "both consumers assigned")
            if kill:
                workers[1].proc.kill()
                killed_us = time.time_ns() // 1000
                # the survivor's heartbeats, well past the dead member's session
                wait_until(lambda: any(r["api"] == "Heartbeat" and r["recv_us"] > killed_us + (SESSION_MS + 2000) * 1000
                                       for r in recorder.records()), 60, "a heartbeat after the session")
            for w in workers:
                w.close()
        finally:
            for w in workers:
                w.stop()
            recorder.stop()
            server.stop()


@pytest.mark.parametrize("mutant,kill", [("first-generation-zero", False), ("generation-bumped-twice", False),
                                         ("disconnected-never-removed", True)])
def test_a_bug_of_a_running_server_diverges(tmp_path, capsys, mutant, kill):
    _record(mutant, tmp_path / "rec", kill)
    args = ["verify", str(tmp_path / "rec"), "--out", str(tmp_path / "report")]
    for k, v in SETTINGS.items():
        args += [f"--{k}", str(v)]
    code = main(args)
    out = capsys.readouterr().out
    assert code == 1 and "DIVERGES bug:" in out, out


def _raw(port: int, group: str, last: str) -> None:
    """One member through the proxy: joins (alone: answered at once), syncs, then ``last``:
    leaves and heartbeats into the Empty group, or commits with an older generation."""
    s = connect(port)
    n = iter(range(1, 100))

    def send(api: str, version: int, fields: dict) -> dict:
        s.sendall(request(API_KEYS[api], version, next(n), fields))
        return response_fields(API_KEYS[api], version, read_frame(s))

    try:
        joined = send("JoinGroup", 3, {"group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
                                       "member_id": "", "protocol_type": "consumer",
                                       "protocols": [{"name": "range", "metadata": b""}]})
        mid, gen = joined["member_id"], joined["generation_id"]
        send("SyncGroup", 3, {"group_id": group, "generation_id": gen, "member_id": mid,
                              "assignments": [{"member_id": mid, "assignment": b"a"}]})
        if last == "heartbeat-empty":
            send("LeaveGroup", 3, {"group_id": group, "members": [{"member_id": mid}]})
            send("Heartbeat", 3, {"group_id": group, "generation_id": gen, "member_id": mid})
        else:
            send("OffsetCommit", 8, {"group_id": group, "generation_id_or_member_epoch": gen - 1, "member_id": mid,
                                     "topics": [{"name": "t6", "partitions": [
                                         {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]}]})
    finally:
        s.close()


@pytest.mark.parametrize("mutant,last", [("heartbeat-empty-none", "heartbeat-empty"),
                                         ("commit-from-stale-generation", "stale-commit")])
def test_a_bug_a_raw_client_shows_diverges(tmp_path, capsys, mutant, last):
    with applied(next(m for m in MUTANTS if m.name == mutant)):
        server = InProcessServer(config=CoordinatorConfig.from_kafka(SETTINGS), catalog=TopicCatalog.parse(["t6=6"]),
                                 storage=MemoryStorage())
        recorder = RecorderProcess(f"127.0.0.1:{server.port}", tmp_path / "rec")
        try:
            _raw(recorder.port, "bug", last)
        finally:
            recorder.stop()
            server.stop()
    args = ["verify", str(tmp_path / "rec"), "--out", str(tmp_path / "report")]
    for k, v in SETTINGS.items():
        args += [f"--{k}", str(v)]
    code = main(args)
    out = capsys.readouterr().out
    assert code == 1 and "DIVERGES bug:" in out, out
    # the same session on the true server conforms
    server = InProcessServer(config=CoordinatorConfig.from_kafka(SETTINGS), catalog=TopicCatalog.parse(["t6=6"]),
                             storage=MemoryStorage())
    recorder = RecorderProcess(f"127.0.0.1:{server.port}", tmp_path / "true")
    try:
        _raw(recorder.port, "bug", last)
    finally:
        recorder.stop()
        server.stop()
    assert main(["verify", str(tmp_path / "true"), "--out", str(tmp_path / "report2"), *args[4:]]) == 0
