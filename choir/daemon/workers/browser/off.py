"""`choir.web.browse` while `browser.enabled` is false, the default: withheld from models with
the reason, a call answered `service_unavailable`.

Apart from the worker so that such a choird never imports Chromium's supervision, the egress
proxy or the browse rules (turning the browser on takes a choird restart anyway).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from choir.daemon.agents.host_tools import HostToolCall, HostTools
from choir.protocol import ToolResult

TOOL: Final = "choir.web.browse"
UNAVAILABLE: Final = "service_unavailable"
OFF: Final = (
    "the browser worker is not running: set browser.enabled to true in config.json "
    "and restart choird (choir restart)"
)
"""Why the tool is withheld while the worker is off."""


def register_off(host_tools: HostTools) -> Callable[[], None]:
    """Serve the tool as off; returns the unregister callable."""

    async def browse(call: HostToolCall) -> ToolResult:
        return ToolResult.fail(UNAVAILABLE, f"{TOOL}: {OFF}")

    return host_tools.register(TOOL, browse, available=lambda: OFF)
