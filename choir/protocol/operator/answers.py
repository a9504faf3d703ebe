"""The answer of each operator verb, as choird sends it and choirctl `--json` prints it.

Field order is wire order. `tests/protocol/golden/v1/operator.json` pins every answer's form.
"""

from __future__ import annotations

from choir.protocol.base import WireModel
from choir.protocol.operator.views import (
    AgentSummary,
    ApprovalView,
    CoreView,
    EventView,
    JsonObject,
    LaneView,
    OutageView,
    ProblemFields,
    SessionView,
    Sparse,
)
from choir.protocol.wire.version import VersionInfo

# -- choird and agents ------------------------------------------------------------------------


class GatewayView(WireModel):
    name: str
    type: str
    state: str


class AgentCounts(WireModel):
    total: int
    running: int | None
    """None while Postgres is not answering."""
    interrupted: list[OutageView] | None


class HeldJobView(WireModel):
    """A held core job in `status`, with its agent when known."""

    agent_id: str | None
    session_id: str
    job_name: str
    calls: list[JsonObject]
    state: str
    hint: str


class HeldJobs(WireModel):
    count: int
    jobs: list[HeldJobView]
    hint: str | None


class RepoView(WireModel):
    key: str
    url: str
    ref: str
    local: bool
    commit: str | None
    stale: bool
    error: str | None
    fetched_at: str | None


class Sockets(WireModel):
    operator: str
    agents: str


class StatusAnswer(WireModel):
    """choird's health: version, uptime, config, Postgres, gateways, agents, approvals."""

    version: str
    started_at: str | None
    uptime_s: float
    config_version: int
    config_hash: str
    config_staged: bool
    postgres: ProblemFields
    disk: ProblemFields
    gateways: list[GatewayView]
    agents: AgentCounts
    approvals_pending: int | None
    held_jobs: HeldJobs
    repos: list[RepoView]
    sockets: Sockets


class AgentList(WireModel):
    agents: list[AgentSummary]


class AgentStatus(AgentSummary):
    """One agent in detail (§17.1): its summary, then lanes, skill, budgets, image."""

    config_version_latest: int
    config_behind: bool
    last_heartbeat_at: str | None
    ack_rev: int | None
    ended_at: str | None
    skill: str | None
    budgets: JsonObject
    budget_remaining: JsonObject
    lanes: list[LaneView]
    image: JsonObject | None


class AgentStarted(WireModel):
    agent_id: str
    session_id: str
    resumed: bool
    bindings: JsonObject
    runtime: str
    sandboxed: bool
    pid: int | None
    image: VersionInfo


class StopSummary(WireModel):
    """How the stopped session's summary went (§11.8)."""

    stored: bool
    rev: int | None
    skipped: str | None
    warn: bool
    detail: str


class AgentStopped(WireModel):
    agent_id: str
    session_id: str
    status: str
    exit_code: int | None
    summary: StopSummary


class AgentRestarted(AgentStarted):
    stopped: AgentStopped


class ChoirdShutdown(WireModel):
    pid: int
    agents_running: int


class ImageBuilt(WireModel):
    """The result of `agent build`."""

    agent_id: str
    tag: str
    image_id: str
    built: bool
    version: VersionInfo


class UpdateOutcome(Sparse):
    """One agent's update: `skipped`, `built`, `redeployed` (with its stop and start) or
    `failed`, and why."""

    agent_id: str
    outcome: str
    reason: str
    stopped: AgentStopped | None = None
    started: AgentStarted | None = None


class UpdateAll(WireModel):
    agents: list[UpdateOutcome]
    failed: int


# -- sessions ---------------------------------------------------------------------------------


class SessionList(WireModel):
    sessions: list[SessionView]


class SessionEvents(WireModel):
    session_id: str
    events: list[EventView]
    next_rev: int
    """Read on from here for what came after."""


class ArtifactChunk(WireModel):
    """A chunk of the whole event behind a preview; `data` is base64."""

    session_id: str
    rev: int
    sha256: str
    size: int
    offset: int
    data: str
    next_offset: int | None
    """None once the end is reached."""


class SessionCores(WireModel):
    session_id: str
    status: str
    cores: list[CoreView]


class CancelRequested(WireModel):
    session_id: str
    job_name: str
    requested: bool


class CompactRequested(WireModel):
    session_id: str
    lane: str | None
    requested: bool


class InterruptedCall(WireModel):
    """A call a crash left with an unknown outcome."""

    rev: int
    lane: str
    job_name: str | None
    call_id: str
    tool: str
    side_effect: str | None


class SessionRecovery(Sparse):
    """Without a choice: the interrupted calls; with one: the decision sent to the agent."""

    session_id: str
    status: str | None = None
    choice: str | None = None
    job_name: str | None = None
    requested: bool | None = None
    interrupted: list[InterruptedCall]


# -- approvals, workspaces, models ------------------------------------------------------------


class ApprovalList(WireModel):
    approvals: list[ApprovalView]


class WorkspaceView(WireModel):
    name: str
    path: str
    exists: bool
    leased_to: str | None
    session_id: str | None
    leased_at: str | None


class WorkspaceList(WireModel):
    workspaces: list[WorkspaceView]


class WorkspaceReset(Sparse):
    name: str
    path: str
    removed: int
    """Top-level entries removed."""
    stopped: AgentStopped | None = None
    """The agent that held the workspace, stopped first (only when there was one)."""


class ModelView(WireModel):
    name: str
    provider: str
    model: str
    label: str | None
    demo: bool
    secret: str | None


class TtsView(WireModel):
    name: str
    provider: str
    model_id: str | None


class ModelList(WireModel):
    models: list[ModelView]
    tts: list[TtsView]


class VoiceProfileView(WireModel):
    name: str
    tts: str
    voice_id: str
    output_format: str | None


class VoiceList(WireModel):
    voice_profiles: list[VoiceProfileView]


class AgentChoices(Sparse):
    """An agent's current LLM and voice profile, and its defaults (`llm_demo` for `model get`)."""

    agent_id: str
    running: bool
    session_id: str | None
    llm: str | None
    llm_default: str | None
    llm_overridden: bool
    voice_profile: str | None
    voice_profile_default: str | None
    voice_profile_overridden: bool
    llm_demo: bool | None = None


class BindingSwitched(WireModel):
    agent_id: str
    session_id: str
    role: str
    name: str
    previous: str | None
    config_version: int


# -- config and secrets -----------------------------------------------------------------------


class ChangeView(WireModel):
    op: str
    source: str
    path: str
    scope: str
    action: str


class ConfigChanges(WireModel):
    changes: list[ChangeView]
    lines: list[str]
    """The changes as §17.6's aligned lines."""


class ConfigLoaded(Sparse):
    """Staged, with the changes; or not, with every problem."""

    staged: bool
    header: str | None = None
    errors: list[str] | None = None
    config_hash: str | None = None
    warnings: list[str] | None = None
    changes: list[ChangeView] | None = None
    lines: list[str] | None = None


class ConfigApplied(WireModel):
    config_version: int
    pushed: list[str]
    """The sessions told."""
    changes: list[ChangeView]
    lines: list[str]


class ConfigShown(WireModel):
    config_version: int
    config_hash: str
    staged: bool
    config: JsonObject
    """The running config (names of secrets only)."""


class SecretView(WireModel):
    name: str
    set: bool
    referenced_by: list[str]


class SecretList(WireModel):
    secrets: list[SecretView]
    missing: list[str]


class SecretsPushed(WireModel):
    session_id: str
    agent_id: str
    secrets: list[str]


class SecretsApplied(Sparse):
    """Applied (how many secrets, which changed, who was told), or not, with the problems."""

    applied: bool
    header: str | None = None
    errors: list[str] | None = None
    secrets: int | None = None
    changed: list[str] | None = None
    pushed: list[SecretsPushed] | None = None


# -- the console DM ---------------------------------------------------------------------------


class ChatSent(WireModel):
    session_id: str
    injected: bool
    message_id: str | None
    after_seq: int
    """The latest kept reply's seq: follow `chat.replies` from here."""
    durable: bool


class ChatReply(WireModel):
    """An agent's reply, core report or error to a console DM (a `chat.replies` item)."""

    seq: int
    agent_id: str
    session_id: str
    rev: int | None
    lane: str | None
    category: str
    text: str
    attachments: list[JsonObject]
    in_reply_to: str | None
    artifact: JsonObject | None
