"""The Spark session the jobs that read traces run in (the replay and ``verify``), and what it
prints: ``spark_session`` (the Python workers run this interpreter; Spark logs at WARN through
``LOG4J2_PROPERTIES`` unless verbose, also under spark-submit, whose JVM is already up) and
``StageProgress`` (a progress bar on stderr per long stage).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from groupcoord.adapters.traces.stopping import stop_behind

# Spark's own logging at WARN (spark_session, unless verbose): the driver JVM reads this
# log4j2 configuration from its start (Spark's default profile prints a banner and, under
# spark-submit, INFO lines); the Hadoop native-library notice is dropped.
LOG4J2_PROPERTIES = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n%ex
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = error
"""


def log4j2_file() -> str:
    """A file holding LOG4J2_PROPERTIES (one per user, rewritten when it differs)."""
    import tempfile

    path = Path(tempfile.gettempdir()) / f"groupcoord-log4j2-{os.getuid()}.properties"
    try:
        current = path.read_text()
    except OSError:
        current = None
    if current != LOG4J2_PROPERTIES:
        from groupcoord.adapters.traces.stopping import written

        with written(path) as tmp:
            tmp.write_text(LOG4J2_PROPERTIES)
    return str(path)


def _quiet_jvm(jvm) -> bool:
    """LOG4J2_PROPERTIES in a JVM already running (spark-submit's), before the SparkContext
    starts and logs its INFO lines. Spark reloads its default profile when a context starts
    if it loaded it before (spark-submit did): that flag is cleared and Spark's own logger
    context pointed at LOG4J2_PROPERTIES. Spark internals: False when they are not there
    (then ``spark.log.level`` does what it can, from just after the context's first lines)."""
    try:
        spark_logging = getattr(getattr(jvm.org.apache.spark.internal, "Logging$"), "MODULE$")
        getattr(spark_logging, "org$apache$spark$internal$Logging$$defaultSparkLog4jConfig_$eq")(False)
        context = jvm.org.apache.logging.log4j.LogManager.getContext(
            jvm.org.apache.spark.util.Utils.getSparkClassLoader(), False)
        context.setConfigLocation(jvm.java.net.URI.create(Path(log4j2_file()).as_uri()))
        return True
    except Exception:  # py4j's errors: another Spark
        return False


# A remote master is tried with a TCP connection this long before any session is made: an
# unreachable one is one line in seconds, not a minute of the JVM's retries and stack traces.
MASTER_REACH_TIMEOUT_S = 3.0

_MASTER_FORMS = "local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://HOST:PORT[,HOST:PORT...], " \
                "yarn, k8s://URL, mesos://HOST:PORT"


def master_problem(master: str | None, timeout_s: float = MASTER_REACH_TIMEOUT_S) -> str | None:
    """Why Spark master URL ``master`` cannot be used (malformed, or a remote master that takes
    no TCP connection within ``timeout_s``), or None. None (spark-submit's own) and ``yarn``
    are left to Spark. Checked before any session is created."""
    import re
    import socket

    if master is None or master in ("local", "yarn"):
        return None
    if re.fullmatch(r"local\[(\*|[1-9]\d*)(,[1-9]\d*)?\]", master) \
            or re.fullmatch(r"local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]", master):
        return None
    scheme, sep, rest = master.partition("://")
    if scheme == "k8s" and sep:
        scheme, sep, rest = rest.partition("://") if "://" in rest else ("https", "://", rest)
    addresses = []
    for part in rest.split(",") if sep and scheme in ("spark", "mesos", "https", "http") else []:
        host, colon, port = part.strip().rstrip("/").rpartition(":")
        host = host.strip("[]")
        if not colon or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            addresses = []
            break
        addresses.append((host, int(port)))
    if not addresses:
        return f"--master: expected a Spark master ({_MASTER_FORMS}), got {master!r}"
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return None  # one reachable master of a standby list is enough
        except OSError as e:
            why = f"no answer within {timeout_s:g} s" if isinstance(e, TimeoutError) else (e.strerror or str(e))
    return f"--master {master}: cannot reach the Spark master: {why}"


def spark_session(master: str | None = "local[*]", app: str = "groupcoord-replay", partitions: int | None = None,
                  extra: dict | None = None, verbose: bool = False):
    """A SparkSession set up for replay (the Python workers run this interpreter). ``master``
    None leaves it to spark-submit. Spark logs at WARN unless ``verbose`` (then as Spark's
    defaults say, with its console progress bar)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    extra = dict(extra or {})
    if not verbose:
        if os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit: its JVM is up already
            SparkContext._ensure_initialized()
            if not _quiet_jvm(SparkContext._jvm):
                extra.setdefault("spark.log.level", "WARN")
        else:  # the JVM starts with the session: it reads the configuration from the start
            extra.setdefault("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j2_file()}")
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    builder = (builder
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "true" if verbose else "false")
               .config("spark.sql.adaptive.coalescePartitions.enabled", "false")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
               .config("spark.python.worker.reuse", "true")
               .config("spark.driver.memory", os.environ.get("GROUPCOORD_SPARK_DRIVER_MEMORY", "4g")))
    if partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    for k, v in extra.items():
        builder = builder.config(k, v)
    held = threading.current_thread() is threading.main_thread()
    ctrl_c = signal.getsignal(signal.SIGINT) if held else None
    spark = builder.getOrCreate()
    if held and ctrl_c is not None:
        # pyspark takes Ctrl-C over (to cancel the jobs, re-entering py4j mid-call, which then
        # logs tracebacks): it stays the command's; stopped_after cancels them on the way out
        signal.signal(signal.SIGINT, ctrl_c)
    # a logger's filter sees only what is logged on it, not what its children pass up: py4j's own
    for name in ("", "py4j", "py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(name).addFilter(interrupt_not_news)
    if not verbose:
        spark.sparkContext.setLogLevel("WARN")
    return spark


def interrupt_not_news(record: logging.LogRecord) -> bool:
    """A logging filter: py4j logs, on the root logger, the ``KeyboardInterrupt`` that stops a
    command while it waits for the JVM; the command's one line says it already."""
    return stop_behind(record.exc_info[1] if record.exc_info else None) is None


@contextlib.contextmanager
def stopped_after(spark, wait_s: float = 15.0):
    """``spark`` stopped when the block ends. When a ``KeyboardInterrupt`` ends it (the command
    is being stopped: Ctrl-C, SIGTERM), its running jobs are cancelled without Spark's log of
    the tasks it kills, and the JVM this process started is ended and waited for (and
    forgotten: a later session starts its own), so that no task writes on and nothing Spark
    prints comes after the command's last line; a JVM spark-submit started is left to it."""
    try:
        yield spark
    except KeyboardInterrupt:
        _abandon(spark, wait_s)
        raise
    except BaseException:
        spark.stop()
        raise
    spark.stop()


def _abandon(spark, wait_s: float) -> None:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    # the connections py4j closes under a JVM being ended log their socket errors: not news
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    with contextlib.suppress(Exception):  # py4j's errors: the JVM already gone
        spark.sparkContext.setLogLevel("OFF")
        spark.sparkContext.cancelAllJobs()
    with contextlib.suppress(Exception):
        spark.stop()
    proc = getattr(gateway, "proc", None)  # None under spark-submit
    if proc is None:
        return
    with contextlib.suppress(Exception):
        gateway.shutdown()
    with contextlib.suppress(OSError):
        proc.stdin.close()  # the gateway JVM exits when its stdin closes
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    SparkContext._gateway = SparkContext._jvm = None


class StageProgress:
    """A progress bar (``progress.Progress``) for each Spark stage that runs longer than
    ``after`` seconds: ``spark stage 3, replaying TRACE: 5/8 tasks``, erased when it ends. Polls
    the status tracker from a daemon thread; use as a context manager. ``what`` names the work
    under way (set it between jobs); ``enabled`` as ``Progress``'s (None: the command's
    ``--progress``, else whether stderr is a terminal)."""

    def __init__(self, tracker, out=None, after: float = 2.0, poll: float = 0.5, clock=time.monotonic,
                 enabled: bool | None = None) -> None:
        self.tracker, self.out = tracker, out or sys.stderr
        self.after, self.poll, self.clock, self.enabled = after, poll, clock, enabled
        self.what = ""
        self._seen: dict[int, float] = {}  # stage -> first seen
        self._what: dict[int, str] = {}  # stage -> the work under way when it was first seen
        self._bars: dict = {}  # stage -> its Progress, once it has run `after` seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="groupcoord-spark-progress", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        self.check(final=True)

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.check()
            except Exception:  # the JVM going away at the end: nothing more to say
                return

    def check(self, final: bool = False) -> None:
        """One look at the running stages (the thread calls it every ``poll`` seconds)."""
        from groupcoord.adapters.traces.progress import Progress

        now = self.clock()
        active = set() if final else set(self.tracker.getActiveStageIds())
        for stage in sorted(active):
            info = self.tracker.getStageInfo(stage)
            if info is None:
                continue
            first = self._seen.setdefault(stage, now)
            what = self._what.setdefault(stage, self.what)
            bar = self._bars.get(stage)
            if bar is None and now - first >= self.after:
                bar = self._bars[stage] = Progress(f"spark stage {stage}{', ' + what if what else ''}",
                                                   total=info.numTasks, unit="tasks", enabled=self.enabled,
                                                   stream=self.out, after_s=0)
            if bar is not None:
                bar.advance_to(info.numCompletedTasks)
        for stage in [s for s in self._seen if s not in active]:
            self._seen.pop(stage)
            self._what.pop(stage, None)
            bar = self._bars.pop(stage, None)
            if bar is not None:
                bar.done()
