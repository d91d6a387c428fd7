"""A client's documentation example run as it is written: the code in a file of its own, run by
the venv's Python in a subprocess (tests/wire/test_delivery_*.py). A consumer example loops
forever, as documented: the test reads what it prints and stops it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from server_harness import wait_until


class Example:
    """One example script, started at once; ``lines`` is what it printed so far."""

    def __init__(self, code: str, path: Path) -> None:
        path.write_text(code)
        self.path = path
        self.proc = subprocess.Popen([sys.executable, str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def printed(self, text: str) -> int:
        """How many lines printed so far contain ``text``."""
        with self._lock:
            return sum(text in line for line in self.lines)

    def output(self) -> str:
        with self._lock:
            return "\n".join(self.lines[-30:])

    def finish(self, timeout: float = 60) -> str:
        """Waits for a script that ends by itself; its output (raises if it failed)."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"{self.path.name} did not end within {timeout}s:\n{self.output()}") from None
        self._reader.join(10)  # the rest of its output (its stdout is closed: this ends at once)
        assert code == 0, f"{self.path.name} exited {code}:\n{self.output()}"
        return self.output()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def group_stable(bootstrap: str, group: str) -> bool:
    """Whether the group is Stable (DescribeGroups, through confluent-kafka's admin client)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_consumer_groups([group], request_timeout=10).values()
    try:
        description = future.result(timeout=15)
    except Exception:
        return False
    return description.state.name == "STABLE" and len(description.members) > 0


def consume_what_is_produced(consumer: Example, produce, bootstrap: str, group: str, done, timeout: float = 60,
                             attempts: int = 3) -> None:
    """A consumer example that starts from the end of the log (``auto.offset.reset`` latest, the
    clients' default) sees only what is produced after it has a position: once its group is
    Stable, ``produce()`` runs the producer example; if ``done()`` is not true within a while
    (the position was taken after the first records), the producer runs again (``attempts`` in
    all)."""
    wait_until(lambda: consumer.proc.poll() is None and group_stable(bootstrap, group), timeout,
               lambda: f"the example consumer's group to be Stable:\n{consumer.output()}", interval=0.2)
    for attempt in range(attempts):
        produce()
        try:
            wait_until(done, timeout / attempts, "the example consumer to print the records", interval=0.05)
            return
        except AssertionError:
            if attempt == attempts - 1:
                raise AssertionError(f"the example consumer did not print the records:\n{consumer.output()}") from None
