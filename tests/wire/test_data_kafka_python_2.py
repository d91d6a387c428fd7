"""kafka-python 2.x (2.0.2, the last 2.x release; .ci/bootstrap installs it beside the venv's 3.x,
in .venv/kafka-python-2) produces and consumes through the data plane (issue #36: every version
kafka-python 2.x and 3.x send): a gzip producer with acks=all, a consumer group reading each
record once and committing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from groupcoord.testing import start_server

KP2 = Path(__file__).resolve().parents[2] / ".venv" / "kafka-python-2"

CLIENT = r"""
import json, sys, time
import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
bootstrap = sys.argv[1]
producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
for i in range(300):
    producer.send("k2", key=b"k%d" % (i % 7), value=b"v%d" % i)
producer.flush(10)
producer.close()
consumer = KafkaConsumer("k2", bootstrap_servers=bootstrap, group_id="g2", auto_offset_reset="earliest",
                         enable_auto_commit=False)
got = []
deadline = time.monotonic() + 30
while len(got) < 300 and time.monotonic() < deadline:
    for records in consumer.poll(timeout_ms=500).values():
        got += [r.value.decode() for r in records]
consumer.commit()
committed = sum(consumer.committed(TopicPartition("k2", p)) or 0 for p in range(3))
consumer.close()
print(json.dumps({"version": kafka.__version__, "read": got, "committed": committed}))
"""


def test_kafka_python_2_produces_and_consumes():
    if not (KP2 / "kafka").is_dir():
        pytest.fail(f"kafka-python 2.x is not installed in {KP2}: .ci/bootstrap installs it")
    server = start_server({"k2": 3})
    try:
        out = subprocess.run([sys.executable, "-c", CLIENT, server.bootstrap], capture_output=True, text=True,
                             timeout=90, env={**os.environ, "PYTHONPATH": str(KP2)})
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["version"].startswith("2.")
    assert sorted(result["read"], key=lambda v: int(v[1:])) == [f"v{i}" for i in range(300)]
    assert result["committed"] == 300  # every partition's position committed
