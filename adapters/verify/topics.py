"""The topics image a consumer group is checked against, as the recording shows it: the
Metadata answers' topics (``topics.jsonl``, written by ``groupcoord record``: name, topic id,
partition count, error code of every topic an answer lists).

A topic's first sighting holds from the recording's start (a topic the coordinator knew before
any client asked about it); each later sighting that differs (created: absent, then present;
deleted; grown; made again under a new id) is a change of the image at a time the recording
does not show: after the last answer showing it as it was, no later than the first answer
showing it anew. The search (search.py) makes it at any point of that window. What the
recording does not show is named, for the group to be inconclusive: a subscribed topic no
answer lists, a regular expression without an answer listing every topic, a topic id an
answer or request names that no answer shows."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import attrs

from groupcoord.core.errors import Error

_ABSENT = (int(Error.UNKNOWN_TOPIC_OR_PARTITION),)


@attrs.frozen
class Change:
    """Topic ``name`` becomes ``value`` ((topic id, partitions), None: absent) at some time in
    ``(after_ms, by_ms]``."""

    after_ms: int
    by_ms: int
    name: str
    value: tuple | None


@attrs.frozen
class TopicsSeen:
    """Every topic the recording's Metadata answers show: its first state and its changes."""

    first: tuple = ()  # ((name, (topic id, partitions) | None), ...) sorted by name
    changes: tuple = ()  # Change, by ``by_ms``
    every_topic: bool = False  # some answer listed every topic (a request naming none)
    answers: int = 0

    def base(self) -> dict:
        """name -> (topic id, partitions): the image at the recording's start."""
        return {name: value for name, value in self.first if value is not None}

    def known_names(self) -> frozenset:
        return frozenset(name for name, _ in self.first)

    def known_ids(self) -> frozenset:
        ids = {value[0] for _, value in self.first if value is not None}
        ids |= {c.value[0] for c in self.changes if c.value is not None}
        return frozenset(ids)

    def image_after(self, applied: int) -> tuple:
        """The image (``TopicsChanged.topics``) with the first ``applied`` changes made."""
        image = self.base()
        for change in self.changes[:applied]:
            if change.value is None:
                image.pop(change.name, None)
            else:
                image[change.name] = change.value
        return tuple((name, tid, count) for name, (tid, count) in sorted(image.items()))


def _state(topic: dict) -> tuple[bool, tuple | None]:
    """(whether the answer tells the topic's state, its state)."""
    tid, count, code = topic.get("topic_id"), topic.get("partitions") or 0, topic.get("error_code", 0)
    if tid and count > 0:
        return True, (str(tid), int(count))
    if code in _ABSENT:
        return True, None
    return False, None  # another error (leader not available, ...) or no topic id (before v10)


def seen(records: Iterable[dict]) -> TopicsSeen:
    """The topics records (``trace.read_topics``), in any order."""
    records = sorted(records, key=lambda r: (r.get("send_us") or 0, r.get("recv_us") or 0))
    last: dict[str, tuple[int, tuple | None]] = {}  # name -> (when last shown, state)
    first: dict[str, tuple | None] = {}
    changes: list[Change] = []
    every = False
    for r in records:
        if r.get("send_us") is None:
            continue
        at_ms = int(r["send_us"]) // 1000
        every = every or bool(r.get("all"))
        for topic in r.get("topics") or ():
            name = topic.get("name")
            told, state = _state(topic)
            if not isinstance(name, str) or not told:
                continue
            if name not in last:
                first[name] = state
            elif last[name][1] != state:
                changes.append(Change(last[name][0], at_ms, name, state))
            last[name] = (at_ms, state)
    return TopicsSeen(tuple(sorted(first.items())), tuple(sorted(changes, key=lambda c: (c.by_ms, c.after_ms))),
                      every, len(records))


def read(path: str | Path) -> TopicsSeen | None:
    """The recording's topics: meta.json's ``topics`` (the recording proxy's runs) and
    ``topics.jsonl`` (a capture's Metadata answers); None when it has neither."""
    from groupcoord.adapters.observe.trace import META, TOPICS, read_meta, read_topics
    from groupcoord.adapters.verify.observed import trace_dir

    d = trace_dir(path)
    records: list[dict] = []
    found = False
    if (d / META).exists():
        meta = read_meta(d)
        if isinstance(meta.get("topics"), list):
            found = True
            records += from_runs(meta["topics"], bool(meta.get("metadata_every_topic")))
    if (d / TOPICS).exists():
        found = True
        records += read_topics(d)
    return seen(records) if found else None


def from_runs(runs: list, every: bool) -> list[dict]:
    """The proxy's runs (``proxy.topic_runs``) as answers: each state shown at its first and last time."""
    out: list[dict] = [{"send_us": 0, "all": True, "topics": []}] if every else []
    for run in runs:
        topic = {k: run.get(k) for k in ("name", "topic_id", "partitions", "error_code")}
        for at in dict.fromkeys((run.get("first_us"), run.get("last_us"))):
            if at is not None:
                out.append({"send_us": at, "all": False, "topics": [topic]})
    return out


def unknown(topics: TopicsSeen | None, unit) -> str | None:
    """Why the recording does not show the topics image a consumer group's pairs need, or None."""
    heartbeats = [o for o in unit if o.api == "ConsumerGroupHeartbeat"]
    if not heartbeats:
        return None
    if topics is None:
        return "the recording holds no Metadata answers (meta.json has no topics, and there is no topics.jsonl), " \
               "so the topics image the group's assignments are made of (topic names, ids and partition counts) " \
               "is unknown"
    names = topics.known_names()
    ids = topics.known_ids()
    for o in heartbeats:
        for name in o.request.get("subscribed_topic_names") or ():
            if name not in names:
                return (f"line {o.index} subscribes to topic {name!r}, which no Metadata answer in the recording "
                        f"shows (its id and partition count are unknown)")
        if o.request.get("subscribed_topic_regex") and not topics.every_topic:
            return (f"line {o.index} subscribes to the regular expression {o.request['subscribed_topic_regex']!r}, "
                    f"and no Metadata answer in the recording lists every topic")
        named = [t.get("topic_id") for t in o.request.get("topic_partitions") or ()]
        answer = (o.response or {}).get("assignment") or {}
        named += [t.get("topic_id") for t in answer.get("topic_partitions") or ()]
        for tid in named:
            if tid and str(tid) not in ids:
                return f"line {o.index} names topic id {tid}, which no Metadata answer in the recording shows"
    return None
