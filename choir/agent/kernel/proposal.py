"""What a lane submits to the arbiter: one `ToolProposal` per tool call.

Its own module because every part of the kernel speaks it (the arbiter takes it, dispatch runs
it, records commit it) and none of them should import another for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolProposal:
    """A lane's request to run one tool call."""

    lane: str
    """`edge` or `core:<job-name>`: the proposer and lock owner."""
    call_id: str
    """The invocation id; unique within the session."""
    tool: str
    """Canonical tool name."""
    arguments: dict[str, Any] = field(default_factory=dict)


__all__ = ["ToolProposal"]
