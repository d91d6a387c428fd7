"""Did every acknowledged record reach every consumer group exactly once? (spec/testing.md,
"Checking delivery")

``check_delivery(acknowledged, groups, log=...)`` takes what producers were told (topic,
partition, offset, key, value of each acknowledged record) and what each consumer group read
(per group, per consumer, the records in the order the consumer got them), and checks, per
group:

* **lost**: an acknowledged record the group never read;
* **duplicate**: a record the group read more than once (by one consumer, or by two: handed
  over by a rebalance without a commit covering it), each read named by consumer and position;
* **out of order**: a consumer got a partition's records in another order than the log's;
* **gap**: an offset of the log (from its start to its end, ``log``) that the group did not
  read and no producer was told about (offsets are contiguous on a log without transactions
  or compaction);
* **not acknowledged**: a record read that no producer was told it wrote;
* **outside the log**: a record read below the log start or at or above its end;
* **differs**: a record read whose key or value is not the acknowledged one at its offset;
* **acknowledged twice**: two acknowledgements naming one offset.

The result is never a bare bool: ``DeliveryResult`` has a verdict (``"ok"``, ``"findings"`` or
``"inconclusive"``: something could not be checked, e.g. no acknowledgements, no groups, no log
bounds), a one-line ``summary``, the ``findings`` and what was ``unchecked``; ``report()`` is
the summary and the findings, one a line.

A record, acknowledged or read, may be a tuple ``(topic, partition, offset)`` or ``(topic,
partition, offset, key, value)``, a mapping with those keys, or an object with those
attributes or methods: kafka-python's and aiokafka's ``ConsumerRecord``, confluent-kafka's
``Message``, kafka-python's ``RecordMetadata`` (no key nor value: their content is then not
compared, which the result says).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeliveryFinding", "DeliveryResult", "check_delivery"]

_MISSING = object()
KINDS = ("lost", "duplicate", "out of order", "gap", "not acknowledged", "outside the log", "differs",
         "acknowledged twice")
_SHOWN = 20  # findings of one kind shown by report() before "... and N more"


@dataclass(frozen=True)
class DeliveryFinding:
    """One thing wrong: its ``kind`` (one of ``KINDS``), the group (None for an acknowledgement's
    own fault), the record's topic, partition and offset, and a sentence saying what happened."""

    kind: str
    group: str | None
    topic: str
    partition: int
    offset: int
    detail: str

    def __str__(self) -> str:
        where = f"group {self.group!r}: " if self.group is not None else ""
        return f"{self.kind}: {where}{self.detail}"


@dataclass(frozen=True)
class DeliveryResult:
    """What ``check_delivery`` found. ``ok`` is true only when everything was checked and
    nothing found; ``verdict`` is ``"ok"``, ``"findings"`` or ``"inconclusive"``."""

    verdict: str
    summary: str
    findings: tuple[DeliveryFinding, ...] = ()
    unchecked: tuple[str, ...] = ()
    acknowledged: int = 0
    reads: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def by_kind(self, kind: str) -> list[DeliveryFinding]:
        return [f for f in self.findings if f.kind == kind]

    def report(self) -> str:
        lines = [self.summary]
        for kind in KINDS:
            found = self.by_kind(kind)
            lines += [f"  {f}" for f in found[:_SHOWN]]
            if len(found) > _SHOWN:
                lines.append(f"  ... and {len(found) - _SHOWN} more {kind}")
        lines += [f"  not checked: {what}" for what in self.unchecked]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


@dataclass(frozen=True)
class _Record:
    topic: str
    partition: int
    offset: int
    key: Any = _MISSING
    value: Any = _MISSING

    @property
    def where(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset}"


def _field(record: Any, name: str, index: int) -> Any:
    if isinstance(record, tuple) and not hasattr(record, "_fields"):
        return record[index] if index < len(record) else _MISSING
    if isinstance(record, Mapping):
        return record.get(name, _MISSING)
    value = getattr(record, name, _MISSING)
    return value() if callable(value) else value


def _record(record: Any) -> _Record:
    topic, partition, offset = (_field(record, n, i) for i, n in enumerate(("topic", "partition", "offset")))
    if _MISSING in (topic, partition, offset):
        raise TypeError(f"a record needs a topic, a partition and an offset: {record!r}")
    return _Record(str(topic), int(partition), int(offset), _field(record, "key", 3), _field(record, "value", 4))


def _bounds(log: Mapping | None) -> dict[tuple[str, int], tuple[int, int]] | None:
    if log is None:
        return None
    out = {}
    for key, (start, end) in log.items():
        tp = key if isinstance(key, tuple) else (getattr(key, "topic"), getattr(key, "partition"))
        tp = tp[0]() if callable(tp[0]) else tp[0], tp[1]() if callable(tp[1]) else tp[1]
        out[(str(tp[0]), int(tp[1]))] = (int(start), int(end))
    return out


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def check_delivery(acknowledged: Iterable[Any], groups: Mapping[str, Mapping[str, Iterable[Any]]], *,
                   log: Mapping | None = None) -> DeliveryResult:
    """Check that each group read every acknowledged record exactly once, each consumer in
    partition order, with no offset of the log skipped and nothing read that was not
    acknowledged.

    ``acknowledged``: the records producers were told were written. ``groups``: group id ->
    consumer name -> the records that consumer got, in the order it got them. ``log``: optional,
    ``(topic, partition)`` (or a TopicPartition) -> ``(log start offset, log end offset)``, what
    the log held when the groups were done (ListOffsets earliest and latest); without it the
    offsets before the first and after the last one seen cannot be checked (inconclusive)."""
    acks = [_record(r) for r in acknowledged]
    bounds = _bounds(log)
    findings: list[DeliveryFinding] = []
    unchecked: list[str] = []
    by_offset: dict[tuple[str, int, int], _Record] = {}
    for r in acks:
        first = by_offset.setdefault((r.topic, r.partition, r.offset), r)
        if first is not r:
            findings.append(DeliveryFinding("acknowledged twice", None, r.topic, r.partition, r.offset,
                                            f"{r.where} was acknowledged for two records "
                                            f"({_content(first)} and {_content(r)})"))
    if not acks:
        unchecked.append("no acknowledged records were given: nothing to find lost")
    if not groups:
        unchecked.append("no consumer group was given")
    if any(r.key is _MISSING or r.value is _MISSING for r in acks):
        unchecked.append("keys and values of acknowledgements without them were not compared")
    if bounds is None:
        unchecked.append("no log bounds given: offsets before the first and after the last seen were not checked")
    else:
        seen_tps = {(r.topic, r.partition) for r in acks}
        for tp in sorted(seen_tps - set(bounds)):
            unchecked.append(f"no log bounds for {tp[0]}-{tp[1]}: its ends were not checked")
    reads: dict[str, int] = {}
    for group, consumers in groups.items():
        reads[group] = _check_group(group, consumers, by_offset, bounds, findings, unchecked)
    verdict = "findings" if findings else "inconclusive" if unchecked else "ok"
    summary = _summary(verdict, acks, groups, reads, findings, unchecked)
    return DeliveryResult(verdict, summary, tuple(findings), tuple(unchecked), len(acks), reads)


def _content(r: _Record) -> str:
    if r.key is _MISSING and r.value is _MISSING:
        return "content unknown"
    return f"key {_short(r.key)}, value {_short(r.value)}"


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_group(group: str, consumers: Mapping[str, Iterable[Any]], by_offset: dict, bounds: dict | None,
                 findings: list[DeliveryFinding], unchecked: list[str]) -> int:
    first_read: dict[tuple[str, int, int], tuple[str, int]] = {}
    parsed = {consumer: [_record(raw) for raw in records] for consumer, records in consumers.items()}
    times = Counter((r.topic, r.partition, r.offset) for rs in parsed.values() for r in rs)
    count = 0
    for consumer, records in parsed.items():
        last: dict[tuple[str, int], _Record] = {}
        for n, r in enumerate(records, 1):
            count += 1
            key = (r.topic, r.partition, r.offset)
            earlier = first_read.get(key)
            if earlier is not None:
                who, m = earlier
                how = (f"twice by consumer {consumer!r} (its {_ordinal(m)} and {_ordinal(n)} records)"
                       if who == consumer else
                       f"by consumer {who!r} (its {_ordinal(m)} record) and by consumer {consumer!r} (its "
                       f"{_ordinal(n)}): handed over, as by a rebalance, without a commit covering it")
                findings.append(DeliveryFinding("duplicate", group, *key, f"{r.where} read {how}"))
            else:
                first_read[key] = (consumer, n)
            before = last.get((r.topic, r.partition))
            if times[key] == 1 and before is not None and r.offset < before.offset:  # (a record read again
                # comes after higher ones by nature: it is named once, as a duplicate)
                findings.append(DeliveryFinding(
                    "out of order", group, *key, f"consumer {consumer!r} got {r.where} (its {_ordinal(n)} "
                    f"record) after {before.where}"))
            highest = last.get((r.topic, r.partition))
            if highest is None or r.offset > highest.offset:
                last[(r.topic, r.partition)] = r
            _check_read(group, consumer, n, r, by_offset, bounds, findings, earlier is not None)
    if not count:
        unchecked.append(f"group {group!r} read nothing")
    removed: Counter = Counter()
    for key, ack in by_offset.items():
        if key in first_read:
            continue
        bound = bounds.get(key[:2]) if bounds is not None else None
        if bound is not None and key[2] < bound[0]:
            removed[key[:2]] += 1  # gone from the log (retention, DeleteRecords) before it was read
            continue
        beyond = f", and is beyond the log end {bound[1]}" if bound is not None and key[2] >= bound[1] else ""
        findings.append(DeliveryFinding("lost", group, *key, f"{ack.where} ({_content(ack)}) was acknowledged "
                                                              f"and never read{beyond}"))
    for (topic, partition), n in sorted(removed.items()):
        unchecked.append(f"group {group!r}: {n} acknowledged records of {topic}-{partition} below its log start "
                         f"{bounds[(topic, partition)][0]} (removed from the log) were not read")
    _gaps(group, first_read, by_offset, bounds, findings)
    return count


def _check_read(group: str, consumer: str, n: int, r: _Record, by_offset: dict, bounds: dict | None,
                findings: list[DeliveryFinding], again: bool) -> None:
    if again:
        return  # said once, at its first read
    key = (r.topic, r.partition, r.offset)
    bound = bounds.get((r.topic, r.partition)) if bounds is not None else None
    if bound is not None and not bound[0] <= r.offset < bound[1]:
        findings.append(DeliveryFinding("outside the log", group, *key, f"consumer {consumer!r} got {r.where} (its "
                                        f"{_ordinal(n)} record), outside the log's [{bound[0]}, {bound[1]})"))
    ack = by_offset.get(key)
    if ack is None:
        if by_offset:
            findings.append(DeliveryFinding("not acknowledged", group, *key, f"consumer {consumer!r} got {r.where} "
                                            f"({_content(r)}, its {_ordinal(n)} record), which no producer was "
                                            f"told it wrote"))
        return
    for name in ("key", "value"):
        mine, theirs = getattr(r, name), getattr(ack, name)
        if _MISSING not in (mine, theirs) and mine != theirs:
            findings.append(DeliveryFinding("differs", group, *key, f"consumer {consumer!r} got {r.where} with "
                                            f"{name} {_short(mine)}, acknowledged with {_short(theirs)}"))


def _gaps(group: str, first_read: dict, by_offset: dict, bounds: dict | None,
          findings: list[DeliveryFinding]) -> None:
    """Offsets neither read nor acknowledged between the log start (else the first seen) and
    the log end (else the last seen): each run of them is one finding."""
    seen: dict[tuple[str, int], set[int]] = defaultdict(set)
    for topic, partition, offset in list(first_read) + list(by_offset):
        seen[(topic, partition)].add(offset)
    for tp in sorted(set(seen) | set(bounds or {})):
        offsets = seen.get(tp, set())
        bound = (bounds or {}).get(tp)
        low = bound[0] if bound is not None else min(offsets)
        high = bound[1] if bound is not None else max(offsets) + 1
        run_start = None
        for offset in range(low, high + 1):
            missing = offset < high and offset not in offsets
            if missing and run_start is None:
                run_start = offset
            elif not missing and run_start is not None:
                span = f"offset {run_start}" if offset - run_start == 1 else f"offsets {run_start}-{offset - 1}"
                findings.append(DeliveryFinding("gap", group, tp[0], tp[1], run_start,
                                                f"{tp[0]}-{tp[1]}: {span} of the log [{low}, {high}) neither read "
                                                f"nor acknowledged"))
                run_start = None


def _summary(verdict: str, acks: list, groups: Mapping, reads: dict, findings: list, unchecked: list) -> str:
    consumers = sum(len(c) for c in groups.values())
    what = (f"{len(acks)} acknowledged records, {len(groups)} group{'s' if len(groups) != 1 else ''} "
            f"({consumers} consumer{'s' if consumers != 1 else ''}, {sum(reads.values())} reads)")
    if verdict == "findings":
        counts = Counter(f.kind for f in findings)
        kinds = ", ".join(f"{counts[k]} {k}" for k in KINDS if counts[k])
        groups_hit = sorted({f.group for f in findings if f.group is not None})
        where = f" in group{'s' if len(groups_hit) != 1 else ''} {', '.join(map(repr, groups_hit))}" if groups_hit else ""
        return f"delivery: {len(findings)} finding{'s' if len(findings) != 1 else ''} ({kinds}){where}: {what}"
    if verdict == "inconclusive":
        return f"delivery: inconclusive ({unchecked[0]}{'; ...' if len(unchecked) > 1 else ''}): {what}"
    return f"delivery: ok: {what}; each read once per group, in partition order, no offset skipped"
