"""Each request frame: decoded by kio, checked against the versions this server serves, then
answered at once by the broker APIs (``broker_apis``), by the data plane on the partition log
(``data_plane``), or made into a core event.

Group and offset APIs become core events (``protocol.translate.request_event``; request
ids are ``(connection id, correlation id)``) parked in the replies until the core answers;
one the core does not answer at once is logged ``parked`` at debug level (what a test of a
server process waits for before it acts on the parked request).
Before the core sees them, KafkaApis' own checks are made here: partitions of unknown topics
in OffsetCommit/OffsetDelete are answered without it, and with several coordinators
(``ownership``) FindCoordinator is answered from the ownership map. A request that cannot be
decoded, an API or version not served, or a handler that raises closes the connection, as
Kafka does. A core that raises is not the handler's concern: the core loop answers every
request the failed instance held with NOT_COORDINATOR and replaces it (``core_loop``).
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any

from groupcoord.adapters.data.log import DataLog
from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.protocol.schema import SchemaError
from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.core_loop import CoreLoop, core_handles
from groupcoord.adapters.wire.data_plane import DataPlane
from groupcoord.adapters.wire.fast_frames import HEARTBEAT_KEY, OFFSET_COMMIT_KEY, HeartbeatReader, read_offset_commit
from groupcoord.adapters.wire.options import ServerOptions
from groupcoord.adapters.wire.replies import Replies, consumer_protocol_error
from groupcoord.core import events as ev
from groupcoord.core.commands import Coordinator as CoordinatorEndpoint
from groupcoord.core.commands import FindCoordinatorResponse, SyncGroupResponse
from groupcoord.core.errors import Error

_HEARTBEAT_KEY = HEARTBEAT_KEY.to_bytes(2, "big")
_OFFSET_COMMIT_KEY = OFFSET_COMMIT_KEY.to_bytes(2, "big")

if TYPE_CHECKING:
    from groupcoord.adapters.wire.listener import Connection

_CORE_APIS = {kc.API_KEYS[name]: name for name in
              ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
               "DescribeGroups", "ListGroups", "DeleteGroups", "OffsetDelete", "FindCoordinator",
               "ConsumerGroupHeartbeat", "ConsumerGroupDescribe")}
# The random part of an id the coordinator may hand a new member: JoinGroup's member ids, and
# ConsumerGroupHeartbeat v0's (from v1 the client makes its own).
_NEW_MEMBER_UUID_APIS = frozenset({"JoinGroup", "ConsumerGroupHeartbeat"})


class RequestHandler:
    def __init__(self, core: CoreLoop, replies: Replies, catalog: apis.TopicCatalog, options: ServerOptions,
                 log: Any, ownership: Any = None, data_log: DataLog | None = None, default_partitions: int = 1) -> None:
        self.core = core
        self.replies = replies
        self.catalog = catalog
        self.options = options
        self.log = log
        self.ownership = ownership
        self.clock = core.clock  # the time of the core's events
        self.served = apis.served_versions()
        self._heartbeat_versions = self.served[HEARTBEAT_KEY]
        self._heartbeat_reader = HeartbeatReader(self._heartbeat_versions[1])
        self._commit_versions = self.served[OFFSET_COMMIT_KEY]
        self.closing = False  # set by the server's shutdown
        # the data plane: Produce, Fetch, ListOffsets, topics, DeleteRecords, InitProducerId
        self.data = DataPlane(data_log if data_log is not None else DataLog(self.clock.now_ms), catalog, self.clock,
                              options, self._send_fields, core.topics_changed, default_partitions)
        self._handlers = {
            apis.API_VERSIONS_KEY: self._api_versions, kc.API_KEYS["Metadata"]: self._metadata,
            **self.data.handlers(),
            **{key: self._core_request for key in _CORE_APIS},
        }

    def connection_lost(self, conn: Connection) -> None:
        self.replies.forget(conn)

    def handle_frame(self, conn: Connection, frame: bytes) -> None:
        """One request frame (size prefix stripped); the answer goes to ``conn.send``."""
        if self.log.threshold > 10:  # the fast paths (no debug lines to log)
            api_key = frame[:2]
            if api_key == _HEARTBEAT_KEY:
                fields = self._heartbeat_reader.read(frame)
                if fields is not None and fields[0] >= self._heartbeat_versions[0]:
                    conn.correlation_id = fields[1]
                    self._run(conn, HEARTBEAT_KEY, fields[0], self._heartbeat, fields)
                    return
            elif api_key == _OFFSET_COMMIT_KEY:
                fields = read_offset_commit(frame, self._commit_versions[1])
                if fields is not None and fields[0] >= self._commit_versions[0] and self._all_known(fields[8]):
                    conn.correlation_id = fields[1]
                    self._run(conn, OFFSET_COMMIT_KEY, fields[0], self._offset_commit, fields)
                    return
        conn.correlation_id = int.from_bytes(frame[4:8], "big", signed=True) if len(frame) >= 8 else None
        try:
            request = kc.decode_request(frame)
        except kc.UnsupportedRequest as e:
            if e.api_key == apis.API_VERSIONS_KEY:
                self._api_versions_unsupported(conn, e.correlation_id)
            else:
                self.log("warning", "unsupported_request", conn=conn.id, peer=conn.peer_text, api_key=e.api_key,
                         version=e.version, client_id=e.client_id, action="close")
                conn.close()
            return
        except kc.FrameError as e:
            self.log("warning", "bad_frame", conn=conn.id, peer=conn.peer_text, error=str(e), action="close")
            conn.close()
            return
        if self.log.threshold <= 10:
            self.log("debug", "request", conn=conn.id, api_key=request.api_key, version=request.version,
                     correlation_id=request.correlation_id, client_id=request.client_id)
        versions = self.served.get(request.api_key)
        if versions is None or not versions[0] <= request.version <= versions[1]:
            if request.api_key == apis.API_VERSIONS_KEY:
                self._api_versions_unsupported(conn, request.correlation_id)
            else:  # Kafka: "api key .. with version .. which is not enabled" -> close
                self.log("warning", "unsupported_request", conn=conn.id, peer=conn.peer_text,
                         api_key=request.api_key, version=request.version, client_id=request.client_id,
                         action="close")
                conn.close()
            return
        self._run(conn, request.api_key, request.version, self._handlers[request.api_key], request)

    def _run(self, conn: Connection, api_key: int, version: int, handler: Any, request: Any) -> None:
        try:
            handler(conn, request)
        except Exception as e:
            self.log("error", "request_error", conn=conn.id, peer=conn.peer_text, api_key=api_key,
                     version=version, error=f"{type(e).__name__}: {e}",
                     traceback=traceback.format_exc()[-4000:], action="close")
            conn.close()

    def _heartbeat(self, conn: Connection, fields: tuple) -> None:
        """A Heartbeat read by ``read_heartbeat``: what ``_core_request`` does with one, without kio."""
        version, correlation_id, client_id, group_id, generation_id, member_id, instance_id = fields
        rid = (conn.id, correlation_id)
        event = ev.Heartbeat(request_id=rid, now_ms=self.clock.now_ms(), version=version, client_id=client_id or "",
                             client_host=conn.client_host, group_id=group_id, generation_id=generation_id,
                             member_id=member_id, group_instance_id=instance_id)
        self.replies.park_request(rid, conn, HEARTBEAT_KEY, "Heartbeat", version, correlation_id, None, event)
        self.core.dispatch(event)

    def _all_known(self, topics: tuple) -> bool:
        """An OffsetCommit names partitions, all in the catalog: the coordinator answers all of
        it (else the general path answers what KafkaApis answers itself: unknown partitions, and
        a request left with none)."""
        has_partition = self.catalog.has_partition
        return bool(topics) and all(partitions and all(has_partition(name, p.partition_index) for p in partitions)
                                    for name, partitions in topics)

    def _offset_commit(self, conn: Connection, fields: tuple) -> None:
        """An OffsetCommit read by ``read_offset_commit``, every partition known: what
        ``_core_request`` does with one, without kio."""
        (version, correlation_id, client_id, group_id, generation_id, member_id, instance_id, retention_time_ms,
         topics) = fields
        rid = (conn.id, correlation_id)
        event = ev.OffsetCommit(request_id=rid, now_ms=self.clock.now_ms(), version=version,
                                client_id=client_id or "", client_host=conn.client_host, group_id=group_id,
                                generation_id=generation_id, member_id=member_id, group_instance_id=instance_id,
                                retention_time_ms=retention_time_ms, topics=topics)
        self.replies.park_request(rid, conn, OFFSET_COMMIT_KEY, "OffsetCommit", version, correlation_id, None, event)
        self.core.dispatch(event)

    def _send_fields(self, conn: Connection, request: kc.DecodedRequest, fields: dict) -> None:
        body = kc.response_body(request.api_key, request.version, fields)
        conn.send(kc.encode_response(request.api_key, request.version, request.correlation_id, body))

    def _api_versions_unsupported(self, conn: Connection, correlation_id: int) -> None:
        body = kc.response_body(apis.API_VERSIONS_KEY, 0, apis.api_versions_unsupported())
        conn.send(kc.encode_response(apis.API_VERSIONS_KEY, 0, correlation_id, body))

    def _api_versions(self, conn: Connection, request: kc.DecodedRequest) -> None:
        self._send_fields(conn, request, apis.api_versions(request.version, kc.to_fields(request.body), self.served))

    def node(self) -> apis.Node:
        """This server as a broker: its node id and advertised endpoint."""
        config = self.core.config
        return apis.Node(config.node_id, config.advertised_host, config.advertised_port)

    def _metadata(self, conn: Connection, request: kc.DecodedRequest) -> None:
        fields = apis.metadata(request.version, kc.to_fields(request.body), self.catalog, self.node())
        self.data.sync_topics()  # a topic it auto-created joins the log (kept across restarts)
        self.core.topics_changed()  # and the core's topics image
        if self.ownership is not None and fields.get("brokers"):
            # every coordinator sharing the storage is a broker of this cluster (ListGroups asks them all)
            fields["brokers"] = [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": None}
                                 for n in self.ownership.peers()]
        self._send_fields(conn, request, fields)

    def _core_request(self, conn: Connection, request: kc.DecodedRequest) -> None:
        api = _CORE_APIS[request.api_key]
        fields = kc.to_fields(request.body)
        extra = None
        if api == "OffsetCommit":
            known, rejected = apis.split_known_partitions(fields["topics"], self.catalog, "partition_index")
            if not known:  # KafkaApis answers without the coordinator
                self._send_fields(conn, request, {"throttle_time_ms": 0, "topics": rejected})
                return
            fields["topics"], extra = known, rejected
        elif api == "OffsetDelete":
            fields["topics"], extra = apis.split_known_partitions(fields["topics"], self.catalog, "partition_index")
        elif api in ("DescribeGroups", "ConsumerGroupDescribe"):
            extra = fields.get("include_authorized_operations", False)
        rid = (conn.id, request.correlation_id)
        try:
            if api == "Heartbeat":  # the hot path: kio's fields are already complete and typed
                event = heartbeat_event(fields, request.version, rid, self.clock.now_ms(),
                                        request.client_id or "", conn.client_host)
            else:
                event = request_event(api, request.version, fields, request_id=rid, now_ms=self.clock.now_ms(),
                                      client_id=request.client_id or "", client_host=conn.client_host,
                                      new_member_uuid=self.options.new_uuid() if api in _NEW_MEMBER_UUID_APIS else "")
        except SchemaError as e:
            self.log("warning", "bad_request", conn=conn.id, peer=conn.peer_text, api=api, version=request.version,
                     error=str(e), action="close")
            conn.close()
            return
        self.replies.park(rid, conn, request, api, extra, event)
        if api == "FindCoordinator" and self.ownership is not None:
            self.replies.respond(rid, self._find_coordinator(event))
            return
        if api == "SyncGroup" and request.version >= 5 and (event.protocol_type is None or event.protocol_name is None):
            # KafkaApis answers this before the coordinator sees the request (spec/deviations.md D12)
            self.replies.respond(rid, SyncGroupResponse(error_code=Error.INCONSISTENT_GROUP_PROTOCOL))
            return
        if type(event) in _CONSUMER_EVENTS and not core_handles(type(event)):
            # a core without KIP-848's groups yet: answered as a broker with the consumer
            # protocol disabled answers (KafkaApis: UNSUPPORTED_VERSION)
            self.replies.respond(rid, consumer_protocol_error(event, Error.UNSUPPORTED_VERSION))
            return
        self.core.dispatch(event)
        if self.log.threshold <= 10 and conn.pending_rid == rid:
            self.log("debug", "parked", conn=conn.id, api=api, correlation_id=request.correlation_id,
                     client_id=request.client_id)

    def _find_coordinator(self, event: ev.FindCoordinator) -> FindCoordinatorResponse:
        """Several coordinators: the owner of the group's partition, wherever it is (Kafka's
        KafkaApis answers from the partition leaders; the core knows only itself, D7)."""
        out = []
        for key in event.coordinator_keys:
            node = None
            error = Error.INVALID_REQUEST
            if event.key_type == 0:
                node = self.ownership.owner_of(self.core.coordinator.partition_of(key))
                error = Error.NONE if node is not None else Error.COORDINATOR_NOT_AVAILABLE
            if node is None:
                out.append(CoordinatorEndpoint(key, -1, "", -1, error))
            else:
                out.append(CoordinatorEndpoint(key, node.node_id, node.host, node.port, Error.NONE))
        return FindCoordinatorResponse(tuple(out))


_CONSUMER_EVENTS = frozenset({ev.ConsumerGroupHeartbeat, ev.ConsumerGroupDescribe})


def heartbeat_event(fields: dict, version: int, request_id: Any, now_ms: int, client_id: str,
                    client_host: str) -> ev.Heartbeat:
    """``wire.request_event("Heartbeat", ...)`` for a body kio decoded (every field of the
    version present and typed), without re-validating it: Heartbeat is most of the traffic.
    tests/wire/test_server_wire.py checks it equals request_event at every version."""
    return ev.Heartbeat(request_id=request_id, now_ms=now_ms, version=version, client_id=client_id,
                        client_host=client_host, group_id=fields["group_id"], generation_id=fields["generation_id"],
                        member_id=fields["member_id"], group_instance_id=fields.get("group_instance_id"))
