"""``groupcoord record --pcap``: a packet capture of real consumers put back into request/response
pairs (dpkt reads the packets; connections are reassembled by sequence number), the same trace
the proxy writes, which ``verify`` then checks."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess

import dpkt
import pytest
from paths import TESTS
from server_harness import ServerProcess, Worker, balanced, wait_until

from groupcoord.adapters.cli.main import main
from groupcoord.adapters.observe.pcap import CaptureReader
from groupcoord.adapters.observe.trace import read_observed

DATA = TESTS / "observe" / "data"
CAPTURE = DATA / "kafka-python-group.pcap"  # two kafka-python consumers on groupcoord serve, tcpdump -i lo
PORT = 42365
SETTINGS = ["--group.initial.rebalance.delay.ms", "0", "--group.min.session.timeout.ms", "500"]


def test_the_committed_capture_becomes_pairs_that_conform(tmp_path, capsys):
    assert main(["record", "--pcap", str(CAPTURE), "--port", str(PORT), "--out", str(tmp_path / "rec")]) == 0
    records = read_observed(tmp_path / "rec")
    apis = {r["api"] for r in records}
    assert {"FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup"} <= apis
    assert all(r["send_us"] is not None and r["recv_us"] <= r["send_us"] for r in records)
    assert [r["response"]["error_code"] for r in records if r["api"] == "JoinGroup"].count(79) == 2
    assert main(["verify", str(tmp_path / "rec"), *SETTINGS]) == 0
    assert "1 groups: 1 conform" in capsys.readouterr().out


def _resegmented(src, dst) -> None:
    """Each TCP payload split in two, sent second half first, then the first half twice
    (a retransmission): what reassembly must put back."""
    with open(src, "rb") as f, open(dst, "wb") as g:
        writer = dpkt.pcap.Writer(g, linktype=dpkt.pcap.DLT_EN10MB)
        for ts, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            tcp = eth.data.data
            data = bytes(tcp.data)
            if len(data) < 8:
                writer.writepkt(bytes(eth), ts)
                continue
            half = len(data) // 2
            for seq, part in ((tcp.seq + half, data[half:]), (tcp.seq, data[:half]), (tcp.seq, data[:half])):
                copy = dpkt.ethernet.Ethernet(bytes(eth))
                ip, seg = copy.data, copy.data.data
                seg.seq, seg.data, seg.sum = seq % (1 << 32), part, 0
                ip.len, ip.sum = len(ip), 0  # dpkt recomputes a zero checksum
                writer.writepkt(bytes(copy), ts)


def test_segments_out_of_order_and_retransmitted_are_put_back(tmp_path):
    _resegmented(CAPTURE, tmp_path / "shuffled.pcap")
    assert CaptureReader(tmp_path / "shuffled.pcap", PORT).records() == CaptureReader(CAPTURE, PORT).records()


def test_a_file_that_is_not_a_capture_is_one_line(tmp_path, capsys):
    (tmp_path / "x.pcap").write_bytes(b"not a capture at all")
    assert main(["record", "--pcap", str(tmp_path / "x.pcap"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a pcap or pcapng capture" in err[0]


def test_a_connection_whose_start_was_missed_is_counted_not_read(tmp_path):
    with open(CAPTURE, "rb") as f, open(tmp_path / "late.pcap", "wb") as g:
        writer = dpkt.pcap.Writer(g, linktype=dpkt.pcap.DLT_EN10MB)
        for n, (ts, buf) in enumerate(dpkt.pcap.Reader(f)):
            if n >= 40:  # the capture starts after the first connections opened
                writer.writepkt(buf, ts)
    reader = CaptureReader(tmp_path / "late.pcap", PORT)
    records = reader.records()
    assert any("missed its start" in p for p in reader.problems)
    assert len(records) < len(CaptureReader(CAPTURE, PORT).records())


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump is not installed (.ci/bootstrap installs it)")
def test_a_live_tcpdump_capture_of_real_consumers_conforms(tmp_path, capsys):
    server = ServerProcess(topics=("t6=6",), settings={"group.initial.rebalance.delay.ms": 0,
                                                        "group.min.session.timeout.ms": 500})
    pcap = tmp_path / "live.pcap"
    cap = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", str(pcap), f"tcp port {server.port}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    workers = []
    try:
        first = cap.stderr.readline()
        if "listening" not in first:
            pytest.skip(f"tcpdump cannot capture here: {first.strip()}")
        workers = [Worker("kafka-python", server.bootstrap, "live", client_id=f"kp-{i}") for i in range(2)]
        wait_until(lambda: balanced(workers), 60, "two consumers balanced")
        for w in workers:
            w.close()

        def left() -> bool:
            records = CaptureReader(pcap, server.port).records()
            return sum(1 for r in records if r["api"] == "LeaveGroup" and r["response"]) == 2

        wait_until(left, 30, "both LeaveGroups in the capture")
    finally:
        for w in workers:
            w.stop()
        cap.send_signal(signal.SIGINT)
        cap.wait(10)
        assert server.stop() == 143
    assert main(["record", "--pcap", str(pcap), "--port", str(server.port), "--out", str(tmp_path / "rec")]) == 0
    assert main(["verify", str(tmp_path / "rec"), *SETTINGS]) == 0, capsys.readouterr().out
    meta = json.loads((tmp_path / "rec" / "meta.json").read_text())
    assert meta["problems"] == [] and meta["connections"] >= 2
