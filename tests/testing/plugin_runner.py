"""How the plugin's tests load it in the pytest runs they start (pytester)."""

from __future__ import annotations

import importlib.metadata

PLUGIN = "groupcoord.testing.plugin"


def plugin_args() -> list[str]:
    """``-p`` for the plugin, unless the installed metadata already registers it (pytest11):
    loading it twice under two names is an error."""
    installed = any(ep.value == PLUGIN for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", PLUGIN]
