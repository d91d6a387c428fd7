"""Trace replay without Spark: the simulator's traces replay clean, injected faults are
flagged for exactly their groups, canonical encoding equals trace.encode, and bad input is
reported by file and line."""

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
orjson = pytest.importorskip("orjson")

from replay_helpers import shared_recording, spread_over_files

from groupcoord.adapters.cli import replay as replay_cli
from groupcoord.adapters.replay import faults, stream
from groupcoord.adapters.replay import report as replay_report
from groupcoord.adapters.replay.phases import PHASES
from groupcoord.adapters.replay.plain_job import plain_replay
from groupcoord.adapters.sim import simulator, workload
from groupcoord.adapters.traces import records
from groupcoord.adapters.traces import trace_files as trace_io
from groupcoord.core import trace
from groupcoord.core.config import CoordinatorConfig

GROUPS = 24


@functools.lru_cache(maxsize=None)
def simulated(tmp_root: str, fmt: str = "parquet") -> Path:
    path = Path(tmp_root) / f"sim-{fmt}"
    simulator.simulate(path, groups=GROUPS, members=3, seed=11, duration_ms=90_000, fmt=fmt, progress=False)
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("traces"))


def rows_of(path):
    for cols in trace_io.iter_batches(path):
        yield from zip(*(cols[n] for n in trace_io.COLUMNS))


def test_canonical_encoding_is_trace_encode(root):
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    kinds = set()
    for v, gid, part, seq, ts, direction, type_name, data in list(rows_of(simulated(root)))[:6000]:
        value = trace.decode({"type": type_name, "data": json.loads(data)})
        assert records.canonical_data(value) == data == dumps(trace.encode(value)["data"])
        record = {"v": v, "group_id": gid, "partition": part, "seq": seq, "ts_ms": ts, "dir": direction,
                  "type": type_name, "data": json.loads(data)}
        assert records.record_line(gid, part, seq, ts, direction, type_name, data) == trace.to_json_line(record)
        if direction == "in":
            assert records.decode_event(type_name, data) == value
        else:  # the fast comparison's serialisation is the recorded one (else it is never fast)
            assert orjson.dumps(records.plain_data(value), default=records.plain_default) == data.encode()
        kinds.add(type_name)
    assert {"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup", "TimerFired", "LoadPartition",
            "WriteCompleted", "Respond", "Write", "SetTimer", "CancelTimer"} <= kinds


def test_sequences_are_per_group_and_gapless(root):
    seqs: dict = {}
    for v, gid, part, seq, *_ in rows_of(simulated(root)):
        seqs.setdefault(gid, []).append(seq)
    assert len(seqs) == GROUPS
    assert all(s == list(range(len(s))) for s in seqs.values())


def test_simulation_is_deterministic_whatever_the_jobs(tmp_path):
    one = simulator.simulate(tmp_path / "a", groups=6, members=2, seed=5, duration_ms=30_000, groups_per_file=3,
                             progress=False)
    two = simulator.simulate(tmp_path / "b", groups=6, members=2, seed=5, duration_ms=30_000, groups_per_file=3,
                             jobs=2, progress=False)
    assert one["totals"] == two["totals"]
    for f in sorted((tmp_path / "a").glob("part-*")):
        assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes()


def test_summary_counts_what_happened(root):
    summary = json.loads((simulated(root) / "summary.json").read_text())
    t = summary["totals"]
    assert t["rebalances"] >= GROUPS and t["inputs"] > 0 and t["partitions_moved"] > 0
    assert set(summary["by_strategy"]) == set(workload.STRATEGIES)
    assert 0 < t["not_stable_share"] < 1


@pytest.mark.parametrize("processes", [1, 2])
def test_clean_trace_replays_clean(root, tmp_path, processes):
    s = plain_replay(str(simulated(root)), str(tmp_path / "report"), processes=processes)
    assert s["units"] == GROUPS and s["units_with_findings"] == 0, replay_report.format_report(s)
    assert s["records"] == sum(1 for _ in rows_of(simulated(root)))
    assert (tmp_path / "report" / "findings.parquet").exists()


def test_fast_invariant_path_equals_check_commands(root):
    cfg = trace_io.coordinator_config(trace_io.read_manifest(simulated(root)))
    replayer = stream.StreamReplayer(cfg)
    opened = replayer._open

    def verifying(key, gid):
        unit = opened(key, gid)
        unit.verify_fast_path = True
        return unit

    replayer._open = verifying
    results = []
    rows = sorted(rows_of(simulated(root)), key=lambda r: (r[1], r[3]))
    results += replayer.feed(*map(list, zip(*rows)))
    results += replayer.finish()
    assert len(results) == GROUPS and not [r for r in results if r.finding]


@pytest.fixture(scope="module")
def faulty(root):
    dst = Path(root) / "faulty"
    injected = faults.inject(simulated(root), dst)
    return dst, injected


def test_each_fault_is_flagged_for_exactly_its_group(faulty, tmp_path):
    path, injected = faulty
    assert sorted(injected.values()) == sorted(faults.FAULTS)
    s = plain_replay(str(path), str(tmp_path / "report"), processes=2, sample=100)
    found = {f["group_id"]: f for f in s["first_findings"]}
    assert set(found) == set(injected), replay_report.format_report(s)
    for gid, fault in injected.items():
        f = found[gid]
        assert faults.EXPECTED_CHECK[fault] in f["checks"].split(","), (fault, f)
        assert f["file"] and f["line"] >= 1 and f["expected"] is not None or f["kind"] == "time"


@pytest.mark.parametrize("processes", [1, 2])
def test_plain_replay_and_groups_spanning_files(root, tmp_path, processes):
    """Without the manifest's promise, groups spread over two files are brought together;
    with it, each file is replayed alone and every split group is flagged, never passed."""
    clean = simulated(root)
    spread_over_files(clean, tmp_path / "spanning", promise=False)
    s = plain_replay(str(tmp_path / "spanning"), str(tmp_path / "r1"), processes=processes)
    assert s["units"] == GROUPS and s["units_with_findings"] == 0, replay_report.format_report(s)
    spanning = spread_over_files(clean, tmp_path / "promised", promise=True)
    assert len(spanning) == GROUPS
    s = plain_replay(str(tmp_path / "promised"), str(tmp_path / "r2"), processes=processes, sample=100)
    assert {f["group_id"] for f in s["first_findings"]} == spanning, replay_report.format_report(s)
    assert {f["check"] for f in s["first_findings"]} == {"sequence_order"}


def test_report_names_expected_and_actual(faulty, tmp_path):
    path, injected = faulty
    plain_replay(str(path), str(tmp_path / "report"))
    text = (tmp_path / "report" / "summary.txt").read_text()
    assert "6 groups with findings" in text and "expected:" in text and "actual:" in text
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["units_with_findings"] == 6 and summary["units"] == GROUPS


def jsonl_copy(root, dst: Path) -> tuple[Path, list[str]]:
    """A copy of the simulated JSON Lines trace: its first file and that file's lines."""
    shutil.copytree(simulated(root, "jsonl"), dst)
    part = sorted(dst.glob("part-*.jsonl"))[0]
    return part, part.read_text().splitlines()


def write_lines(part: Path, lines: list[str]) -> None:
    part.write_text("\n".join(lines) + "\n")


def test_jsonl_trace_and_malformed_lines(root, tmp_path):
    dst = tmp_path / "bad"
    part, lines = jsonl_copy(root, dst)
    victim = json.loads(lines[10])
    lines[10] = lines[10][:40]  # cut: not JSON
    write_lines(part, lines)
    with pytest.raises(trace.TraceError, match=rf"{part.name}:11: not JSON"):
        list(trace_io.iter_batches(dst))
    s = plain_replay(str(dst), str(tmp_path / "report"), sample=50)
    # not JSON, but its group can be read off the text: the one finding is in that group
    # (first in it, its seq being cut off), at the bad line; no gap reported elsewhere
    assert [(f["group_id"], f["kind"], f["file"], f["line"]) for f in s["first_findings"]] == \
        [(victim["group_id"], "malformed", str(part), 11)]
    assert s["units_with_findings"] == 1 and s["units"] == GROUPS
    assert "(a line that could not be read)" in replay_report.format_report(s)
    # cut after its seq: the bad record takes its own place in its group
    lines[10] = json.dumps(victim, separators=(",", ":"))[:90]
    assert f'"seq":{victim["seq"]},' in lines[10]
    write_lines(part, lines)
    s = plain_replay(str(dst), str(tmp_path / "report2"), sample=50)
    assert [(f["group_id"], f["kind"], f["seq"], f["line"]) for f in s["first_findings"]] == \
        [(victim["group_id"], "malformed", victim["seq"], 11)]


def test_a_bad_seq_is_reported_in_its_group(root, tmp_path):
    """A line that is JSON but whose seq is not an integer, and a Parquet row whose seq is
    null: each is the one finding of its group, at its own line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    part, lines = jsonl_copy(root, tmp_path / "jsonl")
    victim = json.loads(lines[4])
    lines[4] = json.dumps({**victim, "seq": None})
    write_lines(part, lines)
    s = plain_replay(str(tmp_path / "jsonl"), str(tmp_path / "r1"), sample=50)
    assert [(f["group_id"], f["kind"], f["line"]) for f in s["first_findings"]] == \
        [(victim["group_id"], "malformed", 5)]
    src = simulated(root)
    dst = tmp_path / "parquet"
    shutil.copytree(src, dst)
    part = sorted(dst.glob("part-*.parquet"))[0]
    table = pq.read_table(part)
    seq = table.column("seq").to_pylist()
    victim_group = table.column("group_id")[4].as_py()
    seq[4] = None
    table = table.set_column(table.column_names.index("seq"), "seq", pa.array(seq, pa.int64()))
    pq.write_table(table, part)
    s = plain_replay(str(dst), str(tmp_path / "r2"), sample=50)
    assert [(f["group_id"], f["kind"], f["line"]) for f in s["first_findings"]] == [(victim_group, "malformed", 5)]


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.update(type="Explode"), "type 'Explode'"),
    (lambda r: r.update(v=1), "trace version 1"),
    (lambda r: r["data"].update(bogus=1), "unknown fields"),
])
def test_bad_records_are_refused_by_file_and_line(root, tmp_path, mutate, message):
    src = simulated(root, "jsonl")
    part = sorted(src.glob("part-*.jsonl"))[0]
    lines = part.read_text().splitlines()
    record = json.loads(lines[3])
    mutate(record)
    lines[3] = json.dumps(record)
    bad = tmp_path / "t.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    rows = list(trace_io.iter_batches(bad, strict=False))
    results = stream.StreamReplayer(CoordinatorConfig.from_kafka(
        trace_io.read_manifest(src)["config"])).feed(
        *(rows[0][n] for n in trace_io.COLUMNS), rows[0]["file"], rows[0]["line"])
    finding = next(r.finding for r in results if r.finding)
    assert message in finding.detail and finding.file == str(bad) and finding.line == 4
    assert finding.kind == "malformed" and finding.group_id == record["group_id"] and finding.seq == record["seq"]


def test_trace_directory_errors(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(trace.TraceError, match="not a trace file"):
        trace_io.trace_files(tmp_path)
    (tmp_path / "x.csv").unlink()
    (tmp_path / "meta.json").write_text('{"format": "other"}')
    with pytest.raises(trace.TraceError, match="meta.json: not a groupcoord-trace manifest"):
        trace_io.read_manifest(tmp_path)
    with pytest.raises(trace.TraceError, match="no trace files"):
        trace_io.trace_files(tmp_path)


def test_instance_scope_recording_replays_clean_and_catches_a_change(tmp_path):
    path = shared_recording(tmp_path)
    s = plain_replay(str(path), str(tmp_path / "r1"))
    assert s["units"] == 1 and s["units_with_findings"] == 0 and s["instances"] == 2, replay_report.format_report(s)
    f = next(path.glob("*.jsonl"))
    text = f.read_text().replace('"error_code":"NONE","generation_id":1', '"error_code":"NONE","generation_id":7', 1)
    f.write_text(text)
    s = plain_replay(str(path), str(tmp_path / "r2"))
    assert s["units_with_findings"] == 1 and s["first_findings"][0]["kind"] == "divergence"


def test_cli_simulate_replay_and_exit_codes(tmp_path, faulty, capsys):
    out = tmp_path / "t"
    assert replay_cli.main(["simulate", "--groups", "3", "--members", "2", "--seed", "3", "--duration", "20",
                            "--out", str(out)]) == 0
    assert "simulated 3 groups" in capsys.readouterr().out
    assert replay_cli.main(["replay", str(out), "--engine", "plain"]) == 0
    assert "no divergence, no violation" in capsys.readouterr().out
    assert replay_cli.main(["replay", str(faulty[0]), "--engine", "plain", "--out", str(tmp_path / "r")]) == 1
    assert replay_cli.main(["replay", str(tmp_path / "nothing"), "--engine", "plain"]) == 2


@pytest.mark.bench  # asserts a speed ratio measured on this machine: `pytest -m bench`, run once per CI run
def test_bench_replay_quick_smoke(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "groupcoord.adapters.cli.replay", "bench", "replay", "--quick",
                           "--records", "6000", "--groups", "30", "--engines", "plain,core", "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    names = [ln["name"] for ln in lines]
    assert {"trace", "plain_1", "plain_2", "core_1", "ratios", "goals"} <= set(names)
    assert all(ln.get("findings", 0) == 0 for ln in lines)
    by_name = {ln["name"]: ln for ln in lines}
    # the core alone runs the same inputs as the plain replay
    trace, core, plain = by_name["trace"], by_name["core_1"], by_name["plain_1"]
    assert core["records"] == plain["records"] == trace["records"] and core["events"] == plain["events"]
    assert core["groups"] == plain["groups"] == 30
    assert by_name["ratios"]["core_alone_2core_seconds_per_10M_records"] > 0
    # the plain replay's phases, timed in a run of their own on the same trace, add up to it
    split = by_name["plain_1_split"]
    assert split["records"] == plain["records"] and split["findings"] == 0
    assert set(split["phase_share"]) == set(PHASES) == set(split["phase_cpu_us_per_record"])
    assert all(v >= 0 for v in split["phase_share"].values()) and split["phase_share"]["core"] > 0
    assert abs(sum(split["phase_share"].values()) - 1) < 0.01
    ratio = by_name["ratios"]["plain_vs_core_cpu_per_record"]
    assert abs(ratio - plain["us_per_record_cpu"] / core["us_per_record_cpu"]) < 0.05
    # the floor: the core, and what any replay pays besides it, each timed alone
    parts = core["floor_us_per_record_cpu"]
    assert set(parts) == {"columns", "decode", "serialise"} and all(v > 0 for v in parts.values()), parts
    floor = by_name["ratios"]["floor_vs_core_cpu_per_record"]
    assert abs(floor - (1 + sum(parts.values()) / core["us_per_record_cpu"])) < 0.05
    # the floor's parts and the replay are timed in separate runs: beside other test workers
    # each moves by a few per cent (2.07 against 2.05 seen), so the floor is below within that
    assert 1 < floor < ratio * 1.1, (floor, ratio)
    goals = next(ln for ln in lines if ln["name"] == "goals")
    # Spark did not run: its goals are unknown, not met
    assert goals == {"name": "goals", "plain_at_most_2x_core": ratio <= 2, "spark_at_least_70pct_of_plain": None,
                     "scaling_at_least_1.7x": None, "10M_under_30s_on_2_cores": None}


def test_scenario_runner_recordings_replay_clean(tmp_path):
    """Every conformance scenario, recorded as the scenario runner runs it (instance scope,
    ``groupcoord scenario --trace``), replays with no divergence and no violation; only a
    scenario that reloads with new settings has no trace, and says why."""
    from paths import SUITE

    from groupcoord.adapters.scenarios import runner as conformance

    files = SUITE
    assert len(files) > 200
    recorded, untraced = 0, []
    for i, path in enumerate(files):
        out = tmp_path / f"s{i}"
        result, problem = conformance.run_file_recorded(path, out)
        assert result.passed, result.line()
        if problem is not None:
            untraced.append((path.name, problem))
            continue
        s = plain_replay(str(out), str(tmp_path / f"r{i}"))
        assert s["units_with_findings"] == 0, f"{path}:\n{replay_report.format_report(s)}"
        recorded += 1
    assert untraced == [("kafka-onload-exceeds-max-size.json",
                         "a reload changes the config, which one trace cannot hold")]
    assert recorded == len(files) - 1


def test_single_leader_allows_a_replaced_static_leader_loaded_from_storage():
    """After a failover the group comes from storage with its static leader under the old
    member id; the leader's replacement (same instance, new id, same generation) is not a
    second leader. (Found in a 10M-record simulation.)"""
    from types import SimpleNamespace

    from groupcoord.adapters.checks import trace_checks as tc
    from groupcoord.core import events as ev
    from groupcoord.core.commands import JoinGroupResponse, Respond
    from groupcoord.core.errors import Error

    checks = tc.InstanceChecks()
    loaded = SimpleNamespace(group_id="g", static_members={"i1": "old", "i2": "b"}, members={"old": 1, "b": 1})
    replaced = SimpleNamespace(group_id="g", static_members={"i1": "new", "i2": "b"}, members={"new": 1, "b": 1})

    def answer(rid, member, leader):
        return Respond(rid, JoinGroupResponse(error_code=Error.NONE, generation_id=1, leader=leader, member_id=member))

    def join(rid, instance):
        return ev.JoinGroup(request_id=rid, now_ms=0, version=9, group_id="g", session_timeout_ms=10_000,
                            rebalance_timeout_ms=10_000, member_id="", group_instance_id=instance,
                            protocol_type="consumer", protocols=(), new_member_uuid="u")

    requests = {1: join(1, "i2"), 2: join(2, "i1")}
    groups = {1: loaded, 2: loaded}
    assert checks.step(None, [answer(1, "b", "old")], requests.get, groups.get, {"g": loaded}.get) == []
    assert checks.step(None, [answer(2, "new", "new")], requests.get, groups.get, {"g": replaced}.get) == []
    stranger = checks.step(None, [answer(1, "b", "b")], requests.get, groups.get, {"g": replaced}.get)
    assert tc.SINGLE_LEADER in {v.split(":")[0] for v in stranger}


def test_a_copied_file_breaks_the_promise_and_fails_the_replay(root, tmp_path, capsys):
    """The manifest promises that no group spans files; a copy of one file puts its groups in
    two files, each copy complete from seq 0. Both copies replay clean alone, so only the
    group ids across files show it: the replay names them, counts each group once, exits 1."""
    copy = tmp_path / "copied"
    shutil.copytree(simulated(root), copy)
    first = sorted(copy.glob("part-*.parquet"))[0]
    shutil.copy(first, copy / "part-copy.parquet")
    gid = trace_io.COLUMNS.index("group_id")
    in_first = {row[gid] for row in rows_of(first)}
    for processes in (1, 2):
        s = plain_replay(str(copy), str(tmp_path / f"r{processes}"), processes=processes)
        assert s["units_with_findings"] == 0 and s["units"] == GROUPS
        assert s["groups_in_several_files"] == len(in_first)
        assert set(s["groups_in_several_files_sample"]) == set(sorted(in_first)[:20])
    assert replay_cli.main(["replay", str(copy), "--engine", "plain", "--out", str(tmp_path / "r")]) == 1
    assert "are in more than one file, though meta.json promises" in capsys.readouterr().out
    # without the promise the copies are brought together and flagged as repeated records
    meta = json.loads((copy / "meta.json").read_text())
    (copy / "meta.json").write_text(json.dumps({**meta, "groups_span_files": True}))
    s = plain_replay(str(copy), str(tmp_path / "r3"))
    assert s["units_with_findings"] == len(in_first) and s["groups_in_several_files"] == 0


def test_a_trace_without_meta_json_says_so(root, tmp_path, capsys):
    """No manifest: the defaults apply, and the report says so (the simulator's retention
    setting then makes every group diverge, which would otherwise look like a core bug)."""
    bare = tmp_path / "bare"
    shutil.copytree(simulated(root), bare)
    (bare / "meta.json").unlink()
    assert replay_cli.main(["replay", str(bare), "--engine", "plain", "--out", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert "no meta.json beside the trace: replayed with the defaults" in out
    assert replay_cli.main(["replay", str(simulated(root)), "--engine", "plain", "--out", str(tmp_path / "r2")]) == 0
    assert "no meta.json" not in capsys.readouterr().out


def test_empty_jsonl_files_hold_no_records(root, tmp_path):
    dst = tmp_path / "with-empty"
    shutil.copytree(simulated(root, "jsonl"), dst)
    (dst / "empty.jsonl").write_text("")
    (dst / "blank.jsonl").write_text("\n\n")
    for processes in (1, 2):
        s = plain_replay(str(dst), str(tmp_path / f"r{processes}"), processes=processes)
        assert s["units"] == GROUPS and s["units_with_findings"] == 0


def test_a_trace_mixing_formats_is_refused(root, tmp_path):
    mixed = tmp_path / "mixed"
    shutil.copytree(simulated(root), mixed)
    shutil.copy(sorted(simulated(root, "jsonl").glob("part-*.jsonl"))[0], mixed / "extra.jsonl")
    with pytest.raises(trace_io.TraceError, match="mixes JSON Lines and Parquet"):
        plain_replay(str(mixed), str(tmp_path / "r"))


def test_an_instance_recording_read_as_group_scoped_is_a_contract_finding(tmp_path):
    """A shared coordinator's recording has group-less records (its LoadPartition first);
    replayed under the group scope, that record is the finding: the inputs break the
    contract of a group stream, whatever its seq."""
    path = shared_recording(tmp_path)
    assert trace_io.read_manifest(path)["scope"] == "instance"
    results = stream.replay_records(trace_io.read_records(path), scope=records.GROUP)
    found = [r.finding for r in results if r.finding]
    assert found and all(f.group_id is not None or f.kind == "contract" for f in found)
    groupless = [f for f in found if f.group_id is None]
    assert groupless and groupless[0].kind == "contract" and "replay it with scope 'instance'" in groupless[0].detail


def test_the_report_never_replaces_what_is_not_a_report(root, tmp_path, capsys):
    src = tmp_path / "trace"
    shutil.copytree(simulated(root), src)
    before = sorted(p.name for p in src.iterdir())
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    for out, message in ((src / "report", "inside the trace"), (tmp_path, "the trace .* is inside it"),
                         (other, "is not a replay report"), (src / "meta.json", "inside the trace")):
        with pytest.raises(trace_io.TraceError, match=message):
            plain_replay(str(src), str(out))
    assert sorted(p.name for p in src.iterdir()) == before and (other / "keep.txt").read_text() == "mine"
    assert replay_cli.main(["replay", str(src), "--engine", "plain", "--out", str(other)]) == 2
    assert "is not a replay report" in capsys.readouterr().err
    # an earlier report is replaced
    report = tmp_path / "report"
    for _ in range(2):
        assert plain_replay(str(src), str(report))["units_with_findings"] == 0
    assert sorted(p.name for p in report.iterdir()) == sorted(replay_report.REPORT_FILES)


def test_the_text_report_shows_long_values_around_their_difference():
    expected = '{"members":[' + ",".join(f'"m{i}"' for i in range(200)) + "]}"
    actual = expected.replace('"m150"', '"m999"')
    e, a = replay_report._around_difference(expected, actual)
    assert e != a and '"m150"' in e and '"m999"' in a and e.startswith("...") and len(e) <= 406
    assert replay_report._around_difference("short", "other") == ("short", "other")
    assert replay_report._around_difference(None, "x" * 500) == (None, "x" * 400 + "...")


def test_a_bad_line_is_placed_by_what_it_says():
    place = trace_io._placement
    # a shared coordinator's record (no group) keeps its partition and its place in it
    assert place('{"v":1,"group_id":null,"partition":3,"seq":7,"type":5}') == (None, 3, 7)
    assert place('{"v":1,"group_id":"g","partition":3,"seq":"7"}') == ("g", 3, -1)
    assert place('{"v":1,"group_id":"g","partition":3,"seq":7,"ts_ms":1,"dir":"in","type":"Heartbe') == ("g", None, 7)
    assert place('{"v":1,"group_id":null,"seq":7,"data":{"group_id":"g"') == (None, None, -1)
    assert place('{"v":1,"group_id":5,"seq":7}') == (None, None, -1) and place("[1]") == (None, None, -1)
