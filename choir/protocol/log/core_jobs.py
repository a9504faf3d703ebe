"""Edge <-> core contracts (§12.7, §12.8): the job briefing, the core's event stream, injection.

Core never sees a raw user message, only the `CoreJobStart` edge curates. Core never sends raw
chain-of-thought, only the structured `CoreEvent`s below (design invariant 6).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from choir.protocol.base import WireModel
from choir.protocol.json_schema import ensure_json_schema
from choir.protocol.log.lanes import JobName
from choir.protocol.names import SkillName, ToolName


class ContextBundle(WireModel):
    """Only the context core needs, extracted by edge."""

    facts: list[str] = Field(default_factory=list)
    """Relevant facts extracted by edge."""
    excerpts: list[str] = Field(default_factory=list)
    """File excerpts, prior results or memory references."""
    constraints: list[str] = Field(default_factory=list)
    """Requirements or preferences the user stated."""


class ToolConstraints(WireModel):
    """Limits edge places on one job, within the agent's own budgets."""

    allowed_tools: list[ToolName] = Field(default_factory=list)
    """Tools the job may use; empty means every core-exposed tool."""
    time_budget_ms: int = Field(default=0, ge=0)
    """Wall-clock budget; 0 means the configured per-job default."""


class CoreJobStart(WireModel):
    """Edge's curated briefing that starts one core job."""

    job_id: str = Field(min_length=1)
    """Unique id of this job run."""
    job_name: JobName
    """User-friendly name, unique among running jobs; the job's lane is `core:<job_name>`."""
    task_spec: str = Field(min_length=1)
    """Clear, actionable instruction written by edge — never the user's raw message."""
    context_bundle: ContextBundle = Field(default_factory=ContextBundle)
    """The context core gets instead of the conversation."""
    tool_constraints: ToolConstraints = Field(default_factory=ToolConstraints)
    """Tool and time limits for the job."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema the final result must satisfy, if edge needs a structured deliverable."""
    verbosity: Literal["brief", "normal", "detailed"] = "normal"
    """How much progress chatter core should emit."""
    skill: SkillName | None = None
    """Skill the job runs, if any (one active skill per lane)."""

    @field_validator("output_schema")
    @classmethod
    def _is_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if schema is None else ensure_json_schema(schema)


class PlanStep(WireModel):
    description: str
    """What the step does."""
    done: bool = False
    """Whether it is finished."""


class CoreProgress(WireModel):
    kind: Literal["progress"] = "progress"
    phase: str
    """Current phase, e.g. a skill state."""
    percent: float | None = Field(default=None, ge=0, le=100)
    """Estimated completion, if known."""
    focus: str = ""
    """What the job is working on right now."""


class CorePlan(WireModel):
    kind: Literal["plan"] = "plan"
    steps: list[PlanStep]
    """The plan, in order."""


class CoreThoughtSummary(WireModel):
    """A short summary of reasoning — never raw chain-of-thought."""

    kind: Literal["thought_summary"] = "thought_summary"
    summary: str
    """One or two sentences."""


class CoreToolProposal(WireModel):
    kind: Literal["tool_proposal"] = "tool_proposal"
    tool: ToolName
    """Tool core intends to call."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Intended arguments."""
    why: str
    """Purpose of the call."""
    expected_output: str = ""
    """What core expects back."""


class CoreNeedInfo(WireModel):
    """Core is missing something only edge (or the user, through edge) can supply."""

    kind: Literal["need_info"] = "need_info"
    question: str
    """What core needs answered."""
    missing: list[str] = Field(default_factory=list)
    """The missing pieces, one per item."""


class CorePartialResult(WireModel):
    kind: Literal["partial_result"] = "partial_result"
    description: str
    """What the intermediate result is."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Its structured content."""
    artifact_ref: str | None = None
    """Workspace path or content hash of an intermediate artifact."""


class CoreFinalResult(WireModel):
    kind: Literal["final_result"] = "final_result"
    summary: str
    """What was done, in a form edge can relay to the user."""
    result: dict[str, Any] = Field(default_factory=dict)
    """The structured deliverable (matching CoreJobStart.output_schema when given)."""
    artifacts: list[str] = Field(default_factory=list)
    """Workspace paths of files produced."""


class CoreError(WireModel):
    kind: Literal["error"] = "error"
    code: str
    """Stable reason, e.g. `llm_error`, `budget_exceeded`, `tool_failed`."""
    message: str
    """One line for edge to relay."""
    retryable: bool = False
    """Whether spawning the job again may succeed."""


CoreEvent = Annotated[
    CoreProgress
    | CorePlan
    | CoreThoughtSummary
    | CoreToolProposal
    | CoreNeedInfo
    | CorePartialResult
    | CoreFinalResult
    | CoreError,
    Field(discriminator="kind"),
]
"""What a core job tells edge (§12.7)."""


class CoreInjection(WireModel):
    """Edge appends an instruction to a running job (§12.8). Never resets budgets or history.

    The spec writes the tag as `"type": "core_injection"`; choir tags every message with
    `kind`, so this is `"kind": "core_injection"`.
    """

    kind: Literal["core_injection"] = "core_injection"
    job_name: JobName
    """The job to instruct."""
    content: str = Field(min_length=1)
    """The instruction text."""
