"""The working-memory snapshot choird keeps to bound replay on recovery (§11.3, §13.4).

Per lane rather than the spec's two fixed slots (`reference_summary_edge/core`): several core
jobs may run at once, each lane `core:<job-name>` with its own summary and window.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from choir.protocol.base import WireModel
from choir.protocol.lanes import JobName, LaneId, LaneStatus
from choir.protocol.memory import ReferenceSummary
from choir.protocol.names import SkillName, StateName
from choir.protocol.scalars import Sha256Hex


class SkillProgress(WireModel):
    """Where a lane's active skill stands."""

    skill: SkillName
    """The active skill."""
    state: StateName
    """The current node."""
    steps_taken: int = Field(default=0, ge=0)
    """LLM steps taken, against max_steps."""
    retries_left: int = Field(ge=0)
    """Corrections left for the current step."""
    context: dict[str, Any] = Field(default_factory=dict)
    """Structured step-local context (§10.2)."""


class LaneState(WireModel):
    status: LaneStatus
    """The lane's state-machine state."""
    budgets_remaining: dict[str, int] = Field(default_factory=dict)
    """Remaining budget per counter, e.g. `max_tool_calls_per_session` (§7.6)."""


class OpenJob(WireModel):
    """A core job that was running at the snapshot."""

    job_name: JobName
    """The job's name."""
    job_id: str
    """The job's id."""
    status: LaneStatus
    """Its state-machine state."""
    steps_taken: int = Field(default=0, ge=0)
    """LLM steps taken."""
    tool_in_flight: str | None = None
    """call_id of the tool call running at the snapshot, if any."""


class Snapshot(WireModel):
    """Runtime state at revision `rev`; replaying the events after it restores the session."""

    rev: int = Field(ge=0)
    """Last revision folded into this state."""
    hash: Sha256Hex
    """Chain hash at `rev` (GENESIS_HASH at rev 0): where the next commit links."""
    reference_summaries: dict[LaneId, ReferenceSummary] = Field(default_factory=dict)
    """Each lane's reference summary (§11.3)."""
    event_window_boundary: dict[LaneId, int] = Field(default_factory=dict)
    """Per lane, the rev of the oldest event still in its event window."""
    skill_state: dict[LaneId, SkillProgress] = Field(default_factory=dict)
    """Each lane's active skill, if any."""
    lane_state: dict[LaneId, LaneState] = Field(default_factory=dict)
    """Each lane's state and budgets."""
    open_jobs: list[OpenJob] = Field(default_factory=list)
    """Core jobs running at the snapshot."""
