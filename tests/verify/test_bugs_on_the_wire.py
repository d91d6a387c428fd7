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

import contextlib
import time

import pytest
from observe_harness import RecorderProcess, connect, consumer_pair, read_frame, request, response_fields
from server_harness import InProcessServer, wait_until

from groupcoord.core.config import CoordinatorConfig
from groupcoord.adapters.cli.main import main
from groupcoord.adapters.protocol.codec import API_KEYS
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.tla.mutants import MUTANTS, applied
from groupcoord.adapters.wire.broker_apis import TopicCatalog

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500}
SESSION_MS = 3000  # the workers' session timeout


def _server_recording(out, session, mutant_name: str | None = None) -> None:
    """``session(recorder)`` against a running server (with the mutant applied, if named)
    through ``groupcoord record`` into ``out``; the server and the recorder stopped after."""
    mutant = next((m for m in MUTANTS if m.name == mutant_name), None)
    with applied(mutant) if mutant is not None else contextlib.nullcontext():
        server = InProcessServer(config=CoordinatorConfig.from_kafka(SETTINGS), catalog=TopicCatalog.parse(["t6=6"]),
                                 storage=MemoryStorage())
        recorder = RecorderProcess(f"127.0.0.1:{server.port}", out)
        try:
            session(recorder)
        finally:
            recorder.stop()
            server.stop()


def _verify(path, report) -> tuple[int, str]:
    args = ["verify", str(path), "--out", str(report)]
    for k, v in SETTINGS.items():
        args += [f"--{k}", str(v)]
    return main(args)


def _consumers(kill: bool):
    def session(recorder) -> None:
        def kill_one(workers) -> None:
            workers[1].proc.kill()
            killed_us = time.time_ns() // 1000
            # the survivor's heartbeats, well past the dead member's session
            wait_until(lambda: any(r["api"] == "Heartbeat" and r["recv_us"] > killed_us + (SESSION_MS + 2000) * 1000
                                   for r in recorder.records()), 60, "a heartbeat after the session")

        consumer_pair(recorder.bootstrap, "bug", kill_one if kill else None)
    return session


@pytest.mark.parametrize("mutant,kill", [("first-generation-zero", False), ("generation-bumped-twice", False),
                                         ("disconnected-never-removed", True)])
def test_a_bug_of_a_running_server_diverges(tmp_path, capsys, mutant, kill):
    _server_recording(tmp_path / "rec", _consumers(kill), mutant)
    code = _verify(tmp_path / "rec", tmp_path / "report")
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
    def session(recorder) -> None:
        _raw(recorder.port, "bug", last)

    _server_recording(tmp_path / "rec", session, mutant)
    code = _verify(tmp_path / "rec", tmp_path / "report")
    out = capsys.readouterr().out
    assert code == 1 and "DIVERGES bug:" in out, out
    # the same session on the true server conforms
    _server_recording(tmp_path / "true", session)
    assert _verify(tmp_path / "true", tmp_path / "report2") == 0
