"""The server's own settings (``ServerOptions``), beside the coordinator's
(``core.config.CoordinatorConfig``): where it listens, the limits it enforces and what it
records."""

from __future__ import annotations

import uuid
from typing import Callable

import attrs

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_REQUEST_BYTES = 104_857_600
# Longest a Fetch is held before its empty answer (a broker's long poll; clients send 500 ms).
FETCH_WAIT_CAP_MS = 1000


def random_uuid() -> str:
    return str(uuid.uuid4())


@attrs.frozen
class ServerOptions:
    """* ``host``, ``port``: where to listen (``port=0``: a free port);
    * ``trace``: a file or directory to record every event and command in (trace format v1);
    * ``kafka_log``: a file to append the groups' changes to as Kafka 4.x's broker logs them
      (``kafka_lines``), for ``groupcoord verify --kafka-log``;
    * ``max_request_bytes``: frames above it close the connection (``socket.request.max.bytes``);
    * ``advertise_bound_port``: the bound port becomes the config's ``advertised.port``;
    * ``node_id_from_port``: the advertised port becomes the node id (several servers on one host);
    * ``fetch_wait_cap_ms``: the longest a Fetch is held;
    * ``new_uuid``: member ids' random part (tests pass a predictable one);
    * ``track_requests``: remember which requests each connection got and answered (tests);
    * ``bind_retry_s``: how long a port held only by a previous process's connections is retried."""

    host: str = "127.0.0.1"
    port: int = 9092
    trace: str | None = None
    kafka_log: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    advertise_bound_port: bool = True
    node_id_from_port: bool = False
    fetch_wait_cap_ms: int = FETCH_WAIT_CAP_MS
    new_uuid: Callable[[], str] = random_uuid
    track_requests: bool = False
    bind_retry_s: float = 30.0


@attrs.frozen
class DataSettings:
    """The partition log's broker settings (Kafka's names and defaults): ``retention_ms``
    (``log.retention.ms``; -1 keeps forever), ``retention_check_interval_ms``
    (``log.retention.check.interval.ms``: how often retention runs on a real clock; a manual
    clock's ``advance`` runs it), ``max_message_bytes`` (``message.max.bytes``: the largest
    record batch), ``num_partitions`` (a CreateTopics without a count)."""

    retention_ms: int = 604_800_000
    retention_check_interval_ms: int = 300_000
    max_message_bytes: int = 1_048_588
    num_partitions: int = 1
