"""``groupcoord record`` in front of ``groupcoord serve`` while confluent-kafka produces (acks=all,
idempotent, and acks=0) and a consumer group reads it all back: the data plane's pairs (Produce,
Fetch, ListOffsets, InitProducerId) are counted in meta.json and in the stop line, never written
as records, so ``verify`` judges the group alone, finds it conforming, and lists them as not
checked."""

from __future__ import annotations

import signal

from observe_harness import RecorderProcess
from server_harness import ServerProcess, wait_until

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.observe.trace import RECORDED_APIS

SETTINGS = ["--group.initial.rebalance.delay.ms", "0", "--group.min.session.timeout.ms", "500"]


def test_data_plane_pairs_are_counted_not_recorded(tmp_path, started, capsys):
    from confluent_kafka import Consumer, Producer

    server = started(ServerProcess, topics=("d=1",))
    recorder = started(RecorderProcess, server.bootstrap, tmp_path / "rec")
    producer = Producer({"bootstrap.servers": recorder.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0})
    for i in range(20):
        producer.produce("d", f"m{i}".encode(), key=b"k")
        producer.flush(30)  # one Produce each, answered
    assert producer.flush(30) == 0
    fire_and_forget = Producer({"bootstrap.servers": recorder.bootstrap, "acks": 0, "linger.ms": 0})
    for i in range(3):
        fire_and_forget.produce("d", f"a{i}".encode(), key=b"k")
        fire_and_forget.flush(30)
    consumer = Consumer({"bootstrap.servers": recorder.bootstrap, "group.id": "readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["d"])
    seen: list[bytes] = []

    def read_all() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen.append(msg.value())
        return len(seen) == 23

    wait_until(read_all, 60, "23 messages consumed through the proxy")
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(seen) == sorted([f"m{i}".encode() for i in range(20)] + [f"a{i}".encode() for i in range(3)])

    assert recorder.stop(signal.SIGINT) == 130, recorder.log()
    meta = recorder.meta()
    pairs, passed = meta["data_plane_pairs"], meta["passed_through"]
    assert pairs["Produce"] >= 20 and pairs["Fetch"] >= 1 and pairs["ListOffsets"] >= 1, meta
    assert pairs["InitProducerId"] == 1, meta
    # every acks=all Produce was answered and counted; the acks=0 ones passed through unanswered
    assert passed["Produce"] - pairs["Produce"] == 3, meta
    assert all(pairs[api] <= passed[api] for api in pairs), meta
    stopped = next(line for line in recorder.log() if line.startswith("stopped: "))
    assert "data-plane pairs counted, not recorded: " in stopped and f"Produce {pairs['Produce']}" in stopped, stopped

    records = recorder.records()
    assert {r["api"] for r in records} <= set(RECORDED_APIS), {r["api"] for r in records}
    assert {"JoinGroup", "SyncGroup", "OffsetCommit"} <= {r["api"] for r in records}
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "rec"), *SETTINGS]) == 0
    out = capsys.readouterr().out
    assert "1 groups: 1 conform" in out
    # the summary counts them as not checked, by API
    assert f"not checked: {pairs['Fetch']} Fetch pairs (the data plane: counted by record, not recorded)" in out, out
    assert f"not checked: {pairs['Produce']} Produce pairs (the data plane" in out, out
