"""The replies to requests the core answers: each parked request waits here until the core's
``Respond`` for it, which is encoded for the request's version and sent on its connection.

Some answers are completed from what the request handler kept aside (``extra``): the
partitions of unknown topics KafkaApis answers itself (OffsetCommit, OffsetDelete), the
authorized operations DescribeGroups asked for. Heartbeat answers are the same few values over
and over, so their encoded bodies are cached; OffsetCommit answers are written without kio
(``fast_frames``).

Each parked request keeps its core event, so that when the core fails every request it held
is answered with an error in its API's own shape (``answer_all``, core/error_responses.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from groupcoord.adapters.protocol import codec as kc
from groupcoord.adapters.protocol.translate import response_fields
from groupcoord.adapters.wire import broker_apis as apis
from groupcoord.adapters.wire.fast_frames import offset_commit_response_body
from groupcoord.core import events as ev
from groupcoord.core.commands import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    HeartbeatResponse,
    OffsetCommitResponse,
)
from groupcoord.core.error_responses import error_response
from groupcoord.core.errors import Error

if TYPE_CHECKING:
    from groupcoord.adapters.wire.listener import Connection


def consumer_protocol_error(event: Any, error: Error) -> Any:
    """KIP-848's answer to a whole ConsumerGroupHeartbeat or ConsumerGroupDescribe failing with
    ``error`` (every group described with it)."""
    if isinstance(event, ev.ConsumerGroupHeartbeat):
        return ConsumerGroupHeartbeatResponse(error_code=error)
    return ConsumerGroupDescribeResponse(tuple(DescribedConsumerGroup(group_id=g, error_code=error)
                                               for g in event.group_ids))


def _error_response(event: Any, error: Error) -> Any:
    """The core's error answer to ``event`` failing whole (core/error_responses.py); KIP-848's
    two requests have theirs here while the core's table lacks them."""
    try:
        return error_response(event, error, runtime=True)
    except TypeError:
        if isinstance(event, (ev.ConsumerGroupHeartbeat, ev.ConsumerGroupDescribe)):
            return consumer_protocol_error(event, error)
        raise


@attrs.define(slots=True)
class _Pending:
    conn: Connection
    api_key: int
    api: str
    version: int
    correlation_id: int
    extra: Any = None
    event: Any = None  # the core event made of the request


class Replies:
    def __init__(self, log: Any) -> None:
        self.log = log
        self._pending: dict[tuple, _Pending] = {}  # request id -> the request waiting for the core
        self._encoded: dict[tuple, bytes] = {}  # encoded bodies of frequent, repeated responses

    def park(self, request_id: tuple, conn: Connection, request: kc.DecodedRequest, api: str, extra: Any,
             event: Any = None) -> None:
        """``request`` (made into the core's ``event``) waits for the core's answer to ``request_id``."""
        self.park_request(request_id, conn, request.api_key, api, request.version, request.correlation_id, extra,
                          event)

    def park_request(self, request_id: tuple, conn: Connection, api_key: int, api: str, version: int,
                     correlation_id: int, extra: Any = None, event: Any = None) -> None:
        self._pending[request_id] = _Pending(conn, api_key, api, version, correlation_id, extra, event)
        conn.pending_rid = request_id

    def forget(self, conn: Connection) -> None:
        """``conn`` is gone: an answer to its request is dropped."""
        if conn.pending_rid is not None:
            self._pending.pop(conn.pending_rid, None)
            conn.pending_rid = None

    def abandon_all(self) -> None:
        """A new coordinator instance takes over: the requests parked in the old one are never
        answered (their connections stay waiting)."""
        for pending in self._pending.values():
            pending.conn.abandoned = True
        self._pending.clear()

    def answer_all(self, error: Error) -> int:
        """The core instance holding every parked request failed: each is answered with
        ``error`` as Kafka answers the whole request failing with it (a request parked without
        its event has its connection closed). Returns how many were answered."""
        answered = 0
        for request_id, pending in list(self._pending.items()):
            if pending.event is None:
                self._pending.pop(request_id, None)
                pending.conn.close()
                continue
            self.respond(request_id, _error_response(pending.event, error))
            answered += 1
        return answered

    def respond(self, request_id: Any, response: Any) -> None:
        pending = self._pending.pop(request_id, None)
        if pending is None:
            return  # its connection is gone (or the instance that parked it was replaced)
        conn = pending.conn
        try:
            data = self._encode(pending, response)
        except Exception as e:
            self.log("error", "encode_error", api=pending.api, version=pending.version, conn=conn.id,
                     error=f"{type(e).__name__}: {e}", response=repr(response)[:2000])
            conn.close()
            return
        conn.send(data)

    def _encode(self, p: _Pending, response: Any) -> bytes:
        kind = type(response)
        if kind is OffsetCommitResponse and not p.extra:
            return kc.frame_response(p.api_key, p.version, p.correlation_id,
                                     offset_commit_response_body(p.version, response.topics))
        if kind is HeartbeatResponse:  # the same few values answer many requests
            key = (p.api_key, p.version, response)
            body = self._encoded.get(key)
            if body is None:
                if len(self._encoded) > 4096:
                    self._encoded.clear()
                body = self._encoded[key] = kc.encode_response_body(
                    p.api_key, p.version, kc.response_body(p.api_key, p.version,
                                                           response_fields(p.api, p.version, response)))
            return kc.frame_response(p.api_key, p.version, p.correlation_id, body)
        fields = response_fields(p.api, p.version, response)
        if p.api == "OffsetCommit" and p.extra:
            fields["topics"] = apis.merge_topic_results(p.extra, fields["topics"])
        elif p.api == "OffsetDelete":
            fields["topics"] = ([] if fields["error_code"] else
                                apis.merge_topic_results(p.extra or [], fields["topics"]))
        elif p.api in ("DescribeGroups", "ConsumerGroupDescribe") and p.extra:
            for group in fields["groups"]:
                if group["error_code"] == 0:
                    group["authorized_operations"] = apis.GROUP_OPERATIONS
        body = kc.response_body(p.api_key, p.version, fields)
        return kc.encode_response(p.api_key, p.version, p.correlation_id, body)
