"""The broker APIs around the group coordinator: ApiVersions, Metadata, the topic catalog, and
KafkaApis' topic checks before OffsetCommit/OffsetDelete reach the coordinator.

Everything here is a pure function from a request's fields (dicts with Kafka's snake_case
names, see ``kafka_codec.to_fields``) to the response's fields. The data plane (Produce, Fetch,
ListOffsets, topics, DeleteRecords, InitProducerId) is ``data_plane``'s, on the partition log.
"""

from __future__ import annotations

import re
import uuid
from typing import Iterable

import attrs

from groupcoord.adapters.protocol import schema
from groupcoord.adapters.protocol.codec import API_KEYS
from groupcoord.core.errors import Error

INT32_MIN = -2147483648
ZERO_UUID = uuid.UUID(int=0)
_TOPIC_NAMESPACE = uuid.UUID("6f1c2b1e-6a53-4c8e-9a35-6b0e5b7d2c11")

# Extra error codes of the data-plane APIs (not in core.errors: the coordinator never uses them).
UNKNOWN_TOPIC_ID = 100

# ACL operation bits (AclOperation codes) that Kafka reports when no authorizer is configured:
# every operation the resource type supports.
_OPS = {"READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
        "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12,
        "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}


def _bits(*names: str) -> int:
    return sum(1 << _OPS[n] for n in names)


GROUP_OPERATIONS = _bits("READ", "DESCRIBE", "DELETE")  # 328
TOPIC_OPERATIONS = _bits("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
                         "DESCRIBE_CONFIGS", "ALTER_CONFIGS")
CLUSTER_OPERATIONS = _bits("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                           "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE", "CREATE_TOKENS", "DESCRIBE_TOKENS")

# --- what is served ---------------------------------------------------------------------------

API_VERSIONS_KEY = API_KEYS["ApiVersions"]
API_VERSIONS_RANGE = (0, 4)
# The data plane (wire/data_plane.py, spec/data-plane.md): the versions kio reads, covering what
# kafka-python 3.x, aiokafka 0.14 and confluent-kafka 2.16 send (each takes the highest both
# sides have); Produce from v3, the first with record batches v2. The transactional APIs are
# answered UNSUPPORTED_VERSION (no transactions).
DATA_PLANE_RANGES = {
    API_KEYS["Produce"]: (3, 11), API_KEYS["Fetch"]: (4, 17), API_KEYS["ListOffsets"]: (1, 9),
    API_KEYS["Metadata"]: (0, 12), API_KEYS["InitProducerId"]: (0, 5), API_KEYS["CreateTopics"]: (2, 7),
    API_KEYS["DeleteTopics"]: (1, 6), API_KEYS["DeleteRecords"]: (0, 2),
    API_KEYS["AddPartitionsToTxn"]: (0, 3), API_KEYS["AddOffsetsToTxn"]: (0, 3), API_KEYS["EndTxn"]: (0, 3),
    API_KEYS["TxnOffsetCommit"]: (0, 3),
}


def served_versions() -> dict[int, tuple[int, int]]:
    """api key -> (min, max) of every API this server answers. Exactly what ApiVersions
    advertises: the coordinator's APIs at the versions the core supports, and the stand-ins."""
    served = {API_VERSIONS_KEY: API_VERSIONS_RANGE, **DATA_PLANE_RANGES}
    for api, versions in schema.SUPPORTED_VERSIONS.items():
        served[schema.API_KEYS[api]] = versions
    return dict(sorted(served.items()))


# --- topics -----------------------------------------------------------------------------------

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")  # fullmatch, as Java's matches(): "$" would let a trailing "\n" pass
MAX_TOPIC_NAME = 249


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name (Topic.validate), or None."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"{name!r} is not allowed"
    if len(name) > MAX_TOPIC_NAME:
        return f"longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.fullmatch(name):
        return "legal characters are ASCII letters, digits, '.', '_' and '-'"
    return None


@attrs.frozen
class TopicCatalog:
    """The topics this broker knows: name -> partition count. ``open`` (tests, the conformance
    format without ``topics``) means every topic exists with every partition named.
    ``auto_create_partitions`` (``num.partitions`` when ``auto.create.topics.enable`` is
    true, else None): a topic a Metadata request asks for that does not exist is created with
    that many partitions (``create``)."""

    topics: dict = attrs.field(factory=dict)
    open: bool = False
    auto_create_partitions: int | None = None

    @classmethod
    def parse(cls, specs: Iterable[str]) -> "TopicCatalog":
        """From ``NAME=PARTITIONS`` strings; ValueError names the bad one."""
        topics: dict[str, int] = {}
        for spec in specs:
            name, sep, count = spec.rpartition("=")
            if not sep:
                raise ValueError(f"topic {spec!r}: expected NAME=PARTITIONS")
            problem = topic_name_problem(name)
            if problem:
                raise ValueError(f"topic {name!r}: {problem}")
            try:
                n = int(count)
            except ValueError:
                raise ValueError(f"topic {spec!r}: PARTITIONS must be an integer") from None
            if n < 1:
                raise ValueError(f"topic {name!r}: needs at least 1 partition, got {n}")
            topics[name] = n
        return cls(topics)

    def partitions(self, name: str) -> int | None:
        count = self.topics.get(name)
        if count is None and self.open and topic_name_problem(name) is None:
            return 1
        return count

    def has_partition(self, name: str, partition: int) -> bool:
        if name in self.topics:
            return 0 <= partition < self.topics[name]
        return self.open and partition >= 0 and topic_name_problem(name) is None

    def create(self, name: str) -> None:
        """Auto-create ``name`` (the catalog's dict is the broker's topic list: it grows)."""
        self.topics.setdefault(name, self.auto_create_partitions)

    def names(self) -> list[str]:
        return sorted(self.topics)

    @staticmethod
    def topic_id(name: str) -> uuid.UUID:
        """A stable, non-zero id per name (librdkafka fetches by topic id from Fetch v13)."""
        return uuid.uuid5(_TOPIC_NAMESPACE, name)

    def image(self) -> tuple[tuple[str, str, int], ...]:
        """The topics as the core's metadata image (``TopicsChanged.topics``): ``(name, topic id
        as str(uuid), partition count)``, by name. An ``open`` catalog's topics that were never
        named are not in it."""
        return tuple((name, str(self.topic_id(name)), count) for name, count in sorted(self.topics.items())
                     if count is not None)

    def name_of(self, topic_id: uuid.UUID | None) -> str | None:
        if topic_id is None:
            return None
        for name in self.topics:
            if self.topic_id(name) == topic_id:
                return name
        return None


@attrs.frozen
class Node:
    node_id: int
    host: str
    port: int


# --- ApiVersions --------------------------------------------------------------------------------

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")  # fullmatch, as Java's matches()


def api_versions(version: int, request: dict, served: dict[int, tuple[int, int]]) -> dict:
    if version >= 3 and not (_SOFTWARE.fullmatch(request.get("client_software_name") or "")
                             and _SOFTWARE.fullmatch(request.get("client_software_version") or "")):
        # ApiVersionsRequest.isValid; its error response lists no APIs
        return {"error_code": int(Error.INVALID_REQUEST), "throttle_time_ms": 0, "api_keys": []}
    return {"error_code": int(Error.NONE), "throttle_time_ms": 0, "finalized_features_epoch": -1,
            "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                         for k, (lo, hi) in served.items()]}


def api_versions_unsupported() -> dict:
    """Kafka's answer to an ApiVersions version it does not know: v0, UNSUPPORTED_VERSION, and
    only ApiVersions' own range, so the client retries with a version it finds there."""
    lo, hi = API_VERSIONS_RANGE
    return {"error_code": int(Error.UNSUPPORTED_VERSION),
            "api_keys": [{"api_key": API_VERSIONS_KEY, "min_version": lo, "max_version": hi}]}


# --- Metadata ---------------------------------------------------------------------------------

def metadata(version: int, request: dict, catalog: TopicCatalog, node: Node,
             cluster_id: str = "groupcoord") -> dict:
    wanted = request.get("topics")
    if wanted is None or (version == 0 and not wanted):
        names: list = [(n, None) for n in catalog.names()]
    else:
        names = [(t.get("name"), t.get("topic_id")) for t in wanted]
        if version < 12 and any(n is None or (i is not None and i != ZERO_UUID) for n, i in names):
            # KafkaApis: topic ids are not supported before v12 -> InvalidRequestException, whose
            # error response gives every requested topic INVALID_REQUEST.
            return {"throttle_time_ms": 0, "brokers": [], "topics": [
                {"error_code": int(Error.INVALID_REQUEST), "name": n or "", "topic_id": i or ZERO_UUID,
                 "is_internal": False, "partitions": []} for n, i in names]}
    topic_ops = TOPIC_OPERATIONS if request.get("include_topic_authorized_operations") else INT32_MIN
    # KafkaApis: auto-creation needs the broker setting and the request's flag (v4+; true
    # before), and never happens for an all-topics request.
    auto_create = (catalog.auto_create_partitions is not None and wanted is not None
                   and request.get("allow_auto_topic_creation", True) is not False)
    topics = []
    for name, topic_id in names:
        if name is None:  # by id (v12+)
            name = catalog.name_of(topic_id) if topic_id != ZERO_UUID else None
            if name is None:
                topics.append({"error_code": UNKNOWN_TOPIC_ID, "name": None, "topic_id": topic_id or ZERO_UUID,
                               "partitions": [], "topic_authorized_operations": INT32_MIN})
                continue
        count = catalog.partitions(name)
        if count is None:
            error = Error.INVALID_TOPIC_EXCEPTION if topic_name_problem(name) else Error.UNKNOWN_TOPIC_OR_PARTITION
            if error == Error.UNKNOWN_TOPIC_OR_PARTITION and auto_create:
                # A KRaft broker asks the controller to create it and answers this request
                # UNKNOWN_TOPIC_OR_PARTITION (AutoTopicCreationManager.sendCreateTopicRequest);
                # the client's next Metadata finds it.
                catalog.create(name)
            topics.append({"error_code": int(error), "name": name, "topic_id": ZERO_UUID, "is_internal": False,
                           "partitions": [], "topic_authorized_operations": INT32_MIN})
            continue
        topics.append({
            "error_code": 0, "name": name, "topic_id": catalog.topic_id(name), "is_internal": False,
            "partitions": [{"error_code": 0, "partition_index": i, "leader_id": node.node_id, "leader_epoch": 0,
                            "replica_nodes": [node.node_id], "isr_nodes": [node.node_id],
                            "offline_replicas": []} for i in range(count)],
            "topic_authorized_operations": topic_ops})
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": node.node_id, "host": node.host, "port": node.port, "rack": None}],
        "cluster_id": cluster_id, "controller_id": node.node_id, "topics": topics,
        "cluster_authorized_operations": (CLUSTER_OPERATIONS if request.get("include_cluster_authorized_operations")
                                          else INT32_MIN),
        "error_code": 0,
    }


# --- KafkaApis' topic checks before the coordinator ----------------------------------------------

def split_known_partitions(topics: list, catalog: TopicCatalog, index_key: str) -> tuple[list, list]:
    """(the topics with only known partitions, per-topic results for the unknown ones), as
    KafkaApis does before OffsetCommit and OffsetDelete reach the coordinator."""
    known, rejected = [], []
    for topic in topics:
        good, bad = [], []
        for p in topic.get("partitions") or ():
            (good if catalog.has_partition(topic["name"], p[index_key]) else bad).append(p)
        if good:
            known.append({**topic, "partitions": good})
        if bad:
            rejected.append({"name": topic["name"], "partitions": [
                {"partition_index": p[index_key], "error_code": int(Error.UNKNOWN_TOPIC_OR_PARTITION)}
                for p in bad]})
    return known, rejected


def merge_topic_results(rejected: list, results: list) -> list:
    """The response's topics: KafkaApis' rejections first, then the coordinator's results
    (merged into the same topic entry when a topic has both)."""
    out = [{"name": t["name"], "partitions": list(t["partitions"])} for t in rejected]
    by_name = {t["name"]: t for t in out}
    for topic in results:
        if topic["name"] in by_name:
            by_name[topic["name"]]["partitions"].extend(topic["partitions"])
        else:
            entry = {"name": topic["name"], "partitions": list(topic["partitions"])}
            by_name[topic["name"]] = entry
            out.append(entry)
    return out
