"""The named resources a session is bound to (§6.4, §23.1 `sessions.resource_bindings`)."""

from __future__ import annotations

from typing import Literal

from choir.protocol.base import WireModel

SecretResource = Literal["llm", "voice_profile", "git_identity", "notion", "email", "search"]
"""A kind of bound resource whose secret a tool may use (§14.3 "secret access scoped per tool").

Names the *kind*, never the secret: `notion` means "the Notion integration this session is bound
to", resolved at run time to that integration's secret. `search` is the shared search provider.
"""


class ResourceBindings(WireModel):
    """Which named resource from config.json this session uses for each role.

    Resolved by choird at agent start from the agent's defaults and start-time overrides;
    exclusive ones (workspace, git identity, notion, exclusive email, DM) are leased.
    """

    workspace: str
    """Named workspace mounted at /workspace."""
    llm: str
    """Named LLM model."""
    voice_profile: str | None = None
    """Named voice profile for choir.tts.speak; None disables TTS."""
    git_identity: str | None = None
    """Named git identity (user.name, user.email, credentials)."""
    notion: str | None = None
    """Named Notion integration."""
    email: str | None = None
    """Named email account."""
    dm: str
    """Named DM the agent talks to."""
