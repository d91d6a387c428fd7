"""Helpers shared by the replay tests."""

from pathlib import Path

from groupcoord.adapters.protocol.translate import request_event
from groupcoord.adapters.runtime.driver import Driver
from groupcoord.adapters.traces import trace_files as trace_io
from groupcoord.core.config import CoordinatorConfig


def shared_recording(tmp_path) -> Path:
    """A shared coordinator's recording (trace.Recorder, as the server's --trace), with a crash."""
    cfg = CoordinatorConfig(offsets_topic_num_partitions=3)
    out = tmp_path / "shared"
    rec = trace_io.InstanceRecorder(out, "broker-0.jsonl", config=cfg)
    driver = Driver(cfg, observer=rec)
    for g in ("a", "b"):
        for m in range(2):
            body = {"group_id": g, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, "member_id": "",
                    "group_instance_id": f"{g}{m}", "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}]}
            driver.dispatch(request_event("JoinGroup", 9, body, request_id=f"j{g}{m}", now_ms=driver.now_ms,
                                          new_member_uuid=driver.new_uuid()))
    for _ in range(8):  # the initial delay fires, extends, then completes the join phase
        driver.advance(2000)
    for g in ("a", "b"):
        for m in range(2):
            r = driver.responses[f"j{g}{m}"]
            body = {"group_id": g, "generation_id": r.generation_id, "member_id": r.member_id,
                    "group_instance_id": f"{g}{m}",
                    "assignments": [{"member_id": x.member_id, "assignment": b"\x01"} for x in r.members]}
            driver.dispatch(request_event("SyncGroup", 5, body, request_id=f"s{g}{m}", now_ms=driver.now_ms))
    driver.advance(20_000)
    driver.reload()  # a crash: the new instance loads from storage
    driver.advance(40_000)
    rec.close()
    return out


def spread_over_files(src: Path, dst: Path, promise: bool) -> set[str]:
    """A copy of ``src`` with its rows dealt over two files in blocks of 7, so most groups
    have records in both; the manifest says ``groups_span_files`` = not ``promise``.
    Returns the groups that span both files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.concat_tables([pq.read_table(f) for f in sorted(src.glob("part-*.parquet"))])
    dst.mkdir()
    halves = [[i for i in range(table.num_rows) if (i // 7) % 2 == k] for k in (0, 1)]
    groups = []
    for k, rows in enumerate(halves):
        half = table.take(pa.array(rows, pa.int64()))
        pq.write_table(half, str(dst / f"part-{k:05d}.parquet"))
        groups.append(set(half.column("group_id").to_pylist()))
    meta = trace_io.read_manifest(src)
    trace_io.write_manifest(dst, scope=meta["scope"], outputs=meta["outputs"], config=meta["config"],
                            groups_span_files=not promise)
    return groups[0] & groups[1]
