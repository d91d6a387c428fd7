"""``groupcoord.testing.check_delivery``: faults planted in a clean run of made-up records (a lost
record, a duplicate within a consumer and across a hand-over, a reordering, a gap, a record read
that was never acknowledged, one read with another value, one outside the log) are each found
and named; a clean run is "ok", and what could not be checked makes it "inconclusive"."""

from __future__ import annotations

from collections import namedtuple

from groupcoord.testing import DeliveryResult, check_delivery

TOPIC = "orders"


def clean_run():
    """3 partitions of 10 records each; consumer a reads partitions 0 and 1, b reads 2, and a
    hands partition 1 over to b at offset 5 (b goes on from the commit)."""
    acked = [(TOPIC, p, o, b"k%d" % p, b"v%d-%d" % (p, o)) for p in range(3) for o in range(10)]
    by = {(t, p, o): (t, p, o, k, v) for t, p, o, k, v in acked}
    a = [by[(TOPIC, p, o)] for o in range(10) for p in (0,)] + [by[(TOPIC, 1, o)] for o in range(5)]
    b = [by[(TOPIC, 2, o)] for o in range(10)] + [by[(TOPIC, 1, o)] for o in range(5, 10)]
    log = {(TOPIC, p): (0, 10) for p in range(3)}
    return acked, {"billing": {"a": a, "b": b}}, log


def test_a_clean_run_is_ok():
    acked, groups, log = clean_run()
    result = check_delivery(acked, groups, log=log)
    assert isinstance(result, DeliveryResult)
    assert result.verdict == "ok" and result.ok, result.report()
    assert result.findings == () and result.unchecked == ()
    assert result.summary == ("delivery: ok: 30 acknowledged records, 1 group (2 consumers, 30 reads); each read "
                              "once per group, in partition order, no offset skipped")
    assert result.reads == {"billing": 30} and result.acknowledged == 30


def test_a_lost_record_is_found():
    acked, groups, log = clean_run()
    groups["billing"]["b"].remove((TOPIC, 2, 4, b"k2", b"v2-4"))
    result = check_delivery(acked, groups, log=log)
    assert result.verdict == "findings" and not result.ok
    (finding,) = result.findings
    assert (finding.kind, finding.group, finding.topic, finding.partition, finding.offset) == \
        ("lost", "billing", TOPIC, 2, 4)
    assert str(finding) == "lost: group 'billing': orders-2@4 (key b'k2', value b'v2-4') was acknowledged and never read"
    assert result.summary.startswith("delivery: 1 finding (1 lost) in group 'billing': 30 acknowledged records")


def test_a_duplicate_after_a_hand_over_without_a_commit_is_named():
    acked, groups, log = clean_run()
    b = groups["billing"]["b"]
    b.insert(10, (TOPIC, 1, 4, b"k1", b"v1-4"))  # b starts partition 1 one before a's last commit
    result = check_delivery(acked, groups, log=log)
    (finding,) = result.findings
    assert finding.kind == "duplicate" and (finding.partition, finding.offset) == (1, 4)
    assert finding.detail == ("orders-1@4 read by consumer 'a' (its 15th record) and by consumer 'b' (its 11th): "
                              "handed over, as by a rebalance, without a commit covering it")


def test_a_record_read_again_after_higher_offsets_is_one_finding_a_duplicate():
    """The consumer that reads it second may come first in ``groups``, and may already have read
    the partition's later records: still one finding, not an out-of-order one as well."""
    acked, groups, log = clean_run()
    groups["billing"] = {"b": groups["billing"]["b"] + [(TOPIC, 1, 2, b"k1", b"v1-2")], "a": groups["billing"]["a"]}
    result = check_delivery(acked, groups, log=log)
    assert [(f.kind, f.partition, f.offset) for f in result.findings] == [("duplicate", 1, 2)], result.report()


def test_a_duplicate_by_one_consumer_is_named():
    acked, groups, log = clean_run()
    groups["billing"]["a"].append((TOPIC, 1, 2, b"k1", b"v1-2"))
    result = check_delivery(acked, groups, log=log)
    assert [(f.kind, f.detail) for f in result.findings] == [
        ("duplicate", "orders-1@2 read twice by consumer 'a' (its 13th and 16th records)")]


def test_a_reordering_is_found():
    acked, groups, log = clean_run()
    a = groups["billing"]["a"]
    a[3], a[4] = a[4], a[3]
    result = check_delivery(acked, groups, log=log)
    (finding,) = result.findings
    assert finding.kind == "out of order" and finding.offset == 3
    assert finding.detail == "consumer 'a' got orders-0@3 (its 5th record) after orders-0@4"


def test_a_gap_between_what_was_read_and_what_the_log_holds_is_found():
    acked, groups, log = clean_run()
    # Offsets 4 and 5 of partition 2 were never acknowledged nor read, though the log holds them.
    acked = [r for r in acked if not (r[1] == 2 and r[2] in (4, 5))]
    groups["billing"]["b"] = [r for r in groups["billing"]["b"] if not (r[1] == 2 and r[2] in (4, 5))]
    result = check_delivery(acked, groups, log=log)
    (finding,) = result.findings
    assert finding.kind == "gap" and (finding.partition, finding.offset) == (2, 4)
    assert finding.detail == "orders-2: offsets 4-5 of the log [0, 10) neither read nor acknowledged"


def test_the_tail_of_the_log_not_read_is_a_gap_and_the_log_start_is_accounted_for():
    acked, groups, log = clean_run()
    log[(TOPIC, 0)] = (0, 12)  # two records nobody was told of and nobody read
    result = check_delivery(acked, groups, log=log)
    assert [(f.kind, f.offset) for f in result.findings] == [("gap", 10)]
    # Records below the log start (removed by retention or DeleteRecords) need not be read, but are not checked.
    acked, groups, log = clean_run()
    log[(TOPIC, 2)] = (3, 10)
    groups["billing"]["b"] = [r for r in groups["billing"]["b"] if not (r[1] == 2 and r[2] < 3)]
    result = check_delivery(acked, groups, log=log)
    assert result.verdict == "inconclusive" and result.findings == ()
    assert result.unchecked == ("group 'billing': 3 acknowledged records of orders-2 below its log start 3 "
                                "(removed from the log) were not read",)


def test_a_record_read_that_was_not_acknowledged_or_differs_or_lies_outside_the_log_is_found():
    acked, groups, log = clean_run()
    acked.remove((TOPIC, 0, 9, b"k0", b"v0-9"))
    a = groups["billing"]["a"]
    a[2] = (TOPIC, 0, 2, b"k0", b"other")
    groups["billing"]["b"].append((TOPIC, 2, 10, b"k2", b"v2-10"))
    result = check_delivery(acked, groups, log=log)
    kinds = sorted((f.kind, f.partition, f.offset) for f in result.findings)
    assert kinds == [("differs", 0, 2), ("not acknowledged", 0, 9), ("not acknowledged", 2, 10),
                     ("outside the log", 2, 10)], result.report()
    assert "value b'other', acknowledged with b'v0-2'" in result.by_kind("differs")[0].detail


def test_an_offset_acknowledged_twice_is_found():
    acked, groups, log = clean_run()
    acked.append((TOPIC, 0, 0, b"k9", b"another"))
    result = check_delivery(acked, groups, log=log)
    assert [f.kind for f in result.findings] == ["acknowledged twice"]
    assert result.findings[0].group is None


def test_what_could_not_be_checked_is_inconclusive_not_ok():
    acked, groups, log = clean_run()
    nothing = check_delivery([], groups, log=log)
    assert nothing.verdict == "inconclusive" and not nothing.ok
    assert nothing.summary.startswith("delivery: inconclusive (no acknowledged records were given")
    assert check_delivery(acked, {}, log=log).verdict == "inconclusive"
    no_bounds = check_delivery(acked, groups)
    assert no_bounds.verdict == "inconclusive" and no_bounds.findings == ()
    assert "no log bounds given" in no_bounds.summary
    idle = check_delivery(acked, {"billing": groups["billing"], "idle": {"c": []}}, log=log)
    assert idle.verdict == "findings" and {f.group for f in idle.findings} == {"idle"}
    assert "group 'idle' read nothing" in idle.unchecked
    # Findings outrank what was not checked: a lost record is reported without the log bounds too.
    groups["billing"]["a"].pop()
    assert check_delivery(acked, groups).verdict == "findings"


def test_clients_records_are_taken_as_they_come():
    """kafka-python's ConsumerRecord-like objects (attributes), confluent's Message-like ones
    (methods), mappings, and acknowledgements without key and value (RecordMetadata)."""
    Meta = namedtuple("Meta", "topic partition offset")
    Record = namedtuple("Record", "topic partition offset key value")

    class Message:
        def __init__(self, p, o):
            self._p, self._o = p, o

        def topic(self):
            return TOPIC

        def partition(self):
            return self._p

        def offset(self):
            return self._o

        def key(self):
            return b"k"

        def value(self):
            return b"v"

    acked = [Meta(TOPIC, 0, o) for o in range(4)]
    groups = {"g": {"a": [Record(TOPIC, 0, 0, b"k", b"v"), {"topic": TOPIC, "partition": 0, "offset": 1}],
                    "b": [Message(0, 2), Message(0, 3)]}}
    result = check_delivery(acked, groups, log={(TOPIC, 0): (0, 4)})
    assert result.findings == ()
    assert result.unchecked == ("keys and values of acknowledgements without them were not compared",)
    assert result.verdict == "inconclusive"


def test_the_report_lists_each_finding_and_bounds_long_lists():
    acked, groups, log = clean_run()
    groups["billing"] = {"a": []}
    result = check_delivery(acked, groups, log=log)
    assert len(result.by_kind("lost")) == 30
    lines = result.report().splitlines()
    assert lines[0] == result.summary and str(result) == result.report()
    assert lines[-1] == "  not checked: group 'billing' read nothing"
    assert "  ... and 10 more lost" in lines
