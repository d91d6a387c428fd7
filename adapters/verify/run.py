"""``groupcoord verify``: every group of an observed trace through the search, on one process
(``plain``) or on Spark (a group is the unit of work), with a report like ``replay``'s:
``verdicts.parquet`` (one row per group; ``verdicts.jsonl`` without pyarrow), ``summary.json`` and
``summary.txt``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import attrs

from groupcoord.adapters.traces.progress import Progress
from groupcoord.adapters.verify import findings, observed, topics
from groupcoord.adapters.verify.search import CONFORMS, DIVERGES, INCONCLUSIVE, Settings, Verdict, verify_group

EXIT = {CONFORMS: 0, DIVERGES: 1, INCONCLUSIVE: 3}  # 2: bad input
COLUMNS = ("group_id", "verdict", "detail", "pairs", "nodes", "line", "observed", "allowed", "excerpt", "steps")
_JSON_COLUMN = "observed"  # a dict: as JSON text (its fields differ by API)
_LIST_COLUMNS = ("allowed", "excerpt", "steps")


# JSON Lines held at once by the plain engine (a pair takes ~7x its text in memory): a larger
# recording is checked a share of its groups at a time (observed.shares)
SHARE_BYTES = 128 << 20


def with_topics(path: str, settings: Settings) -> Settings:
    """``settings`` with the recording's topics image (its Metadata answers, topics.py), which
    consumer groups are checked against, unless given."""
    if settings.topics is not None:
        return settings
    try:
        seen = topics.read(path)
    except (OSError, ValueError) as e:
        raise observed.TraceError(f"{path}: its topics file cannot be read: {e}") from None
    return settings if seen is None else attrs.evolve(settings, topics=seen)


def data_plane_pairs(path: str) -> dict[str, int]:
    """The data plane's pairs the recording counted and did not record (``data_plane_pairs`` in
    its meta.json, spec/observed-trace.md), as reasons not checked: "Produce pairs (...)" -> n."""
    where = Path(path)
    try:
        meta = json.loads(((where if where.is_dir() else where.parent) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    pairs = meta.get("data_plane_pairs") if isinstance(meta, dict) else None
    if not isinstance(pairs, dict):
        return {}
    return {f"{api} pairs (the data plane: counted by record, not recorded)": n for api, n in pairs.items()
            if isinstance(n, int) and n > 0}


def verify_plain(path: str, settings: Settings, share_bytes: int = SHARE_BYTES,
                 keep_going: bool = False) -> tuple[list[Verdict], dict]:
    settings = with_topics(path, settings)
    verdicts: list[Verdict] = []
    unchecked: dict[str, int] = {}
    progress, diverging = Progress("verify", unit="groups"), 0
    for share in observed.shares(path, share_bytes):
        for gid, unit in observed.iter_units(share):
            verdicts.append(verify_group(gid, unit, settings, keep_going))
            diverging += verdicts[-1].verdict == DIVERGES
            progress.advance(1, f"{diverging} diverging")
        for reason, count in share.unchecked.items():
            unchecked[reason] = unchecked.get(reason, 0) + count
        del share  # before the next share is read
    progress.done()
    verdicts.sort(key=lambda v: v.group_id)
    return verdicts, unchecked


# A recording's last line without its newline that is not a record (a recorder killed mid-write):
# left out by every reader, warned of, counted, and the verdict of its group rests on the lines before.
TORN = "torn last line (no newline, not a record): left out"


def _resting(group: str | None) -> str:
    return f"group {group}'s verdict rests on the lines before it" if group is not None else \
        "every group's verdict rests on the lines before it"


def _rests(detail: str, file) -> str:
    said = f"rests on the lines before {file}'s torn last line"
    return f"{detail}; {said}" if detail else said


def verify_spark(path: str, settings: Settings, master: str, keep_going: bool = False,
                 torn: str | None = None) -> tuple[list[Verdict], dict]:
    """Each group's pairs go to one task (grouped by group id); only verdicts come back. JSON
    Lines are read by the executors line by line (a bad line names its file and line)."""
    from groupcoord.adapters.observe.trace import JSONL
    from groupcoord.adapters.traces.spark_session import spark_session, stopped_after

    d = observed.trace_dir(path)
    name = str(d / JSONL)
    # Parquet, or a crashed recording's journal: read here, handed out by group
    pairs = None if (d / JSONL).exists() else observed.read(d)
    with stopped_after(spark_session(master, "groupcoord-verify")) as spark:
        sc = spark.sparkContext
        keyed = (sc.textFile(name).zipWithIndex().flatMap(lambda li: _keyed(li, name, torn)) if pairs is None
                 else sc.parallelize(pairs).flatMap(_key))
        return _spark_verdicts(keyed.cache(), settings, keep_going)


def _spark_verdicts(keyed, settings: Settings, keep_going: bool = False) -> tuple[list[Verdict], dict]:
    bad = keyed.filter(lambda kv: kv[0][0] == "error").take(1)
    if bad:
        raise observed.TraceError(bad[0][0][1])
    unchecked = dict(keyed.filter(lambda kv: kv[0][0] == "unchecked").map(lambda kv: (kv[0][1], 1))
                     .reduceByKey(lambda a, b: a + b).collect())
    units = keyed.filter(lambda kv: kv[0][0] == "group").map(lambda kv: (kv[0][1], kv[1])).groupByKey()
    rows = units.map(lambda gu: _verdict_row(gu[0], list(gu[1]), settings, keep_going)).collect()
    return [Verdict(**r) for r in sorted(rows, key=lambda r: r["group_id"])], unchecked


def _keyed(line_index: tuple, file: str, torn: str | None = None) -> list:
    line, index = line_index
    if not line.strip() or line == torn:  # the torn last line: left out, as the plain reader does
        return []
    where = f"{file}:{index + 1}"
    try:
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        return _key(observed.from_record(record, index + 1, where))
    except observed.TraceError as e:
        return [(("error", str(e)), None)]
    except ValueError as e:
        return [(("error", f"{where}: not JSON ({e})"), None)]


def _key(obs) -> list:
    parts = observed.per_group(obs)
    if parts:
        return [(("group", g), part) for g, part in parts]
    return [(("unchecked", observed.unchecked_reason(obs)), None)]


def _verdict_row(group_id: str, unit: list, settings: Settings, keep_going: bool = False) -> dict:
    return attrs.asdict(verify_group(group_id, observed.in_order(unit), settings, keep_going), recurse=False)


def summarize(verdicts: list[Verdict], unchecked: dict, seconds: float, engine: str) -> dict:
    counts = {v: sum(1 for x in verdicts if x.verdict == v) for v in (CONFORMS, DIVERGES, INCONCLUSIVE)}
    pairs = sum(v.pairs for v in verdicts)
    return {"engine": engine, "groups": len(verdicts), **counts, "pairs_checked": pairs,
            "pairs_not_checked": dict(sorted(unchecked.items())), "seconds": round(seconds, 3),
            "groups_per_second": round(len(verdicts) / seconds, 1) if seconds > 0 else None,
            "us_per_pair": round(seconds * 1e6 / pairs, 1) if pairs else None,
            "diverging_groups": [_brief(v) for v in verdicts if v.verdict == DIVERGES][:20],
            "inconclusive_groups": [_brief(v) for v in verdicts if v.verdict == INCONCLUSIVE][:20]}


def exit_code(summary: dict) -> int:
    if summary.get("findings") is not None:  # by finding: only known ones (--known) are not a divergence
        if summary["findings"]:
            return EXIT[DIVERGES]
    elif summary[DIVERGES]:
        return EXIT[DIVERGES]
    if summary[INCONCLUSIVE] or not summary["groups"]:
        return EXIT[INCONCLUSIVE]  # nothing checked is not "all conform"
    return EXIT[CONFORMS]


def _brief(v: Verdict) -> dict:
    return {"group_id": v.group_id, "detail": v.detail, "line": v.line, "excerpt": list(v.excerpt)}


def write_report(out: Path, verdicts: list[Verdict], summary: dict, describe=None) -> None:
    """``verdicts.parquet`` (one row per group; ``verdicts.jsonl``, the same rows as JSON Lines,
    when pyarrow is not installed: the replay extra), ``summary.json`` and ``summary.txt``;
    written whole or not at all (``stopping.written``)."""
    from groupcoord.adapters.traces.stopping import written

    with written(out, directory=True, stale=lambda name: name in ("verdicts.parquet", "verdicts.jsonl")) as into:
        _report_files(into, verdicts, summary, describe)


def _report_files(out: Path, verdicts: list[Verdict], summary: dict, describe) -> None:
    rows = [attrs.asdict(v, recurse=False) for v in verdicts]

    def cell(name: str, value):
        if name == _JSON_COLUMN:
            return None if value is None else json.dumps(value, sort_keys=True)
        return list(value) if name in _LIST_COLUMNS else value

    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        pa = None
    if pa is not None:
        table = pa.table({name: [cell(name, r[name]) for r in rows] for name in COLUMNS})
        pq.write_table(table, out / "verdicts.parquet")
        (out / "verdicts.jsonl").unlink(missing_ok=True)  # an older report's
    else:
        (out / "verdicts.parquet").unlink(missing_ok=True)
        with open(out / "verdicts.jsonl", "w") as f:
            for r in rows:
                f.write(json.dumps({name: cell(name, r[name]) for name in COLUMNS}, default=str) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.txt").write_text(format_summary(summary, verdicts, describe))


def format_summary(summary: dict, verdicts: list[Verdict], describe=None) -> str:
    lines = [f"{summary['groups']} groups: {summary[CONFORMS]} conform, {summary[DIVERGES]} diverge, "
             f"{summary[INCONCLUSIVE]} inconclusive ({summary['pairs_checked']} pairs checked, "
             f"{summary['seconds']} s on {summary['engine']})"]
    for reason, n in summary["pairs_not_checked"].items():
        lines.append(f"not checked: {n} {reason}")
    for v in verdicts:
        lines.extend((describe or describe_verdict)(v))
    return "\n".join(lines) + "\n"


def describe_verdict(v: Verdict, steps_shown: int = 12, known: frozenset = frozenset(),
                     answers: bool = True) -> list[str]:
    """A group's verdict in words: nothing when it conforms; else why, and for each divergence
    (``v.more`` too, with --keep-going) its signature, where Kafka's answer comes from, the
    broker's answer, what the spec allows there (``answers``) and the execution that got
    furthest. Findings whose signature is in ``known`` are left out."""
    if v.verdict == INCONCLUSIVE:
        return [f"INCONCLUSIVE {v.group_id}: {v.detail}"]
    if v.verdict != DIVERGES:
        return []
    lines: list[str] = []
    for n, f in enumerate((v, *v.more)):
        sig = signature_of(f)
        if sig is not None and findings.is_known(sig, known):
            continue
        if f.follows is not None:  # not a finding of its own: one line, not counted
            lines.append(f"FOLLOWS {v.group_id}: {f.detail} (follows from line {f.follows}'s finding: the request "
                         f"carries what only that diverging answer gave)")
            continue
        then = " (the answers of the findings before it taken as given)" if n else ""
        lines.append(f"DIVERGES {v.group_id}: {f.detail}{then}")
        lines.extend(finding_lines(f, "  "))
        if answers and f.observed is not None:
            lines.append(f"  broker answered: {findings.shown(f.observed)}")
        if answers:
            lines.extend(f"  spec allows:     {findings.shown(a)}" for a in f.allowed[:3])
        lines.append(f"  inputs leading there (trace lines, in the order taken): {list(f.excerpt)}")
        shown = f.steps[-steps_shown:]
        lines.append(f"  the execution that got furthest ({len(f.steps)} inputs, the last {len(shown)}):")
        lines.extend(f"    {s}" for s in shown)
    return lines


def signature_of(v: Verdict) -> str | None:
    """A divergence's signature (findings.py), None for a verdict that names none."""
    if len(v.mismatch) != 5:
        return None
    return findings.signature(*v.mismatch)


def finding_lines(v: Verdict, indent: str) -> list[str]:
    """The finding's signature, and where Kafka's answer comes from (and spec/peers.md)."""
    sig = signature_of(v)
    if sig is None:
        return []
    api, _version, field, spec, _broker = v.mismatch
    return [f"{indent}finding: {sig}", *(f"{indent}{line}" for line in findings.pointers(api, field, spec, sig))]


def tally(verdicts: list[Verdict], known: frozenset = frozenset()) -> tuple[dict[str, int], int]:
    """Each distinct signature not in ``known`` with the number of groups showing it, and how
    many findings ``known`` set aside."""
    counts: dict[str, int] = {}
    set_aside = 0
    for v in verdicts:
        if v.verdict != DIVERGES:
            continue
        sigs = [signature_of(f) or f"{v.group_id}: {f.detail}" for f in (v, *v.more) if f.follows is None]
        for sig in dict.fromkeys(sigs):
            if findings.is_known(sig, known):
                set_aside += 1
            else:
                counts[sig] = counts.get(sig, 0) + 1
    return counts, set_aside


def findings_text(counts: dict[str, int], set_aside: int, where: str) -> list[str]:
    """The distinct findings, one signature a line (the --known file's format), and the count
    set aside."""
    n = len(counts)
    lines = [f"{n} distinct divergence{'s' if n != 1 else ''} {where}" + (":" if n else "")]
    lines.extend(f"  {sig}" + (f"   # {c} groups" if c > 1 else "") for sig, c in counts.items())
    if set_aside:
        lines.append(f"{set_aside} known finding{'s' if set_aside != 1 else ''} set aside")
    return lines


def run_logs(paths: list[str], report: str | None = None, release: str | None = None) -> tuple[int, str]:
    """``verify --kafka-log``: the groups of Kafka's logs (kafka_log.py), reported alike;
    ``release``: the brokers' Kafka version, when known."""
    from groupcoord.adapters.verify.kafka_log import check_logs, describe, read_logs

    started = time.perf_counter()
    read = read_logs(paths)
    verdicts = check_logs(read, release)
    unchecked = {"log lines matching no known statement": len(read.unknown)} if read.unknown else {}
    summary = summarize(verdicts, unchecked, time.perf_counter() - started, "kafka logs")
    summary["unknown_lines"] = [f"{where}: {text}" for where, text in read.unknown[:50]]
    out = Path(report) if report else Path(str(Path(paths[0]).resolve()) + "-verify")
    write_report(out, verdicts, summary, describe)
    text = format_summary(summary, verdicts, describe).replace(" pairs checked,", " logged events checked,", 1)
    text += "".join(f"  unknown: {line}\n" for line in summary["unknown_lines"][:10])
    return exit_code(summary), text + f"report: {out}\n"


def run(path: str, settings: Settings, engine: str = "plain", master: str = "local[2]",
        report: str | None = None, keep_going: bool = False, known: frozenset | None = None) -> tuple[int, str]:
    """``keep_going``: every divergence of a group, not only its first; ``known``: signatures
    set aside (--known FILE): counted, not reported, not a divergence for the exit status."""
    started = time.perf_counter()
    settings = with_topics(path, settings)
    torn = observed.torn_line(path)
    if torn is not None:
        print(f"groupcoord verify: warning: {torn[0]}: {TORN}; {_resting(observed.group_in(torn[1]))}",
              file=sys.stderr, flush=True)
    if engine == "spark":
        verdicts, unchecked = verify_spark(path, settings, master, keep_going, torn=torn and torn[1])
    else:
        verdicts, unchecked = verify_plain(path, settings, keep_going=keep_going)
    unchecked = {**unchecked, **data_plane_pairs(path)}
    affected = None
    if torn is not None:
        unchecked = {**unchecked, TORN: 1}
        affected = observed.group_in(torn[1])
        verdicts = [attrs.evolve(v, detail=_rests(v.detail, torn[0])) if affected in (None, v.group_id) else v
                    for v in verdicts]
    summary = summarize(verdicts, unchecked, time.perf_counter() - started, engine)
    if torn is not None:
        summary["torn_last_line"] = {"file": str(torn[0]), "group_id": affected}
    by_finding = keep_going or known is not None
    known = frozenset(known or ())
    counts, set_aside = tally(verdicts, known)
    if by_finding:
        summary["findings"] = counts
        summary["known_set_aside"] = set_aside
    out = Path(report) if report else Path(str(Path(path).resolve()).rstrip("/") + "-verify")

    def describe(v: Verdict) -> list[str]:
        lines = describe_verdict(v, known=known)
        if torn is not None and affected == v.group_id:
            lines.append(f"TORN {v.group_id}: its verdict ({v.verdict}) rests on the lines before {torn[0]}'s torn "
                         f"last line, which was about it")
        return lines
    write_report(out, verdicts, summary, describe)
    text = format_summary(summary, verdicts, describe)
    if by_finding:
        text += "\n".join(findings_text(counts, set_aside, f"in {len(verdicts)} groups")) + "\n"
    return exit_code(summary), text + f"report: {out}\n"
