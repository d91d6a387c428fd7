"""How the plugin's tests load it in the pytest runs they start (pytester, in a subprocess
whose working directory is a fresh temporary one)."""

from __future__ import annotations

import importlib.metadata
import os
import sys

from paths import ROOT

PLUGIN = "groupcoord.testing.plugin"


def installed_entry_points() -> dict[str, str]:
    """The ``pytest11`` entry points of groupcoord as installed, i.e. as a process started
    elsewhere sees them: metadata lying in the checkout (a build's egg-info, found when the
    checkout is on sys.path) is not an installation."""
    checkout = str(ROOT)
    paths = [p for p in sys.path if p and os.path.abspath(p) != checkout]
    return {ep.name: ep.value for dist in importlib.metadata.distributions(path=paths)
            if dist.metadata["Name"] == "groupcoord" for ep in dist.entry_points if ep.group == "pytest11"}


def plugin_args() -> list[str]:
    """``-p`` for the plugin, unless the installed metadata already registers it (pytest11):
    loading it twice under two names is an error."""
    return [] if PLUGIN in installed_entry_points().values() else ["-p", PLUGIN]
