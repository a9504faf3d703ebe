"""Which tools an agent's model may be offered, and why not: the same rules on both sides.

choir-agent withholds a tool from the model by them (`choir.agent.integrations`); choird shows
the operator the same answer in `agent status`, from the config and secrets it serves. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

WEB_SEARCH: Final = "choir.web.search"
INTEGRATION_TOOLS: Final = frozenset({WEB_SEARCH})
"""Tools that reach an outside service with the session's secrets (choir-agent runs them as lane
hooks); withheld while their service is not configured."""
NOT_IN_THIS_VERSION: Final = frozenset(
    {
        "choir.email.send",
        "choir.email.receive",
        "choir.email.check",
        "choir.notion.query",
        "choir.tts.speak",
        # host tools choird does not serve yet (the browser worker)
        "choir.web.browse",
    }
)
"""Seed manifests without an implementation yet, in choir-agent or in choird: never offered to a
lane (`open_kernel`'s `unavailable`), so no model is shown a tool that cannot run; a call by name
anyway answers `not_implemented` (built-ins) or `unknown_host_tool` (host tools)."""
NOT_BUILT: Final = "not in this version of choir"
BRAVE_ENDPOINT: Final = "https://api.search.brave.com/res/v1"
"""Brave Search API's base URL; `search.<name>.endpoint` overrides it."""


@dataclass(frozen=True, slots=True)
class SearchProvider:
    """Where searches go: one `search` entry of config.json."""

    name: str
    endpoint: str
    secret: str


def search_provider(search: Any) -> SearchProvider | None:
    """The provider among config's `search` entries (as JSON): the first by name, or None."""
    if not isinstance(search, Mapping):
        return None
    for name in sorted(search):
        entry = search[name]
        if not isinstance(entry, Mapping) or entry.get("provider", "brave") != "brave":
            continue
        secret = entry.get("secret")
        if isinstance(secret, str) and secret:
            endpoint = entry.get("endpoint") or BRAVE_ENDPOINT
            return SearchProvider(str(name), str(endpoint).rstrip("/"), secret)
    return None


def withheld_tools(search: Any, secret_names: frozenset[str]) -> dict[str, str]:
    """Each integration tool that cannot run with config's `search` entries (as JSON) and the
    secrets named `secret_names`, with why."""
    provider = search_provider(search)
    if provider is None:
        reason = (
            "no web search provider is configured: add search.<name> "
            '({"provider": "brave", "secret": "<secret>"}) to config.json'
        )
    elif provider.secret not in secret_names:
        reason = (
            f"search.{provider.name}'s secret {provider.secret!r} is not set: "
            f"choirctl secret set {provider.secret}"
        )
    else:
        return {}
    return {WEB_SEARCH: reason}


def unavailable_tools(search: Any, secret_names: frozenset[str]) -> dict[str, str]:
    """Every seed tool the model is not offered now, with why (for the operator)."""
    return {
        **dict.fromkeys(sorted(NOT_IN_THIS_VERSION), NOT_BUILT),
        **withheld_tools(search, secret_names),
    }
