"""Where a knowledge item came from (issue 15, provenance), with no I/O.

    Provenance(agent="ada", session_id="s-1", rev=41, call_id="call_7",
               tool="choir.memory.upsert", user="ops")      # the agent's tool call wrote it
    Provenance(by="choirctl")                               # the operator, from choirctl

An agent's write records its session, the session's committed revision when the call ran (the
call's own events come right after it: the agent commits them as the call runs, choird stores
them at the next heartbeat), the tool call's id and the session's DM (the user it talks to).
An operator's write records the front end instead (`choirctl`, `console`, a DM name). Stored as
JSON beside the item and each version; an item written before provenance was kept has none and
is shown as "source unknown".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final

UNKNOWN: Final = "source unknown"
"""What an item written before provenance was recorded says."""


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who wrote an item's content: an agent's tool call in a session, or an operator."""

    agent: str | None = None
    """The agent whose session wrote it (None: an operator)."""
    session_id: str | None = None
    rev: int | None = None
    """The session's committed revision when the call ran; the call's events follow it."""
    call_id: str | None = None
    """The model's tool call id (`tool_call_requested.call_id` in the event log)."""
    tool: str | None = None
    user: str | None = None
    """The session's DM (config.json `dms` key): the user the agent was talking to."""
    by: str | None = None
    """The operator front end that wrote it (`choirctl`, `console`, a DM name)."""

    def as_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @property
    def from_session(self) -> bool:
        return self.session_id is not None

    def describe(self) -> str:
        """One line for a human: `agent ada, session s-1 (tool call call_7 after rev 41)`."""
        if not self.from_session:
            return f"operator via {self.by}" if self.by else UNKNOWN
        parts = [f"agent {self.agent}, session {self.session_id}"]
        if self.user:
            parts.append(f"with user {self.user}")
        if self.call_id:
            parts.append(f"tool call {self.call_id} after rev {self.rev}")
        return ", ".join(parts)


def provenance_of(stored: dict[str, Any] | None) -> Provenance | None:
    """The stored JSON as a `Provenance`; None for an item written before it was recorded.
    Keys this choir does not know (written by a newer one) are left out."""
    if not stored:
        return None
    known = set(Provenance.__dataclass_fields__)
    return Provenance(**{key: value for key, value in stored.items() if key in known})


def operator(by: str) -> Provenance:
    """The provenance of an operator's write from front end `by`."""
    return Provenance(by=by)
