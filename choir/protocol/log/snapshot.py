"""The snapshot choird keeps to bound replay on recovery (§11.3, §13.1, §13.4).

A snapshot at rev N plus the events after N restore a session without any event at or before N:
besides the spec's §13.4 fields it carries what recovery would otherwise read from older events —
each lane's unfolded window events, the budgets used, the intents without a result, the calls of
each lane's last model output still unanswered, the open approvals and edge's unanswered message.

Per lane rather than the spec's two fixed slots (`reference_summary_edge/core`): several core
jobs may run at once, each lane `core:<job-name>` with its own summary and window.

`digest` seals the content: it is the SHA-256 of the canonical JSON of every other field, so a
snapshot altered at rest is recognised and never used (choird then replays from rev 1).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from pydantic import Field

from choir.protocol.base import WireModel
from choir.protocol.log.chain import canonical_json
from choir.protocol.log.core_jobs import CoreJobStart
from choir.protocol.log.events import Event, ToolCall
from choir.protocol.log.lanes import JobName, LaneId, LaneStatus
from choir.protocol.names import SkillName, StateName
from choir.protocol.scalars import Sha256Hex, UtcTimestamp
from choir.protocol.tooling.locks import HeldLock
from choir.protocol.tooling.memory import ReferenceSummary

_UNSEALED: Final = frozenset({"digest"})


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
    start: CoreJobStart | None = None
    """The briefing it started from: what a resume re-creates it with."""
    started_rev: int | None = Field(default=None, ge=1)
    """The rev of its `CoreStarted`: its working memory begins after it."""


class JobUsage(WireModel):
    """What one running core job has used (§7.6)."""

    started_at: UtcTimestamp
    """Commit time of its `CoreStarted`; its wall time runs from there."""
    steps: int = Field(default=0, ge=0)
    tool_calls: int = Field(default=0, ge=0)
    injections: int = Field(default=0, ge=0)
    time_budget_ms: int | None = Field(default=None, ge=1)
    """Edge's own wall-time budget for the job, when it gave one."""


class BudgetUsage(WireModel):
    """The session's budget counters as its committed events account for them (§7.6)."""

    core_jobs: int = Field(default=0, ge=0)
    """Core jobs started this session."""
    tool_calls: int = Field(default=0, ge=0)
    """Tool calls of every lane whose intent was committed."""
    tokens: int = Field(default=0, ge=0)
    """LLM tokens of every committed model output."""
    jobs: dict[JobName, JobUsage] = Field(default_factory=dict)
    """Running core jobs by name."""


class WindowRecord(WireModel):
    """A committed event still in a lane's window (it may predate the snapshot)."""

    rev: int = Field(ge=1)
    lane: LaneId
    """The lane that committed it."""
    hash: Sha256Hex
    """Its chain hash (prompts show a prefix as a reference)."""
    event: Event
    """The event."""


class OpenIntent(WireModel):
    """A committed intent (`ToolCallCommitted`) with no result yet."""

    rev: int = Field(ge=1)
    lane: LaneId
    call_id: str
    tool: str
    idempotent: bool
    """Idempotent calls may run again after a crash; the others wait for the operator."""


class Snapshot(WireModel):
    """Runtime state at revision `rev`; replaying the events after it restores the session."""

    rev: int = Field(ge=0)
    """Last revision folded into this state."""
    hash: Sha256Hex
    """Chain hash at `rev` (GENESIS_HASH at rev 0): where the next commit links."""
    ts: UtcTimestamp | None = None
    """Commit time of `rev` (None at rev 0): core jobs' wall time is measured in commit time."""
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
    windows: dict[LaneId, list[WindowRecord]] = Field(default_factory=dict)
    """Each lane's unfolded window events, oldest first."""
    latest_user: WindowRecord | None = None
    """Edge's latest user message: shown in full even once folded (§11.3)."""
    budgets: BudgetUsage = Field(default_factory=BudgetUsage)
    """The budget counters, as the events up to `rev` account for them."""
    open_intents: list[OpenIntent] = Field(default_factory=list)
    """Intents without a result, oldest first: unknown outcomes if the agent crashes."""
    unanswered_calls: dict[LaneId, list[ToolCall]] = Field(default_factory=dict)
    """Per lane, the calls of its last model output that have no committed result."""
    open_approvals: dict[str, LaneId] = Field(default_factory=dict)
    """Approval id -> the lane whose proposal waits for it (§8.10)."""
    awaiting_reply: str | None = None
    """The message id of edge's latest user message, while no reply to it was committed."""
    locks_held: dict[LaneId, list[HeldLock]] = Field(default_factory=dict)
    """Locks held at the snapshot, for the operator; a restart releases them (their holders
    died with the process)."""
    digest: Sha256Hex | None = None
    """`content_digest()` of the snapshot when it was taken; None only in unsealed documents."""

    def content_digest(self) -> str:
        """SHA-256 of the canonical JSON of every field but `digest`."""
        content = self.model_dump(mode="json", exclude=set(_UNSEALED))
        return hashlib.sha256(canonical_json(content)).hexdigest()

    def sealed(self) -> Snapshot:
        """This snapshot with its `digest` set."""
        return self.model_copy(update={"digest": self.content_digest()})

    def content_problem(self) -> str | None:
        """Why the content cannot be trusted (no digest, or one that does not match); None if
        it can."""
        if self.digest is None:
            return "it carries no digest"
        if self.digest != self.content_digest():
            return "its content does not match its digest"
        return None
