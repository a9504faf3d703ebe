"""Request and response payloads of the agent -> choird verbs (§12.5 table; the artifact and
paging verbs beyond it are in `choir.protocol.wire.artifacts`)."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, SecretStr, field_serializer, model_validator

from choir.protocol.base import WireModel
from choir.protocol.log.chain import GENESIS_HASH
from choir.protocol.log.committed import CommittedEvent, chain_break
from choir.protocol.log.lanes import LaneId, LaneStatus
from choir.protocol.log.snapshot import Snapshot
from choir.protocol.problems import invalid
from choir.protocol.scalars import Sha256Hex, UtcTimestamp
from choir.protocol.tooling.bindings import ResourceBindings
from choir.protocol.tooling.locks import LockState
from choir.protocol.tooling.tools import ToolResult
from choir.protocol.wire.job_tokens import JobToken


class InitHelloRequest(WireModel):
    """The agent's first call: who it is and what it was built from (§13.2, §14.2)."""

    protocol_version: int = Field(ge=1)
    """The agent's PROTOCOL_VERSION; choird refuses a version it does not speak."""
    agent_id: str
    """The agent id from config.json."""
    session_id: str
    """The session choird created (or resumes) for this start."""
    image_version: str
    """From /choir/version.json; choird refuses an image it did not build."""
    tool_manifest_hash: Sha256Hex
    """`tool_manifest_hash` of the tools baked into the image."""
    skill_manifest_hash: Sha256Hex
    """`skill_manifest_hash` of the skills baked into the image."""


class SpendSoFar(WireModel):
    """An agent's known LLM spend when its session (re)started, for its spend caps."""

    day: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    """The UTC day the figures are for, `YYYY-MM-DD`."""
    day_usd: float = Field(default=0.0, ge=0)
    """Spent that day (calls of known cost only)."""
    month_usd: float = Field(default=0.0, ge=0)
    """Spent in that day's UTC month."""


class InitHelloResponse(WireModel):
    status: Literal["fresh", "resumed"]
    """`fresh`: start an empty log. `resumed`: rehydrate from `snapshot` + `tail_events`."""
    lease_token: str = Field(repr=False)
    """The session's lease; required on every later call, never logged."""
    resource_bindings: ResourceBindings
    """The named resources this session uses."""
    snapshot: Snapshot | None = None
    """Latest working-memory snapshot when resuming, if one was taken."""
    tail_events: list[CommittedEvent] = Field(default_factory=list)
    """Events after the snapshot (or from rev 1), up to the last acknowledged revision — or
    the first page of them when `tail_complete` is false."""
    config_version: int = Field(ge=0)
    """The hot-reloadable config version the agent should run."""
    tail_complete: bool = Field(default=True, exclude_if=lambda complete: complete)
    """False when the tail continues beyond this answer's bytes: the agent reads the rest with
    FETCH_EVENTS from its last revision (left out on the wire when true)."""
    spend: SpendSoFar | None = Field(default=None, exclude_if=lambda spend: spend is None)
    """The agent's spend so far (every acknowledged call of every session), which its spend
    caps add this session's calls to; left out when choird has none to tell."""

    @model_validator(mode="after")
    def _resumable(self) -> Self:
        if self.status == "fresh" and (self.snapshot is not None or self.tail_events):
            raise invalid("status: a fresh session comes without snapshot or tail_events")
        base_rev, base_hash = (
            (self.snapshot.rev, self.snapshot.hash) if self.snapshot else (0, GENESIS_HASH)
        )
        problem = chain_break(
            self.tail_events, base_rev=base_rev, hash_prev=base_hash, where="tail_events"
        )
        if problem:
            raise invalid(problem)
        return self


class GetSecretsRequest(WireModel):
    resources: list[str]
    """Secret names, from the `secret` fields of the session's bound resources."""


class GetSecretsResponse(WireModel):
    """Secret values. They travel in clear on the wire but never show in a repr or a log."""

    secrets: dict[str, SecretStr]
    """Secret name -> value, for the names asked for and allowed."""

    @field_serializer("secrets")
    def _reveal(self, secrets: dict[str, SecretStr]) -> dict[str, str]:
        return {name: value.get_secret_value() for name, value in secrets.items()}


class HeartbeatRequest(WireModel):
    """Replicates the committed revisions choird has not acknowledged yet (§13.1)."""

    base_rev: int = Field(ge=0)
    """Last revision choird acknowledged."""
    new_rev: int = Field(ge=0)
    """The agent's latest committed revision."""
    patches: list[CommittedEvent] = Field(default_factory=list)
    """Revisions base_rev+1 .. new_rev, in order."""
    config_version: int = Field(ge=0)
    """The config version the agent runs."""
    hash_prev: Sha256Hex
    """Chain hash at base_rev."""
    hash_new: Sha256Hex
    """Chain hash at new_rev."""
    timestamp: UtcTimestamp
    """When the agent sent the heartbeat (for operations, not ordering)."""
    snapshot: Snapshot | None = None
    """Working-memory snapshot at new_rev, sent periodically to bound replay (§13.4)."""

    @model_validator(mode="after")
    def _contiguous(self) -> Self:
        if self.new_rev != self.base_rev + len(self.patches):
            raise invalid(
                f"new_rev: {self.new_rev} does not equal base_rev {self.base_rev} "
                f"plus {len(self.patches)} patches"
            )
        problem = chain_break(self.patches, base_rev=self.base_rev, hash_prev=self.hash_prev)
        if problem:
            raise invalid(problem)
        head = self.patches[-1].hash if self.patches else self.hash_prev
        if head != self.hash_new:
            raise invalid("hash_new: does not match the hash of the last patch")
        if self.snapshot is not None and self.snapshot.rev != self.new_rev:
            raise invalid(f"snapshot.rev: {self.snapshot.rev} is not new_rev {self.new_rev}")
        return self


class HeartbeatResponse(WireModel):
    ack_rev: int = Field(ge=0)
    """Highest revision now durable in choird; the agent may drop what precedes it."""
    config_version_latest: int = Field(ge=0)
    """When newer than the agent's, the agent calls FETCH_DYNAMIC_CONFIG."""


ApprovalRequestType = Literal["tool", "skill", "config_change", "repo_change", "budget_extension"]


class RequestApprovalRequest(WireModel):
    request_type: ApprovalRequestType
    """tool / skill / config_change from choir.propose.*; repo_change for §20 proposals;
    budget_extension when a core job's budget ran out and it waits for more (issue 19)."""
    payload: dict[str, Any]
    """The proposal itself (manifest, skill spec, config patch, or branch ref)."""
    job: JobToken | None = Field(default=None, exclude_if=lambda token: token is None)
    """A core job's token (§7.5(3)) when a job asks; edge's requests carry only the lease."""


class RequestApprovalResponse(WireModel):
    approval_id: str
    """Id the operator approves or rejects; an ApprovalResolved push follows."""
    status: Literal["pending", "approved", "rejected"]
    """`pending` until a human answers."""


class HeldCall(WireModel):
    """A non-idempotent call a crash left with an unknown outcome: its core job is held until
    the operator decides (`choirctl session recover`)."""

    call_id: str
    tool: str


class ReportStatusRequest(WireModel):
    lane: LaneId
    """The reporting lane."""
    state: LaneStatus
    """Its state-machine state."""
    skill: str | None = None
    """The lane's active skill, if any."""
    step: int | None = Field(default=None, ge=0)
    """Steps the lane's active skill has taken."""
    budget_remaining: dict[str, int] = Field(default_factory=dict)
    """Remaining budget per counter (§7.6)."""
    locks: list[LockState] | None = Field(default=None, exclude_if=lambda locks: locks is None)
    """The agent's whole lock table (§9), sent when it changed since the last report; None
    (left out on the wire) means unchanged. choird keeps the latest per session for the operator
    (`session.locks`)."""
    held: list[HeldCall] | None = Field(default=None, exclude_if=lambda held: held is None)
    """A core job held after a crash: the calls whose outcome is unknown (left out otherwise).
    choird shows it in status, `agent status`, `session cores` and the console."""


class Ack(WireModel):
    ack: bool = True
    """Always true: the call was accepted."""


SummarySkipped = Literal[
    "timed_out",
    "call_failed",
    "not_a_summary",
    "nothing_to_summarize",
    "disabled",
    "hurried",
    "not_made",
]
"""Why a graceful stop has no session summary (§11.8): the model took longer than the timeout,
the call failed, the reply was no summary object, the session had nothing to summarize, the
timeout was 0, the stop was hurried (a second stop request, choird's SIGTERM), or it was not
attempted (replication had failed)."""


class SummaryOutcome(WireModel):
    """How the session summary of a graceful stop went (§11.8), for the operator's `agent stop`."""

    rev: int | None = Field(default=None, ge=1)
    """The committed `session_summary` event's rev; None when there is none."""
    skipped: SummarySkipped | None = None
    """Why there is none; None when `rev` is set."""
    timeout_ms: int = Field(ge=0)
    """The summary call's timeout."""


class TerminateSelfRequest(WireModel):
    reason: str
    """Why the agent is exiting, for the session record."""
    summary: SummaryOutcome | None = Field(default=None, exclude_if=lambda s: s is None)
    """After a graceful stop: whether its session summary was made (left out otherwise)."""
    failed: bool = Field(default=False, exclude_if=lambda failed: not failed)
    """True when the agent could not start or resume its session: choird ends the session as
    crashed (still resumable) and tells whoever started the agent why (left out when false)."""


class FetchDynamicConfigRequest(WireModel):
    current_config_version: int = Field(ge=0)
    """The version the agent runs now."""


class FetchDynamicConfigResponse(WireModel):
    config_version: int = Field(ge=0)
    """The latest published version."""
    config: dict[str, Any] | None = None
    """The hot-reloadable config as one blob, or None when the agent is current."""


class ExecuteHostToolRequest(WireModel):
    tool_name: str
    """Canonical name of a host tool (implementation `host`)."""
    call_id: str
    """Invocation id; choird de-duplicates re-sent calls by it (§13.3)."""
    input: dict[str, Any] = Field(default_factory=dict)
    """Arguments, already validated against the tool's schema."""
    job: JobToken | None = Field(default=None, exclude_if=lambda token: token is None)
    """A core job's token (§7.5(3)); edge's calls carry only the lease."""


class ExecuteHostToolResponse(WireModel):
    call_id: str
    """Echo of the request's call_id."""
    status: Literal["success", "error"]
    """`error` for any result status other than success."""
    output: dict[str, Any]
    """The tool's structured result: the JSON form of a ToolResult."""

    @classmethod
    def of(cls, call_id: str, result: ToolResult) -> Self:
        status: Literal["success", "error"] = "success" if result.status == "success" else "error"
        return cls(call_id=call_id, status=status, output=result.model_dump(mode="json"))

    def tool_result(self) -> ToolResult:
        return ToolResult.model_validate(self.output)
