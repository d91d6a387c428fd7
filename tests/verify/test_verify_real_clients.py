"""No false alarms: real consumers (kafka-python, confluent-kafka, aiokafka, each in its own
process) form groups on ``groupcoord serve`` through ``groupcoord record``; they join, commit,
read their offsets, one is killed with SIGKILL and its session runs out, one is paused (SIGSTOP)
past its session and resumes, static members join, and the rest leave. ``groupcoord verify`` finds every group of the recording conforming."""

from __future__ import annotations

import json
import os
import signal

import pytest
from observe_harness import RecorderProcess
from server_harness import ServerProcess, Worker, balanced, wait_until

from groupcoord.adapters.cli.main import main

PHASE_S = 60
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500}
CLIENTS = ("kafka-python", "confluent", "aiokafka")


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    out = tmp_path_factory.mktemp("recording")
    server = ServerProcess(topics=("t6=6",), settings=SETTINGS)
    recorder = RecorderProcess(server.bootstrap, out)
    workers: list[Worker] = []
    try:
        for client in CLIENTS:
            _lifecycle(workers, client, recorder.bootstrap)
        _static(workers, CLIENTS[0], recorder.bootstrap)
        _paused(workers, CLIENTS[0], recorder.bootstrap)
    finally:
        for w in workers:
            w.stop()
        assert recorder.stop() == 143, recorder.log()
        assert server.stop() == 143, server.log_text()
    return out


def _start(workers, *args, **kwargs) -> Worker:
    w = Worker(*args, **kwargs)
    workers.append(w)
    return w


def _lifecycle(workers, client: str, bootstrap: str) -> None:
    group = f"verify-{client}"
    a, b = (_start(workers, client, bootstrap, group, client_id=f"{client}-{i}") for i in range(2))
    wait_until(lambda: balanced([a, b]), PHASE_S, f"{group} balanced")
    a.send(cmd="commit", offsets={str(p): 10 + p for p in a.assignment})
    a.wait_event("committed", 30)
    a.send(cmd="committed", partitions=a.assignment)
    a.wait_event("committed_offsets", 30)
    b.proc.kill()  # SIGKILL: no LeaveGroup; its session (3 s) runs out on the server
    wait_until(lambda: a.assignment is not None and len(a.assignment) == 6, PHASE_S, f"{group}: the survivor takes all")
    a.close()


def _static(workers, client: str, bootstrap: str) -> None:
    group = f"verify-static-{client}"
    ws = [_start(workers, client, bootstrap, group, client_id=f"s{i}", instance_id=f"instance-{i}") for i in range(2)]
    wait_until(lambda: balanced(ws), PHASE_S, f"{group} balanced")
    for w in ws:
        w.close()


def _paused(workers, client: str, bootstrap: str) -> None:
    """A consumer stopped past its session (a long GC pause, a laptop lid): expired, it rejoins."""
    group = f"verify-paused-{client}"
    a, b = (_start(workers, client, bootstrap, group, client_id=f"p{i}") for i in range(2))
    wait_until(lambda: balanced([a, b]), PHASE_S, f"{group} balanced")
    os.kill(b.proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: a.assignment is not None and len(a.assignment) == 6, PHASE_S,
                   f"{group}: the other takes all while one is stopped")
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    wait_until(lambda: balanced([a, b]), PHASE_S, f"{group}: balanced again after the pause")
    for w in (a, b):
        w.close()


def test_every_group_of_real_clients_conforms(recording, tmp_path, capsys):
    args = ["verify", str(recording), "--out", str(tmp_path / "report")]
    for k, v in SETTINGS.items():
        args += [f"--{k}", str(v)]
    code = main(args)
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert code == 0, out
    assert summary["groups"] == len(CLIENTS) + 2 and summary["conforms"] == summary["groups"], out
    assert summary["pairs_checked"] > 20 * summary["groups"]
