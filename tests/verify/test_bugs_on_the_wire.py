"""Bugs caught on the wire: every core mutant of the catalogue applied to a running
``GroupServer`` (in this process, so the mutation reaches it), its clients recorded through
``groupcoord record``, and ``verify`` (with the true core) finds the group diverging, with a
report naming the answer and what the spec answers there; the same session on the true server
conforms.

The bugs plain consumers show run under real kafka-python consumers: the first generation 0,
the generation bumped twice, a member that disconnects and is never removed (Redpanda #3300:
the survivor's heartbeats go on answered NONE past the dead member's session). The others run
under raw clients (``RawMember``: one connection each, requests in flight together on several
connections, a member gone silent), with short real timeouts, the server's write hold (an
answer riding on a write waits for its release) and its reload; the waits are bounded reads of
answers that may not come."""

from __future__ import annotations

import contextlib
import time

import pytest
from observe_harness import RawMember, RecorderProcess, consumer_pair
from server_harness import InProcessServer, wait_until

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.tla.mutants import MUTANTS, applied
from groupcoord.adapters.wire.broker_apis import TopicCatalog
from groupcoord.core.config import CoordinatorConfig

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500}
SESSION_MS = 3000  # the workers' session timeout


def _server_recording(out, session, mutant_name: str | None = None) -> None:
    """``session(recorder, server)`` against a running server (with the mutant applied, if named)
    through ``groupcoord record`` into ``out``; the server and the recorder stopped after."""
    mutant = next((m for m in MUTANTS if m.name == mutant_name), None)
    with applied(mutant) if mutant is not None else contextlib.nullcontext():
        server = InProcessServer(config=CoordinatorConfig.from_kafka(SETTINGS), catalog=TopicCatalog.parse(["t6=6"]),
                                 storage=MemoryStorage())
        recorder = RecorderProcess(f"127.0.0.1:{server.port}", out)
        try:
            session(recorder, server)
        finally:
            recorder.stop()
            server.stop()


def _verify(path, report) -> tuple[int, str]:
    args = ["verify", str(path), "--out", str(report)]
    for k, v in SETTINGS.items():
        args += [f"--{k}", str(v)]
    return main(args)


def _consumers(kill: bool):
    def session(recorder, server) -> None:
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




# --- raw clients ---------------------------------------------------------------------------------------------

GROUP = "bug"
BOUNDED_S = 1.5  # how long an answer that must wait is waited for (the verifier's tolerance is 1 s)


def _join(m: RawMember, version: int = 3, instance: str | None = None, *, member_id: str | None = None,
          session_ms: int = 10_000, rebalance_ms: int = 10_000) -> None:
    fields = {"group_id": GROUP, "session_timeout_ms": session_ms, "rebalance_timeout_ms": rebalance_ms,
              "member_id": m.member_id if member_id is None else member_id, "protocol_type": "consumer",
              "protocols": [{"name": "range", "metadata": b""}]}
    if instance is not None:
        fields["group_instance_id"] = instance
    m.send("JoinGroup", version, fields)


def _joined(m: RawMember, timeout: float = 10) -> dict:
    got = m.answer(timeout)
    assert got is not None and got["error_code"] == 0, (m.client_id, got)
    m.member_id = got["member_id"]
    return got


def _sync(m: RawMember, gen: int, assignments: dict | None = None, instance: str | None = None) -> None:
    fields = {"group_id": GROUP, "generation_id": gen, "member_id": m.member_id,
              "assignments": [{"member_id": k, "assignment": v} for k, v in (assignments or {}).items()]}
    if instance is not None:
        fields["group_instance_id"] = instance
    m.send("SyncGroup", 3, fields)


def _heartbeat(m: RawMember, gen: int, instance: str | None = None, member_id: str | None = None) -> dict:
    return m.call("Heartbeat", 3, {"group_id": GROUP, "generation_id": gen, "group_instance_id": instance,
                                   "member_id": m.member_id if member_id is None else member_id})


def _commit(m: RawMember, gen: int, offset: int = 5) -> None:
    m.send("OffsetCommit", 8, {"group_id": GROUP, "generation_id_or_member_epoch": gen, "member_id": m.member_id,
                               "topics": [{"name": "t6", "partitions": [
                                   {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}]}]})


def _alone(port: int, instance: str | None = None, sync: bool = True, **timeouts) -> tuple[RawMember, int]:
    """One member joins the new group (alone: answered at once) and, with ``sync``, syncs."""
    m = RawMember(port, instance or "c1")
    _join(m, 5 if instance else 3, instance, **timeouts)
    gen = _joined(m)["generation_id"]
    if sync:
        _sync(m, gen, {m.member_id: b"a"}, instance)
        assert m.answer()["error_code"] == 0
    return m, gen


def _pair(port: int, **timeouts) -> tuple[RawMember, RawMember, int]:
    """Two members in one generation, answered its JoinGroup and not synced yet: c1 forms the
    group alone; c2's join starts a rebalance, which c1's heartbeat learns and its rejoin ends."""
    c1, gen = _alone(port, **timeouts)
    c2 = RawMember(port, "c2")
    _join(c2, **timeouts)
    assert c2.answer(0.2) is None  # parked until c1 rejoins
    assert _heartbeat(c1, gen)["error_code"] == 27  # REBALANCE_IN_PROGRESS
    _join(c1, **timeouts)
    gen2 = _joined(c1)["generation_id"]
    assert _joined(c2)["generation_id"] == gen2
    return c1, c2, gen2


def _stopped(*members: RawMember) -> None:
    for m in members:
        m.close()


def _static_replaced_completing(recorder, server) -> None:
    """A static member's new instance (same instance id, no member id) joins while the group
    completes its rebalance (KAFKA-8500, KAFKA-9801)."""
    s1, _ = _alone(recorder.port, "i1", sync=False)
    s1b = RawMember(recorder.port, "i1-restarted")
    _join(s1b, 5, "i1", member_id="")
    s1b.answer(BOUNDED_S)
    _stopped(s1, s1b)


def _fenced_heartbeat(recorder, server) -> None:
    """A heartbeat naming a member with another instance id than the member's (KIP-345 fencing)."""
    s1, gen = _alone(recorder.port, "i1")
    other = RawMember(recorder.port, "i2")
    _heartbeat(other, gen, instance="i2", member_id=s1.member_id)
    _stopped(s1, other)


def _static_replaced_behind_a_commit(recorder, server) -> None:
    """Writes held: a commit waits on its write; then a static member's new instance joins the
    Stable group, whose answer rides on a later write (KAFKA-10284); then writes are released."""
    s1, gen = _alone(recorder.port, "i1")
    server.call(server.server.controls.hold_writes)
    _commit(s1, gen)
    s1b = RawMember(recorder.port, "i1-restarted")
    _join(s1b, 5, "i1", member_id="")
    early = s1b.answer(BOUNDED_S)
    server.call(server.server.controls.release_writes)
    assert s1.answer() is not None and (early is not None or s1b.answer() is not None)
    _stopped(s1, s1b)


def _describe_behind_a_sync(recorder, server) -> None:
    """Writes held: the leader's SyncGroup waits on its write; DescribeGroups meanwhile shows the
    members' assignments (none until the write is acknowledged); then writes are released."""
    c1, gen = _alone(recorder.port, sync=False)
    server.call(server.server.controls.hold_writes)
    _sync(c1, gen, {c1.member_id: b"a"})
    admin = RawMember(recorder.port, "admin")
    admin.call("DescribeGroups", 5, {"groups": [GROUP], "include_authorized_operations": False})
    assert c1.answer(BOUNDED_S) is None  # its write is held
    server.call(server.server.controls.release_writes)
    assert c1.answer()["error_code"] == 0
    _stopped(c1, admin)


def _follower_syncs_first(recorder, server) -> None:
    """The follower's SyncGroup, carrying assignments of its own, comes before the leader's."""
    c1, c2, gen = _pair(recorder.port)
    _sync(c2, gen, {c1.member_id: b"F1", c2.member_id: b"F2"})
    early = c2.answer(BOUNDED_S)
    _sync(c1, gen, {c1.member_id: b"L1", c2.member_id: b"L2"})
    assert c1.answer() is not None and (early is not None or c2.answer() is not None)
    _stopped(c1, c2)


def _leave_while_rejoining(recorder, server) -> None:
    """c1 rejoins (a rebalance waiting for c2), then c2 leaves: the join phase can complete."""
    c1, c2, gen = _pair(recorder.port, rebalance_ms=4000)
    _sync(c1, gen, {c1.member_id: b"a1", c2.member_id: b"a2"})
    _sync(c2, gen)
    assert c1.answer()["error_code"] == 0 and c2.answer()["error_code"] == 0
    _join(c1, rebalance_ms=4000)
    assert c2.call("LeaveGroup", 3, {"group_id": GROUP, "members": [{"member_id": c2.member_id}]})["error_code"] == 0
    assert c1.answer(8) is not None
    _stopped(c1, c2)


def _leader_silent(session_ms: int, rebalance_ms: int, wait_s: float):
    def session(recorder, server) -> None:
        """The follower syncs; the leader, answered its JoinGroup, says nothing more: its session
        and the sync timer end the wait (answered or not within ``wait_s``)."""
        c1, c2, gen = _pair(recorder.port, session_ms=session_ms, rebalance_ms=rebalance_ms)
        _sync(c2, gen)
        c2.answer(wait_s)
        _stopped(c1, c2)
    return session


def _fetch_after_reload(recorder, server) -> None:
    """A member commits and leaves; the coordinator is reloaded from its log (invisible on the
    wire); the group's offsets are fetched."""
    c1, gen = _alone(recorder.port)
    _commit(c1, gen)
    assert c1.answer()["topics"][0]["partitions"][0]["error_code"] == 0
    assert c1.call("LeaveGroup", 3, {"group_id": GROUP, "members": [{"member_id": c1.member_id}]})["error_code"] == 0
    server.run(server.server.controls.reload())
    admin = RawMember(recorder.port, "admin")
    admin.call("OffsetFetch", 7, {"group_id": GROUP, "topics": None, "require_stable": True})
    _stopped(c1, admin)


def _heartbeat_into_empty(recorder, server) -> None:
    c1, gen = _alone(recorder.port)
    c1.call("LeaveGroup", 3, {"group_id": GROUP, "members": [{"member_id": c1.member_id}]})
    _heartbeat(c1, gen)
    _stopped(c1)


def _stale_commit(recorder, server) -> None:
    c1, gen = _alone(recorder.port)
    _commit(c1, gen - 1)
    c1.answer()
    _stopped(c1)


# mutant -> (session, words the divergence report must hold: what a person acts on)
RAW_SESSIONS = {
    "heartbeat-empty-none": (_heartbeat_into_empty, "Heartbeat"),
    "commit-from-stale-generation": (_stale_commit, "OffsetCommit"),
    "static-rejoin-keeps-old-id": (_static_replaced_completing, "JoinGroup"),
    "static-join-completing-no-rebalance": (_static_replaced_completing, "JoinGroup"),
    "fenced-static-none": (_fenced_heartbeat, "Heartbeat v3 (line 3): error_code: spec UNKNOWN_MEMBER_ID (25), broker NONE (0)"),
    "static-replace-not-persisted": (_static_replaced_behind_a_commit, "JoinGroup"),
    "assignment-before-write": (_describe_behind_a_sync, "DescribeGroups"),
    "follower-assignment-accepted": (_follower_syncs_first, "SyncGroup"),
    "leave-in-preparing-no-complete": (_leave_while_rejoining, "JoinGroup"),
    "no-sync-timer": (_leader_silent(10_000, 2000, 4.5), "SyncGroup"),
    "session-timer-rebalance-length": (_leader_silent(1500, 8000, 4), "SyncGroup"),
    "load-drops-offsets": (_fetch_after_reload, "OffsetFetch"),
}
CONSUMER_MUTANTS = ("first-generation-zero", "generation-bumped-twice", "disconnected-never-removed")


def test_every_core_mutant_of_the_catalogue_is_run_on_the_wire():
    assert {m.name for m in MUTANTS if m.core} == set(RAW_SESSIONS) | set(CONSUMER_MUTANTS)


@pytest.mark.parametrize("mutant", sorted(RAW_SESSIONS))
def test_a_bug_a_raw_client_shows_diverges(tmp_path, capsys, mutant):
    session, words = RAW_SESSIONS[mutant]
    _server_recording(tmp_path / "rec", session, mutant)
    code = _verify(tmp_path / "rec", tmp_path / "report")
    out = capsys.readouterr().out
    assert code == 1 and "DIVERGES bug:" in out and words in out, out
    # the same session on the true server conforms
    _server_recording(tmp_path / "true", session)
    code = _verify(tmp_path / "true", tmp_path / "report2")
    out = capsys.readouterr().out
    assert code == 0, out
