"""The plugin is declared where pytest finds it: entry point group ``pytest11`` (active once
groupcoord is installed), pointing at the module with the fixtures."""

from __future__ import annotations

import tomllib

import pytest
from paths import ROOT
from plugin_runner import PLUGIN, installed_entry_points


def test_pyproject_declares_the_pytest11_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"groupcoord": PLUGIN}
    plugin = pytest.importorskip(PLUGIN)
    for name in ("groupcoord_server", "groupcoord_server_factory", "groupcoord_manual_server", "pytest_addoption"):
        assert callable(getattr(plugin, name)), name


def test_the_installed_package_registers_it():
    declared = installed_entry_points()
    if not declared:
        pytest.skip("the installed groupcoord predates its pytest11 entry point: reinstall it (pip install -e .)")
    assert declared == {"groupcoord": PLUGIN}


def test_loading_the_plugin_imports_no_server():
    # Every pytest run loads it once installed: the servers come only with a fixture.
    import subprocess
    import sys

    code = f"import sys, {PLUGIN}; print(sorted(m for m in sys.modules if m.startswith('groupcoord.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "groupcoord.adapters.wire.server" not in out and PLUGIN in out
