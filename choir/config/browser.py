"""config.json `browser`: choird's browser worker (§18.2), which serves `choir.web.browse`.

Off by default: Chromium costs a few hundred MB and a second of CPU to start, and an operator
who wants agents to browse says so. The browser contexts themselves are not configured (§18.2
point 4): each running agent gets one, made and destroyed by the worker. Read at choird start
(a change waits for a choird restart).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from choir.config.base import ConfigModel


class BrowserConfig(ConfigModel):
    """The host-side browser worker: one headless Chromium, one isolated context per agent."""

    enabled: bool = False
    """Run the worker: Chromium starts with choird, and `choir.web.browse` is offered to agents.
    Off (the default): the tool is withheld, and `agent status` says why."""
    executable: Annotated[str, Field(min_length=1)] = "/usr/bin/chromium"
    """The Chromium binary Playwright drives (Debian's `chromium` package)."""
    page_timeout_ms: Annotated[int, Field(ge=500, le=50_000)] = 15_000
    """How long one page load or element action may take before the call answers an error;
    below the tool's own 60 s timeout, so the agent hears why rather than a bare timeout."""
    allow_private_networks: bool = False
    """Let pages load from loopback, private and link-local addresses (this host's services,
    the LAN, cloud metadata). Off by default: the browser runs on the host, outside the agent's
    container and its egress filter, so it must not become the agent's way around it."""
    max_tabs: Annotated[int, Field(ge=1, le=50)] = 8
    """Tabs one agent may have open at once."""
