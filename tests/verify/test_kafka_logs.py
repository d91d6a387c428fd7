"""Kafka's own logs as observations (``verify --kafka-log``), judged on real logs.

tests/verify/kafka_logs/ holds excerpts of logs people posted publicly (issue threads, Q&A,
blog posts, docs, files committed in public repositories), verbatim, each with a header naming
its source, the Kafka version as far as known and what happened (spec/verify.md lists them).
No excerpt there was written by us. On every one the checker must conform or be inconclusive
with a stated reason, except excerpts of known coordinator bugs, which it must flag with the
bug named. Planted faults in copies of real excerpts must each diverge at their line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from paths import TESTS

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.verify import kafka_log_lines as kl
from groupcoord.adapters.verify.kafka_log import check_logs, header, read_logs
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, INCONCLUSIVE

CORPUS = TESTS / "verify" / "kafka_logs"
EXCERPTS = sorted(CORPUS.glob("*.log"))
# Bugs the checker names; an excerpt of another bug must still not diverge without naming it.
NAMED_BUGS = {"KAFKA-8653"}


def _verdicts(*paths, release=None):
    return {v.group_id: v for v in check_logs(read_logs(paths), release)}


def _release(path: Path) -> str | None:
    """The broker's release when the excerpt's source says it exactly (as a user would give
    it with --kafka-version)."""
    m = re.match(r"(\d+\.\d+\.\d+)\b", header(path).get("kafka", ""))
    return m.group(1) if m else None


FAMILIES = ("0.9", "0.10", "0.11-2.1", "2.2", "2.3", "2.4-3.1", "3.2-3.6", "3.7-4.x", "client")


def _family(path: Path) -> str:
    return next(f for f in sorted(FAMILIES, key=len, reverse=True) if path.name.startswith(f + "-"))


def test_the_corpus_is_real_logs_of_every_version_family():
    assert len(EXCERPTS) >= 60, len(EXCERPTS)
    counts = {f: sum(_family(p) == f for p in EXCERPTS) for f in FAMILIES}
    assert all(counts.values()), counts
    assert counts["3.7-4.x"] >= 10, counts
    sources = [header(p)["source"] for p in EXCERPTS]
    for p in EXCERPTS:
        h = header(p)
        assert {"source", "kafka", "side", "what"} <= set(h), (p.name, h)
        assert h["source"].startswith("http") or re.match(r"[\w.-]+/[\w.-]+:", h["source"]), p.name
        assert any(not line.startswith("#") and line.strip() for line in p.read_text().splitlines()), p.name
    assert len(set(sources)) >= 60, "fewer than 60 distinct posts"  # a post may hold several runs


@pytest.mark.parametrize("path", EXCERPTS, ids=[p.name for p in EXCERPTS])
def test_a_real_excerpt_conforms_or_is_inconclusive_with_a_reason(path: Path):
    bug = header(path).get("bug")
    verdicts = _verdicts(path, release=_release(path))
    for v in verdicts.values():
        assert v.verdict in (CONFORMS, INCONCLUSIVE, DIVERGES)
        if v.verdict == DIVERGES:
            assert bug and v.observed["bug"] == bug, f"{v.group_id}: {v.detail}"
        if v.verdict == INCONCLUSIVE:
            assert len(v.detail) > 20, v.detail


def test_kafka_8653_is_flagged_on_a_real_log_given_the_release_and_named_as_needing_it_otherwise():
    """KAFKA-8653 (Kafka 2.3.0): 2.3.x and 2.4 word their lines alike, so the lines alone can
    only say what they would need; with the release given, the bug is named."""
    excerpts = [p for p in EXCERPTS if header(p).get("bug") == "KAFKA-8653"]
    flagged = {p.name for p in excerpts if _release(p) == "2.3.0"
               and any(v.observed.get("bug") == "KAFKA-8653" for v in _verdicts(p, release="2.3.0").values())}
    assert len(flagged) >= 1, "no real excerpt of KAFKA-8653 is flagged"
    for name in flagged:
        v = next(iter(_verdicts(CORPUS / name).values()))
        assert v.verdict == CONFORMS and "KAFKA-8653 if the broker is Kafka 2.3.0" in v.detail + str(v.observed)
        assert next(iter(_verdicts(CORPUS / name, release="2.3.1").values())).verdict == CONFORMS


# Planted faults: each in a copy of a real excerpt, one line changed (or dropped: None) as a
# faulty coordinator would log it; the excerpt itself conforms, the copy diverges at that line
# (a dropped line: at the line after it).
FAULTS = {
    "skipped generation": ("2.4-3.1-clickhouse-33433-leader-rejoin-loop.log",
                           "generation 138897 (__consumer_offsets", "generation 138898 (__consumer_offsets",
                           "Kafka moves it from 138896 to 138897"),
    "stabilized with no preparing": ("2.3-jaeger-1819-kafka-8653-ingester-rebalance.log",
                                     "with old generation 1698 (", None,
                                     "generation 1699 stabilized with no rebalance prepared since generation 1698"),
    "state the line cannot print": ("3.2-3.6-node-rdkafka-1041-first-member-joins.log",
                                    "in state PreparingRebalance with old generation 0",
                                    "in state Stable with old generation 0", "so the state it prints is always "
                                                                             "PreparingRebalance"),
    "state the table forbids there": ("3.2-3.6-snuba-6585-explicit-leavegroup.log",
                                      "joins group spans_group in Stable state", "joins group spans_group in Empty state",
                                      "a member joined the group in state Empty, but the lines above leave it "
                                      "CompletingRebalance or Stable"),
    "member vanishing": ("3.7-4.x-see-quick-blog-demo-group-two-joins.log",
                         "for generation 2. The group has 2 members", "for generation 2. The group has 1 members",
                         "1 member(s) left with no line saying so"),
    "generation back without dead": ("2.3-jaeger-1819-kafka-8653-ingester-rebalance.log",
                                     "with old generation 1698 (", "with old generation 1690 (",
                                     "the generation went back from 1698 to 1690"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_planted_fault_in_a_real_excerpt_diverges_at_its_line(tmp_path, fault):
    name, old, new, why = FAULTS[fault]
    text = (CORPUS / name).read_text()
    assert text.count(old) == 1, (name, old)
    assert all(v.verdict == CONFORMS for v in _verdicts(CORPUS / name).values())
    lines = text.splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if old in line)
    lines[at] = lines[at].replace(old, new) if new is not None else ""
    (tmp_path / name).write_text("".join(lines))
    verdicts = _verdicts(tmp_path / name)
    vs = [v for v in verdicts.values() if v.verdict == DIVERGES]
    assert vs and why in vs[0].detail, [v.detail for v in verdicts.values()]
    line = at + 1  # a dropped line: the next one takes its number
    assert vs[0].detail.startswith(f"{tmp_path / name}:{line}:"), vs[0].detail
    assert vs[0].observed["bug"] is None


def test_the_command_reports_logs_and_their_unknown_lines(tmp_path, capsys):
    path = CORPUS / "2.4-3.1-clickhouse-33433-leader-rejoin-loop.log"
    assert main(["verify", "--kafka-log", str(path), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "1 groups: 1 conform" in out
    assert main(["verify", "--kafka-log", str(tmp_path / "missing.log")]) == 2
    assert main(["verify", "--kafka-log", str(tmp_path)]) == 2
    (tmp_path / "trace.parquet").write_bytes(b"PAR1\0\0binary")
    assert main(["verify", "--kafka-log", str(tmp_path / "trace.parquet")]) == 2
    assert main(["verify", "--kafka-log", str(path), "--kafka-version", "two.three"]) == 2
    err = capsys.readouterr().err
    assert "not a text log" in err and "not a Kafka version" in err and "Traceback" not in err
    assert main(["verify"]) == 2


def test_line_layouts_of_real_logs_are_read(tmp_path):
    """A container's prefix, a shipper's timestamp before the application's, a thread name
    after the logger: the message and the application's own time are what count."""
    line = kl.parse("2021-05-04T16:41:31.006683114Z 2021-05-04 16:41:31,006 INFO [GroupCoordinator 0]: Member m-1 in "
                    "group g has failed, removing it from the group (kafka.coordinator.group.GroupCoordinator) "
                    "[executor-Heartbeat]", "x:1")
    assert line is not None and (line.kind, line.group_id, line.broker, line.time) == (
        "failed", "g", "0", "2021-05-04 16:41:31,006")


def corpus_table() -> str:
    """spec/verify.md's table of the corpus, from the files' headers."""
    rows = ["| file | Kafka | side | what happened | source |", "|---|---|---|---|---|"]
    for p in EXCERPTS:
        h = header(p)
        cells = [f"`{p.name}`", h.get("kafka", ""), h.get("side", ""), h.get("what", ""), h.get("source", "")]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


SPEC = TESTS.parent / "spec" / "verify.md"
_TABLE = re.compile(r"(<!-- corpus table -->\n)(.*?)(<!-- end corpus table -->)", re.S)


def test_spec_verify_lists_every_excerpt_of_the_corpus():
    found = _TABLE.search(SPEC.read_text())
    assert found, "spec/verify.md has no corpus table markers"
    assert found.group(2).strip() == corpus_table(), (
        "spec/verify.md's corpus table is stale: run python tests/verify/test_kafka_logs.py")


if __name__ == "__main__":  # rewrite spec/verify.md's corpus table from the headers
    SPEC.write_text(_TABLE.sub(lambda m: m.group(1) + corpus_table() + "\n" + m.group(3), SPEC.read_text()))
