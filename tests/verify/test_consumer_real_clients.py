"""Consumer groups (KIP-848) on the wire, judged: real librdkafka consumers
(``group.protocol=consumer``) through ``groupcoord record`` in front of a running server (the
library's in-process ``serve``, memory storage), then ``verify`` with the true core.

With a fault planted in the running server's core (its reconciliation no longer waits for a
partition's previous owner to release it: a new member is given partitions the old one still
holds), the group diverges, the finding named; the same session on the true server conforms."""

from __future__ import annotations

import pytest
from kip848_clients import owned, poll_until
from observe_harness import RecorderProcess
from server_harness import InProcessServer

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.observe import trace
from groupcoord.adapters.storage.memory import MemoryStorage
from groupcoord.adapters.verify import topics
from groupcoord.adapters.wire.broker_apis import TopicCatalog
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.consumer import reconcile

SETTINGS = {"group.consumer.heartbeat.interval.ms": 500, "group.consumer.session.timeout.ms": 10000}
OWNED = ('ConsumerGroupHeartbeat v1 assignment: "partitions their owners released" vs "a partition another member '
         'still owns"')


def _session(tmp_path, group: str) -> None:
    """Two consumers: a takes all six partitions, b joins and they share them, a leaves."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    server = InProcessServer(config=CoordinatorConfig.from_kafka(SETTINGS), catalog=TopicCatalog.parse(["t6=6"]),
                             storage=MemoryStorage())
    recorder = RecorderProcess(f"127.0.0.1:{server.port}", tmp_path / "rec")
    consumers = []
    try:
        def consumer(name):
            c = confluent_kafka.Consumer({
                "bootstrap.servers": recorder.bootstrap, "group.id": group, "group.protocol": "consumer",
                "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "broker.address.family": "v4"})
            c.subscribe(["t6"])
            consumers.append(c)
            return c

        a = consumer("a")
        poll_until(consumers, lambda: owned(a) == list(range(6)), "a to own all six")
        b = consumer("b")
        poll_until(consumers, lambda: owned(b) and len(owned(a)) + len(owned(b)) >= 6, "b to be given some")
        a.close()  # leaves (member epoch -1)
        consumers.remove(a)
        poll_until(consumers, lambda: owned(b) == list(range(6)), "b to own all six")
    finally:
        for c in consumers:
            c.close()
        recorder.stop()
        server.stop()


def _verify(tmp_path, capsys) -> tuple[int, str]:
    args = ["verify", str(tmp_path / "rec"), "--out", str(tmp_path / "report")]
    for k, v in SETTINGS.items():
        args += [f"--{k}", str(v)]
    code = main(args)
    return code, capsys.readouterr().out


def test_real_consumers_of_the_true_server_conform(tmp_path, capsys):
    _session(tmp_path, "kip848-true")
    records = trace.read_observed(tmp_path / "rec")
    assert {"ConsumerGroupHeartbeat"} <= {r["api"] for r in records}
    seen = topics.read(tmp_path / "rec")  # the Metadata answers' topics, in meta.json
    assert seen is not None and "t6" in seen.base() and seen.base()["t6"][1] == 6, seen
    code, out = _verify(tmp_path, capsys)
    assert code == 0 and "1 conform" in out, out


def test_a_partition_given_before_its_owner_released_it_diverges(tmp_path, capsys, monkeypatch):
    true_next = reconcile._next

    def eager(member, epoch, target, target_epoch, subscribed, partition_epochs, owned):
        # the planted fault: every partition of the target is free, whoever still owns it
        return true_next(member, epoch, target, target_epoch, subscribed, {}, owned)
    monkeypatch.setattr(reconcile, "_next", eager)
    _session(tmp_path, "kip848-fault")
    monkeypatch.undo()  # verify judges with the true core
    assert reconcile._next is true_next
    code, out = _verify(tmp_path, capsys)
    assert code == 1 and "DIVERGES kip848-fault:" in out, out
    assert f"finding: {OWNED}" in out, out
