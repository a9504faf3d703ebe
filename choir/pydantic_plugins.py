"""choird and choir-agent run pydantic without its plugins, and without its plugin loader.

pydantic looks for plugins each time it builds a validator: its loader scans every installed
distribution's entry points (30-45 ms, once), and imports `importlib.metadata` to do so — with
email, zipfile and csv, 10-25 ms of a start — at its own import, even when
`PYDANTIC_DISABLE_PLUGINS` tells it to load none. choir uses no pydantic plugin. `skip()` sets that
variable (an operator's own value wins) and, when it disables every plugin, puts in the loader's
place a module whose `get_plugins()` answers what pydantic's would then answer: none.
`tests/test_pydantic_plugins.py` checks that pydantic still asks the loader for that function
alone.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Final

VARIABLE: Final = "PYDANTIC_DISABLE_PLUGINS"
EVERY_PLUGIN: Final = ("__all__", "1", "true")
"""The values with which pydantic's own loader returns no plugin without looking."""
LOADER: Final = "pydantic.plugin._loader"


def skip() -> None:
    """No pydantic plugin for this process; call before pydantic builds its first validator."""
    os.environ.setdefault(VARIABLE, "__all__")
    if os.environ[VARIABLE] in EVERY_PLUGIN:
        sys.modules.setdefault(LOADER, _loader_of_no_plugins())


def _loader_of_no_plugins() -> ModuleType:
    loader = ModuleType(LOADER, "pydantic's plugin loader, every plugin disabled (choir)")
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    return loader


def _no_plugins() -> tuple[()]:
    return ()
