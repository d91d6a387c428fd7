"""``groupcoord --version`` says the installed package's version (its metadata, from
pyproject.toml; ``groupcoord`` itself is a namespace package, without a module to hold a
``__version__``); the licence pyproject.toml names is in the checkout."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib

from paths import ROOT


def test_the_version_is_the_package_metadata():
    version = importlib.metadata.version("groupcoord")
    assert version == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    out = subprocess.run([sys.executable, "-c", "from groupcoord.adapters.cli.main import main; main()", "--version"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == f"groupcoord {version}\n", out


def test_the_licence_is_the_one_pyproject_names():
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "Copyright 2026 the groupcoord authors" in text
