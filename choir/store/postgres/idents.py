"""SQL identifiers for per-agent schemas and roles.

asyncpg binds values, never identifiers, so schema and role names are spliced into SQL text.
Agent ids are validated upstream, but they may contain `-`, which only a quoted identifier
allows — so every spliced name goes through `quote_ident`, and the agent id is checked again
here because a malformed id must never reach SQL text.
"""

from __future__ import annotations

import re
from typing import Final

AGENT_ID_PATTERN: Final = r"^[a-z][a-z0-9_-]{0,30}$"
AGENT_PREFIX: Final = "choir_"
"""Prefix of every agent's schema and role (§23.0: `choir_<agent_id>`)."""

_AGENT_ID_RE: Final = re.compile(AGENT_ID_PATTERN)


def quote_ident(name: str) -> str:
    """`name` as a PostgreSQL quoted identifier: wrapped in `"`, inner `"` doubled."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid SQL identifier {name!r}")
    return '"' + name.replace('"', '""') + '"'


def agent_schema(agent_id: str) -> str:
    """The (unquoted) name of `agent_id`'s schema, which is also the name of its role."""
    if not _AGENT_ID_RE.match(agent_id):
        raise ValueError(f"invalid agent id {agent_id!r}: it must match {AGENT_ID_PATTERN}")
    return AGENT_PREFIX + agent_id


def agent_role(agent_id: str) -> str:
    """The (unquoted) name of the NOLOGIN role that agent-initiated queries run as."""
    return agent_schema(agent_id)
