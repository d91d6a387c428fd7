"""Hypothesis strategies for consumer groups: group ids, members (dynamic or static, with real
consumer-protocol subscriptions as the Java client encodes them, for one or several assignors),
coordinator settings by Kafka's names, and whole request sequences for one group.

Everything here draws plain values (dicts of Kafka's request fields, ``Member`` records,
``CoordinatorConfig``): use them with ``CoordinatorStateMachine``, with ``groupcoord verify``'s
traces (``sequence_observed``) or with any client of your own."""

from __future__ import annotations

import functools
import string

import attrs
from hypothesis import strategies as st

from groupcoord.adapters.client.assignors import ASSIGNORS, make_assignor, member_subscription
from groupcoord.core.config import CoordinatorConfig
from groupcoord.core.errors import Error

# The characters Kafka accepts in topic names; group ids may hold anything, but these print well.
_ID_ALPHABET = string.ascii_letters + string.digits + "._-"
ASSIGNOR_NAMES = tuple(ASSIGNORS)  # range, roundrobin, sticky, cooperative-sticky
DEFAULT_TOPICS = {"t1": 3, "t2": 2}


def group_ids(prefix: str = "", max_size: int = 12) -> st.SearchStrategy[str]:
    """Non-empty group ids (``prefix`` first: a fresh group per example on a shared broker)."""
    return st.text(_ID_ALPHABET, min_size=1, max_size=max_size).map(lambda s: prefix + s)


@functools.lru_cache(maxsize=256)
def _protocol(assignor: str, topics: tuple[str, ...]) -> tuple[str, bytes]:
    return assignor, member_subscription(make_assignor(assignor), topics)


def protocols(topics: dict[str, int] | None = None, assignors: tuple[str, ...] = ASSIGNOR_NAMES,
              max_size: int = 2) -> st.SearchStrategy[tuple[tuple[str, bytes], ...]]:
    """A JoinGroup's protocols: one to ``max_size`` assignors in the member's order of
    preference, each with the subscription (to some of ``topics``) the Java consumer sends."""
    names = sorted(topics or DEFAULT_TOPICS)
    subscribed = st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True)
    chosen = st.lists(st.sampled_from(assignors), min_size=1, max_size=max_size, unique=True)
    return st.tuples(chosen, subscribed).map(
        lambda ct: tuple(_protocol(a, tuple(sorted(ct[1]))) for a in ct[0]))


@attrs.frozen
class Member:
    """What a consumer sends when it joins: its identity, timeouts and protocols."""

    client_id: str
    group_instance_id: str | None  # None: a dynamic member
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (assignor name, subscription bytes)

    @property
    def static(self) -> bool:
        return self.group_instance_id is not None


def members(config: CoordinatorConfig | None = None, topics: dict[str, int] | None = None, *,
            static: bool | None = None, index: int | None = None,
            protocol_types: tuple[str, ...] = ("consumer",)) -> st.SearchStrategy[Member]:
    """Members whose session timeouts ``config`` accepts (its min to a few times the min, so
    that time moved past one stays short); ``static`` None draws either kind. ``index`` names
    the member (client ``c<index>``, instance ``i<index>``); else it is drawn."""
    cfg = config or CoordinatorConfig()
    low = max(cfg.group_min_session_timeout_ms, 1)
    high = min(cfg.group_max_session_timeout_ms, 3 * low)
    numbers = st.just(index) if index is not None else st.integers(1, 5)
    kinds = st.booleans() if static is None else st.just(static)

    def build(n, is_static, session, rebalance, ptype, protos):
        return Member(f"c{n}", f"i{n}" if is_static else None, session, rebalance, ptype, protos)

    return st.builds(build, numbers, kinds, st.integers(low, high),
                     st.sampled_from((low, 2 * low, 4 * low)), st.sampled_from(protocol_types),
                     protocols(topics))


def kafka_settings(fast: bool = True) -> st.SearchStrategy[dict]:
    """Coordinator settings by Kafka's names (``group.max.size``...), with edges that matter:
    no initial delay or a short one, tiny group sizes, a minute of offset retention, a
    4-byte metadata limit. ``fast``: short session timeouts (a test's clock moves less)."""
    return st.fixed_dictionaries({
        "offsets.topic.num.partitions": st.sampled_from((1, 2)),
        "group.initial.rebalance.delay.ms": st.sampled_from((3000, 0, 50)),
        "group.max.size": st.sampled_from((2_147_483_647, 2_147_483_647, 2, 3)),
        "group.min.session.timeout.ms": st.sampled_from((500, 1000) if fast else (1000, 6000)),
        "group.max.session.timeout.ms": st.sampled_from((600_000, 1_800_000)),
        "offsets.retention.minutes": st.sampled_from((10080, 1)),
        "offsets.retention.check.interval.ms": st.sampled_from((600_000, 60_000)),
        "offset.metadata.max.bytes": st.sampled_from((4096, 4)),
    })


def coordinator_configs(fast: bool = True) -> st.SearchStrategy[CoordinatorConfig]:
    """``kafka_settings`` as the core's ``CoordinatorConfig``."""
    return kafka_settings(fast).map(CoordinatorConfig.from_kafka)


# Raw storage errors, one for each row of Kafka's translation of append errors (and one passed on).
STORAGE_ERRORS = (
    Error.NOT_LEADER_OR_FOLLOWER, Error.UNKNOWN_TOPIC_OR_PARTITION, Error.NOT_ENOUGH_REPLICAS,
    Error.REQUEST_TIMED_OUT, Error.KAFKA_STORAGE_ERROR, Error.MESSAGE_TOO_LARGE,
    Error.RECORD_LIST_TOO_LARGE, Error.INVALID_FETCH_SIZE, Error.NETWORK_EXCEPTION,
    Error.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def storage_errors() -> st.SearchStrategy[Error]:
    return st.sampled_from(STORAGE_ERRORS)


# ------------------------------------------------------------------ request sequences

def request_sequences(group_id: str = "g", topics: dict[str, int] | None = None, *, max_size: int = 20,
                      config: CoordinatorConfig | None = None) -> st.SearchStrategy[list[tuple]]:
    """Requests about one group, each ``(time_ms, connection, api, version, body, client_id)``
    in time order (what ``groupcoord.adapters.verify.from_core.observe`` takes). Member ids
    are drawn from those a join can give and some no coordinator gave (Kafka answers them
    with errors); generations are near the real ones; several land at the same time."""
    from groupcoord.testing import requests as rq

    names = dict(topics or DEFAULT_TOPICS)
    ids = st.sampled_from(("", "unknown-member", "c1-00000001-0000-4000-8000-000000000001",
                           "c2-00000002-0000-4000-8000-000000000002"))
    generations = st.integers(-1, 3)
    version = {api: st.integers(*rq.versions(api)) for api in rq.GROUP_APIS}

    @st.composite
    def one(draw):
        api = draw(st.sampled_from(rq.GROUP_APIS))
        v = draw(version[api])
        member = draw(members(config, names))
        mid, gen = draw(ids), draw(generations)
        if api == "JoinGroup":
            body = rq.join(group_id, v, member, mid)
        elif api == "SyncGroup":
            body = rq.sync(group_id, v, mid, gen, member.group_instance_id, {})
        elif api == "Heartbeat":
            body = rq.heartbeat(group_id, v, mid, gen, member.group_instance_id)
        elif api == "LeaveGroup":
            body = rq.leave(group_id, v, [(mid, member.group_instance_id)])
        elif api == "OffsetCommit":
            body = rq.commit(group_id, v, mid, gen, member.group_instance_id, {(t, 0): 5 for t in names})
        elif api == "OffsetFetch":
            body = rq.fetch(group_id, v, None)
        elif api == "DescribeGroups":
            body = rq.describe(group_id, v)
        else:
            body = rq.delete(group_id, v)
        return api, v, body, member.client_id

    steps = st.lists(st.tuples(st.sampled_from((0, 0, 1, 100, 3000)), st.integers(1, 3), one()),
                     max_size=max_size)

    def timed(drawn):
        out, now = [], 0
        for gap, conn, (api, v, body, client) in drawn:
            now += gap
            out.append((now, conn, api, v, body, client))
        return out

    return steps.map(timed)
