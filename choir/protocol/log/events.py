"""Authoritative events (§7.4): the facts the arbiter commits, one per committed revision.

Only the arbiter creates these; lanes only propose. §13.1's replication names map onto them:
LLM_CALL_COMMITTED is `ModelOutput`, TOOL_CALL_COMMITTED is `ToolCallCommitted`,
TOOL_RESULT_COMMITTED is `ToolResultCommitted`, SKILL_TRANSITION_COMMITTED is
`SkillTransitionCommitted`.

Beyond the spec: `AgentReplied` is what the agent says to its user — choird delivers it to the
bound DM as soon as it arrives (design notes, "Message flow"); `CoreEventEmitted` records a core
job's structured events; `ApprovalResolved` records an approval outcome; `SessionSummary` is the
summary of §11.8 shipped in the final heartbeat.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, TypeAdapter

from choir.protocol.base import WireModel
from choir.protocol.log.core_jobs import CoreEvent, CoreJobStart
from choir.protocol.log.lanes import JobName, LaneId
from choir.protocol.names import SkillName, StateName
from choir.protocol.tooling.locks import HeldLock
from choir.protocol.tooling.manifest import SideEffect
from choir.protocol.tooling.memory import MemoryDelta
from choir.protocol.tooling.tools import ToolResult


class UserMsg(WireModel):
    """A message from the user, as the edge lane drains it from its queue."""

    kind: Literal["user_msg"] = "user_msg"
    text: str
    """The message text."""
    attachments: list[str] = Field(default_factory=list)
    """Workspace paths of uploaded files, under `.choirtmp/recv/`."""
    message_id: str | None = None
    """The gateway's id of the message, for de-duplication."""


class ToolCall(WireModel):
    """One structured tool call a model proposed."""

    id: str
    """The model's call id; the matching tool message carries it as `tool_call_id`."""
    name: str
    """Canonical tool name (decoded from the wire name). May name an unknown tool: the arbiter
    answers such a call with an error result."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed JSON arguments as the model produced them."""


class Usage(WireModel):
    prompt_tokens: int = Field(default=0, ge=0)
    """Tokens sent."""
    completion_tokens: int = Field(default=0, ge=0)
    """Tokens generated."""
    total_tokens: int = Field(default=0, ge=0)
    """Both, as billed."""


class ModelOutput(WireModel):
    """One completed LLM call of a lane: its text and any tool calls."""

    kind: Literal["model_output"] = "model_output"
    lane: LaneId
    """The lane whose call this was."""
    text: str = ""
    """Assistant text; empty when the model only called tools."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Structured tool calls, in the model's order."""
    usage: Usage = Field(default_factory=Usage)
    """Token counts reported by the provider."""
    model: str
    """The named model from config.json that answered."""
    latency_ms: int | None = Field(default=None, ge=0)
    """Wall-clock duration of the call."""


class ToolCallRequested(WireModel):
    """A lane proposed a tool call; the arbiter accepted it for validation."""

    kind: Literal["tool_call_requested"] = "tool_call_requested"
    call_id: str
    """The model's tool call id."""
    tool: str
    """Canonical tool name as proposed."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments as proposed."""


class ToolCallCommitted(WireModel):
    """The intent: the call passed validation, holds its locks and is about to run.

    For a non-idempotent tool this is made durable before the tool runs; after a crash an intent
    without a result is shown to the operator, never silently re-run.
    """

    kind: Literal["tool_call_committed"] = "tool_call_committed"
    call_id: str
    """The call being executed."""
    tool: str
    """Canonical tool name."""
    locks: list[HeldLock] = Field(default_factory=list)
    """Locks acquired for the call."""
    side_effect: SideEffect
    """The tool's side-effect class."""
    idempotent: bool
    """Whether the call may be re-run after a crash."""
    lock_wait_ms: int | None = Field(default=None, ge=0, exclude_if=lambda ms: ms is None)
    """How long the call waited for its locks before this intent (telemetry: `agent status`,
    `choir_lock_wait_seconds`); None (left out) in logs written before it was recorded."""


class ToolResultCommitted(WireModel):
    """The outcome of a call — or the arbiter's structured rejection of a proposal."""

    kind: Literal["tool_result_committed"] = "tool_result_committed"
    call_id: str
    """The call this result answers."""
    tool: str
    """Canonical tool name."""
    result: ToolResult
    """The structured result the model sees."""
    duration_ms: int | None = Field(default=None, ge=0)
    """Execution time once the call held its locks (its lock wait is the intent's
    `lock_wait_ms`), for telemetry: `agent status` p50/p95 per tool, the metrics endpoint."""


class CompactionArchive(WireModel):
    """The immutable archive entry a compaction leaves (seed design 002): the folded window's
    summary, stored by choird as a knowledge item of this name when the event is durable."""

    name: str = Field(min_length=1, max_length=200)
    """Its generated, unique name: `archive/<session short id>/<rev folded up to>`."""
    folded_from_rev: int = Field(ge=1)
    """The oldest rev the compaction folded (the newest is `window_start_rev - 1`)."""
    archived_at: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}Z$")
    """When, to the minute (ISO 8601, UTC): `2026-11-27T13:52Z`."""


class MemoryWriteCommitted(WireModel):
    """A compaction folded events into a lane's reference summary (working memory, §11.3).
    It is also the lane history's marker of the archive the compaction left (`archive`)."""

    kind: Literal["memory_write_committed"] = "memory_write_committed"
    summary_lane: LaneId
    """Whose reference summary changed."""
    delta: MemoryDelta
    """The structured edit applied to the summary."""
    window_start_rev: int = Field(ge=1)
    """The lane's new event window boundary: the oldest rev still in the window."""
    archive: CompactionArchive | None = Field(default=None, exclude_if=lambda a: a is None)
    """The archive entry of the folded window; None (left out) in logs written before
    archives, whose compactions left none."""


class CoreStarted(WireModel):
    kind: Literal["core_started"] = "core_started"
    job: CoreJobStart
    """The briefing the job started from (needed to resume it)."""


class CoreStopped(WireModel):
    """A core job ended; edge must present `report` to the user (§7.1)."""

    kind: Literal["core_stopped"] = "core_stopped"
    job_name: JobName
    """The job that ended."""
    job_id: str
    """Its id."""
    outcome: Literal["completed", "terminated", "cancelled"]
    """`completed` on a final result, `terminated` on error or budget, `cancelled` on request."""
    report: str
    """Summary of what the job did or why it stopped."""


class InjectedInstruction(WireModel):
    """An instruction appended to a lane's context (§12.8): user -> edge or edge -> core."""

    kind: Literal["injected_instruction"] = "injected_instruction"
    target: LaneId
    """The lane that receives the instruction."""
    content: str
    """The instruction text."""
    source: Literal["user", "edge"]
    """`user` for /inject into edge, `edge` for edge -> core."""


class Cancelled(WireModel):
    """A lane (or one of its tool calls) was cancelled."""

    kind: Literal["cancelled"] = "cancelled"
    target: LaneId
    """The lane cancelled (or whose call was)."""
    reason: str
    """Why, for the report."""
    call_id: str | None = None
    """Set when one in-flight tool call was cancelled rather than the whole lane."""


class SkillTransitionCommitted(WireModel):
    """A lane's skill moved between states (`from` is null when the skill starts)."""

    model_config = ConfigDict(serialize_by_alias=True)

    kind: Literal["skill_transition_committed"] = "skill_transition_committed"
    skill: SkillName
    """The lane's active skill."""
    from_: StateName | None = Field(alias="from")
    """The state left; null when the skill starts."""
    to: StateName
    """The state entered."""
    on: str
    """The transition event, or `start` / `error` for entry and error transitions."""


class CoreEventEmitted(WireModel):
    kind: Literal["core_event_emitted"] = "core_event_emitted"
    job_name: JobName
    """The job that emitted it."""
    event: CoreEvent
    """The structured event."""


class ApprovalResolved(WireModel):
    kind: Literal["approval_resolved"] = "approval_resolved"
    approval_id: str
    """The approval answered."""
    status: Literal["approved", "applied", "rejected", "failed", "timed_out"]
    """How it ended: `applied` or `failed` for a proposal choird applies (a skill); `timed_out`
    only in logs written before a timeout became a rejection (§19.6)."""
    reason: str | None = Field(default=None, exclude_if=lambda reason: reason is None)
    """What was applied, or the step and reason of a failure (left out when none)."""


ReplyCategory = Literal["reply", "core_report", "core_question", "core_update", "error", "notice"]
"""A normal reply, a core job's completion report, a core job's question for the user
(`need_info`: the job waits for the answer), a core job's plan or partial result, an error, or
an informational notice."""


class AgentReplied(WireModel):
    """Something the agent says to its user; choird delivers it to the bound DM."""

    kind: Literal["agent_replied"] = "agent_replied"
    text: str
    """The message text."""
    attachments: list[str] = Field(default_factory=list)
    """Workspace paths under `.choirtmp/send/` to deliver as files, voice, images or video."""
    category: ReplyCategory = "reply"
    """What kind of message it is (see `ReplyCategory`)."""
    in_reply_to: str | None = None
    """The `message_id` of the user message answered, if any."""


class SessionSummary(WireModel):
    """The agent's own summary of a session, made at graceful stop (§11.5, §11.8)."""

    kind: Literal["session_summary"] = "session_summary"
    summary: str
    """What happened in the session, for long-term memory."""
    topics: list[str] = Field(default_factory=list)
    """Subjects covered."""
    decisions: list[str] = Field(default_factory=list)
    """Decisions made with the user."""
    open_items: list[str] = Field(default_factory=list)
    """Work left unfinished."""


class MemoryRollup(WireModel):
    """The summary tree's root (design 004): the agent's own roll-up over session summaries,
    written by its model while edge was idle. choird stores it as an immutable knowledge item
    of this name, linked derived_from each summary it covers, once the event is durable (and
    again, idempotently, at the session's close): the event is the source of truth."""

    kind: Literal["memory_rollup"] = "memory_rollup"
    name: str = Field(pattern=r"^rollup/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}Z$")
    """`rollup/<ISO minute>`: when it was written, to the minute (UTC)."""
    text: str = Field(min_length=1)
    """What the model wrote over the summaries."""
    covers: list[str] = Field(min_length=1, max_length=100)
    """The names of the session summaries (`summary/<session>`) it rolls up, oldest first."""


class RecalledItem(WireModel):
    """One memory `MemoryRecalled` put into a prompt."""

    id: str
    """The item's id (`choirctl memory show <id>` opens it)."""
    name: str | None = None
    """A knowledge item's name."""
    store: Literal["knowledge"] = "knowledge"
    """Where it came from; knowledge only for now (docs/ARCHITECTURE.md, memory)."""
    score: float
    """Its relevance (design 004's formula) for the message."""
    tokens: int = Field(ge=0)
    """What it costs in the prompt (estimated, 4 characters a token)."""
    text: str
    """The text the prompt showed: kept here so a replay shows the very same block."""


class MemoryRecalled(WireModel):
    """The memories put into edge's prompt for one user message (design 004, "relevant context").

    Committed by edge right after the `UserMsg` it is for, before the turn's first LLM call; the
    prompt shows the latest one for the latest user message, read from the log, so a replay or
    a recovery shows the same block without searching again. `skipped` says why nothing was put
    in (the search failed or was too slow): the turn goes on without it. A recall that found
    nothing relevant is not committed.
    """

    kind: Literal["memory_recalled"] = "memory_recalled"
    message_id: str | None = None
    """The user message it is for."""
    items: list[RecalledItem] = Field(default_factory=list)
    """Best first."""
    tokens: int = Field(default=0, ge=0)
    """The items' tokens, together (at most `budget_tokens`)."""
    budget_tokens: int = Field(ge=0)
    """config.json `recall_budget_tokens` at the time."""
    took_ms: int = Field(default=0, ge=0)
    """From the search's request to its answer (or to giving up)."""
    skipped: str | None = None
    """Why nothing was recalled (an error, the deadline); None when the search answered."""
    note: str | None = None
    """How the search ran when not in full (no embedder answered: no similarity)."""


class LlmCallRecorded(WireModel):
    """One LLM call a lane made, as billed: what usage and spend are counted from.

    Committed right after the call answers, whatever the answer becomes (a step's
    `ModelOutput`, a session summary, or nothing usable): every call is counted once, by its
    revision (choird stores one usage row per (session, rev) in the heartbeat that makes it
    durable). The cost is fixed when the call is made, so a later price change never rewrites
    what was spent.
    """

    kind: Literal["llm_call"] = "llm_call"
    lane: LaneId
    """The lane whose call this was."""
    job_id: str | None = None
    """The core job that made the call; null for edge."""
    purpose: Literal["step", "summary", "compaction", "rollup"] = "step"
    """`step`: a lane's reasoning step; `summary`: the session summary of a graceful stop;
    `compaction`: folding a lane's oldest events into its summary (§11.3); `rollup`: the idle
    roll-up over session summaries (`MemoryRollup`)."""
    model: str
    """The named model of config.json that was called."""
    provider_model: str | None = None
    """The model id the provider says answered."""
    prompt_tokens: int = Field(default=0, ge=0)
    """Tokens sent, as the provider reported them (cached ones included)."""
    completion_tokens: int = Field(default=0, ge=0)
    """Tokens generated."""
    cached_tokens: int = Field(default=0, ge=0)
    """Of the prompt tokens, those the provider served from its prompt cache."""
    latency_ms: int = Field(default=0, ge=0)
    """Wall time of the call, a rate-limit wait and retry included."""
    cost_usd: float | None = Field(default=None, ge=0)
    """What the call cost; null when unknown (no price configured and none reported) — never
    counted as 0."""
    cost_source: Literal["provider", "price"] | None = None
    """`provider`: the provider reported it (OpenRouter's `usage.cost`); `price`: computed from
    `models.<name>.price`; null when the cost is unknown."""


Event = Annotated[
    UserMsg
    | ModelOutput
    | ToolCallRequested
    | ToolCallCommitted
    | ToolResultCommitted
    | MemoryWriteCommitted
    | CoreStarted
    | CoreStopped
    | InjectedInstruction
    | Cancelled
    | SkillTransitionCommitted
    | CoreEventEmitted
    | ApprovalResolved
    | AgentReplied
    | SessionSummary
    | LlmCallRecorded
    | MemoryRecalled
    | MemoryRollup,
    Field(discriminator="kind"),
]
"""Any authoritative event, tagged by `kind`."""

EVENT_ADAPTER: Final[TypeAdapter[Event]] = TypeAdapter(Event, config=ConfigDict(defer_build=True))
"""Validates and dumps any `Event`: one adapter for every user, its validator built on first use
(building it costs choir-agent's start ~50 ms, and each copy would cost that again)."""
