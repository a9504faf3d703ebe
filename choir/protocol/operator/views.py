"""How sessions, approvals, lanes, events and agents look on the operator socket.

Every verb and the live feed describe a thing the same way, so the TUI can update a row from a
feed item with the code that drew it from a listing. Timestamps are ISO 8601 strings in UTC;
durations are seconds. Objects whose keys are not choir's to fix — an event's payload, a
session's bindings as stored, a config — stay JSON objects (`JsonObject`), in the order stored.

`Sparse` models put on the wire only the fields they were given: the few answers whose keys
depend on the outcome (a reset that stopped an agent says so; a refused config load has no
hash) keep the exact form they always had, and parse back to the same bytes.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from choir.protocol.base import WireModel

JsonObject = dict[str, Any]
"""A JSON object passed through as is (its keys are not the operator API's)."""


class OperatorModel(WireModel):
    """An answer or item of the operator API: a `WireModel` whose attribute docstrings stay
    comments — reading them means parsing this module's source, and choirctl loads it on every
    command (`choirctl status` answers within 150 ms)."""

    model_config = ConfigDict(use_attribute_docstrings=False)


class Sparse(OperatorModel):
    """A model whose wire form has exactly the fields it was built or parsed with (and its
    `kind` tag, if it has one)."""

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        # unannotated on purpose: pydantic then derives the JSON schema from the fields
        data = handler(self)
        given = self.model_fields_set
        return {key: value for key, value in data.items() if key in given or key == "kind"}


class HeldCallView(OperatorModel):
    """A call of unknown outcome (as REPORT_STATUS's `HeldCall`)."""

    call_id: str
    tool: str


class LockWaiterView(OperatorModel):
    """A queued request naming a resource (as `LockWaiter`)."""

    owner: str
    mode: str
    waiting_s: float


class LockView(OperatorModel):
    """A held or awaited resource of an agent's lock table (as REPORT_STATUS's `LockState`).

    Views repeat the agent-side models' fields rather than import them: choirctl loads this
    module on every command, the agent wire's models only when it needs them."""

    resource: str
    mode: str
    holders: list[str]
    waiters: list[LockWaiterView]
    held_for_s: float | None


class HeldView(OperatorModel):
    """A core job held after a crash: its calls of unknown outcome, and what decides it."""

    session_id: str
    job_name: str
    calls: list[HeldCallView]
    state: str
    hint: str
    """The `choirctl session recover` command that decides it."""


class LaneView(OperatorModel):
    """A lane as it last reported (`session cores`, `agent status`, the `lane` feed item)."""

    session_id: str
    lane: str
    state: str
    skill: str | None
    step: int | None
    budget_remaining: JsonObject
    reported_at: str | None
    held: HeldView | None


class CoreView(OperatorModel):
    """A core lane in `session cores`: its job name, then the lane."""

    job_name: str
    session_id: str
    lane: str
    state: str
    skill: str | None
    step: int | None
    budget_remaining: JsonObject
    reported_at: str | None
    held: HeldView | None


class LocksView(OperatorModel):
    """A session's lock table as its agent last reported it; durations as of `reported_at`."""

    session_id: str
    reported_at: str | None
    locks: list[LockView]


class SessionView(OperatorModel):
    session_id: str
    agent_id: str
    status: str
    started_at: str | None
    ended_at: str | None
    uptime_s: float | None
    last_heartbeat_at: str | None
    ack_rev: int
    config_version: int | None
    bindings: JsonObject


class SessionEndedView(OperatorModel):
    """A session that ended (the `session` feed item)."""

    session_id: str
    agent_id: str
    status: str
    reason: str | None


class ApprovalAuditView(OperatorModel):
    """One fact of an approval's audit trail: requested, decided, an apply step, its end."""

    at: str | None
    action: str
    actor: str | None
    via: str | None
    detail: str


class ApprovalApplyView(OperatorModel):
    """Where an approved proposal's apply is (`commit → merge → build → update → done`)."""

    step: str
    branch: str
    base_commit: str | None
    commit_id: str | None
    merged_from: str | None
    image_id: str | None
    failed_step: str | None
    reason: str | None


class ApprovalView(OperatorModel):
    approval_id: str
    agent_id: str
    session_id: str
    request_type: str
    status: str
    created_at: str | None
    resolved_at: str | None
    resolved_by: str | None
    payload: JsonObject
    content_sha256: str | None = None
    """SHA-256 of the content reviewed, which an apply must match (a skill's file)."""
    resolved_via: str | None = None
    """The front end that answered: choirctl, tui, telegram, console, or timeout."""
    outcome: str | None = None
    """An applied proposal's end: what was applied, or the failed step and why."""
    apply: ApprovalApplyView | None = None
    """The apply's state (`approval show` only)."""
    audit: list[ApprovalAuditView] = Field(default_factory=list)
    """Who did what and when, oldest first (`approval show` only)."""
    diff: str | None = Field(default=None, exclude_if=lambda diff: diff is None)
    # `approval.show` only: what the proposal would change, as a unified diff (left out of
    # the wire for a kind with none, and in every other answer)


class EventView(OperatorModel):
    """A committed event (`session events`, each item of a followed session)."""

    rev: int
    lane: str
    event_type: str
    created_at: str | None
    hash: str
    payload: JsonObject
    artifact: JsonObject | None
    """Set for an event committed as a preview: where `session.artifact` reads it whole."""


class OutageView(OperatorModel):
    """Why an agent is interrupted (its latest session crashed, forked or was suspended)."""

    agent_id: str
    session_id: str
    status: str
    reason: str
    ended_at: str | None
    resumes: bool
    next_step: str
    """The command to run."""
    new_session: str
    hint: str


class CheckView(OperatorModel):
    """One item of the security profile (§15.3)."""

    item: str
    ok: bool
    required: bool
    expected: Any
    actual: Any


class VerifyReport(OperatorModel):
    """An agent checked against the declared security profile (`agent verify`)."""

    agent_id: str
    runtime: str
    container: str | None
    checked_at: str
    ok: bool
    checks: list[CheckView]


class AgentSummary(OperatorModel):
    """An agent in `agent list`: state, session, uptime, bindings, where it runs."""

    agent_id: str
    state: str
    session_id: str | None
    session_status: str | None
    started_at: str | None
    uptime_s: float | None
    config_version: int | None
    bindings: JsonObject
    held_jobs: list[HeldView]
    interrupted: OutageView | None
    runtime: str | None
    sandboxed: bool | None
    pid: int | None
    container: str | None
    verified: VerifyReport | None
    encrypted_memories: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    """The classes of its memory marked encrypted in config.json (left out: none): a start
    from the console asks for their key (`--memory-key-file`)."""


class ProblemFields(Sparse):
    """A component's state: `ok`, or its problem (reason, since when, where, restarts)."""

    state: str
    latency_ms: float | None = None
    problem: str | None = None
    reason: str | None = None
    since: str | None = None
    where: str | None = None
    restarts: int | None = None


class ToolLatencyView(OperatorModel):
    """One tool's calls that ran in a session (`agent status`, §22.1): how long they ran once
    their locks were held, and how long they waited for those locks."""

    tool: str
    calls: int
    failed: int
    """Calls whose result was not `success`."""
    p50_ms: int
    p95_ms: int
    max_ms: int
    lock_wait_ms: int
    """Time its calls waited for locks, in all."""


class LockWaitView(OperatorModel):
    """How a session's tool calls waited for their locks (§9, `agent status`)."""

    calls: int
    waited: int
    """Calls that waited at all."""
    total_ms: int
    p95_ms: int
    max_ms: int
