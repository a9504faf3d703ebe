"""The answer of each operator verb, as choird sends it and choirctl `--json` prints it.

Field order is wire order. `tests/protocol/golden/v1/operator.json` pins every answer's form.
"""

from __future__ import annotations

from pydantic import Field

from choir.protocol.operator.views import (
    AgentSummary,
    ApprovalView,
    CoreView,
    EventView,
    JsonObject,
    LaneView,
    LockWaitView,
    OperatorModel,
    OutageView,
    ProblemFields,
    SessionView,
    Sparse,
    ToolLatencyView,
)

# -- choird and agents ------------------------------------------------------------------------


class ImageVersion(OperatorModel):
    """The version.json of what an agent runs (`VersionInfo`'s fields, repeated here so that
    choirctl does not load the agent wire's models)."""

    agent_id: str
    image_version: str
    global_repo_commit: str
    agent_repo_commit: str
    tool_manifest_hash: str
    skill_manifest_hash: str


class GatewayView(OperatorModel):
    name: str
    type: str
    state: str


class AgentCounts(OperatorModel):
    total: int
    running: int | None
    """None while Postgres is not answering."""
    interrupted: list[OutageView] | None


class HeldJobView(OperatorModel):
    """A held core job in `status`, with its agent when known."""

    agent_id: str | None
    session_id: str
    job_name: str
    calls: list[JsonObject]
    state: str
    hint: str


class HeldJobs(OperatorModel):
    count: int
    jobs: list[HeldJobView]
    hint: str | None


class RepoView(OperatorModel):
    key: str
    url: str
    ref: str
    local: bool
    commit: str | None
    stale: bool
    error: str | None
    fetched_at: float | None
    """When the last fetch succeeded, in seconds since the epoch (None: never fetched)."""


class Sockets(OperatorModel):
    operator: str
    agents: str


class MemoryStale(OperatorModel):
    """An agent waiting for `memory reembed`: the model its stored vectors came from."""

    agent_id: str
    model: str
    dims: int


class StatusAnswer(OperatorModel):
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
    memory_reembed: list[MemoryStale] = []
    """Agents whose memory vectors are another embedding model's: searched by text until
    `choirctl memory reembed` (§11.9)."""
    config_pending: list[str] = []
    """Applied changes waiting for a choird restart, as §17.6 lines naming that command."""


class AgentList(OperatorModel):
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
    unavailable_tools: dict[str, str] = {}
    """Seed tools the agent's model is not offered, with why: not built yet, or an integration
    whose provider or secret is not configured (what the agent withholds, from the same rules)."""
    tools: list[ToolLatencyView] | None = Field(default=None, exclude_if=lambda v: v is None)
    """Per tool of the latest session: calls, p50/p95 run time, lock wait (§22.1)."""
    lock_wait: LockWaitView | None = Field(default=None, exclude_if=lambda v: v is None)
    """The latest session's lock waits; both left out when the agent never had a session."""
    spend: SpendView | None = None
    """Known LLM spend today and this month against the agent's caps."""
    link: str | None = None
    """How the running agent reaches choird (§12.1): `unix socket`, or the HTTPS listener's
    URL; None when it is not running or has not called this choird yet."""

    def unavailable_by_reason(self) -> list[tuple[str, list[str]]]:
        """`unavailable_tools` as (reason, tool names) in tool-name order: one line each."""
        return unavailable_by_reason(self.unavailable_tools)


def unavailable_by_reason(unavailable: dict[str, str]) -> list[tuple[str, list[str]]]:
    by_reason: dict[str, list[str]] = {}
    for name, why in sorted(unavailable.items()):
        by_reason.setdefault(why, []).append(name)
    return list(by_reason.items())


class AgentStarted(OperatorModel):
    agent_id: str
    session_id: str
    resumed: bool
    bindings: JsonObject
    runtime: str
    sandboxed: bool
    pid: int | None
    image: ImageVersion
    memory_sealed: list[str] = Field(default_factory=list)
    """What a keyed start sealed that was written in the clear before its memory was marked
    encrypted ("sealed 2 items of agent-1/personal written before it was marked encrypted")."""


class StopSummary(OperatorModel):
    """How the stopped session's summary went (§11.8)."""

    stored: bool
    rev: int | None
    skipped: str | None
    warn: bool
    detail: str


class AgentStopped(OperatorModel):
    agent_id: str
    session_id: str
    status: str
    exit_code: int | None
    summary: StopSummary


class AgentRestarted(AgentStarted):
    stopped: AgentStopped


class ChoirdShutdown(OperatorModel):
    pid: int
    agents_running: int


class ChoirdRestarting(OperatorModel):
    """`choird.restart`'s answer, sent before choird stops serving and re-executes itself."""

    pid: int
    """choird's pid, which the re-executed choird keeps."""
    agents_running: int
    """The agents left running, which the re-executed choird adopts."""


class ImageBuilt(OperatorModel):
    """The result of `agent build`."""

    agent_id: str
    tag: str
    image_id: str
    built: bool
    version: ImageVersion


class UpdateOutcome(Sparse):
    """One agent's update: `skipped`, `built`, `redeployed` (with its stop and start) or
    `failed`, and why."""

    agent_id: str
    outcome: str
    reason: str
    stopped: AgentStopped | None = None
    started: AgentStarted | None = None


class RolledBack(Sparse):
    """The result of `agent rollback`: the image the agent now runs (or, stopped, starts
    with), whether a commit had to be built for it, and the redeploy when it was running."""

    agent_id: str
    outcome: str
    """`redeployed` (it was running) or `pinned` (its next start runs the image)."""
    reason: str
    image: ImageBuilt
    stopped: AgentStopped | None = None
    started: AgentStarted | None = None


class UpdateAll(OperatorModel):
    agents: list[UpdateOutcome]
    failed: int


# -- sessions ---------------------------------------------------------------------------------


class SessionList(OperatorModel):
    sessions: list[SessionView]


class SessionEvents(OperatorModel):
    session_id: str
    events: list[EventView]
    next_rev: int
    """Read on from here for what came after."""


class ArtifactChunk(OperatorModel):
    """A chunk of the whole event behind a preview; `data` is base64."""

    session_id: str
    rev: int
    sha256: str
    size: int
    offset: int
    data: str
    next_offset: int | None
    """None once the end is reached."""


class SessionCores(OperatorModel):
    session_id: str
    status: str
    cores: list[CoreView]


class CancelRequested(OperatorModel):
    session_id: str
    job_name: str
    requested: bool


class CompactRequested(OperatorModel):
    session_id: str
    lane: str | None
    requested: bool


class InterruptedCall(OperatorModel):
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


class ApprovalList(OperatorModel):
    approvals: list[ApprovalView]


class WorkspaceView(OperatorModel):
    name: str
    path: str
    exists: bool
    leased_to: str | None
    session_id: str | None
    leased_at: str | None


class WorkspaceList(OperatorModel):
    workspaces: list[WorkspaceView]


class WorkspaceReset(Sparse):
    name: str
    path: str
    removed: int
    """Top-level entries removed."""
    stopped: AgentStopped | None = None
    """The agent that held the workspace, stopped first (only when there was one)."""


class ModelView(OperatorModel):
    name: str
    provider: str
    model: str
    label: str | None
    demo: bool
    secret: str | None


class TtsView(OperatorModel):
    name: str
    provider: str
    model_id: str | None


class ModelList(OperatorModel):
    models: list[ModelView]
    tts: list[TtsView]


class VoiceProfileView(OperatorModel):
    name: str
    tts: str
    voice_id: str
    output_format: str | None


class VoiceList(OperatorModel):
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


class BindingSwitched(OperatorModel):
    agent_id: str
    session_id: str
    role: str
    name: str
    previous: str | None
    config_version: int


# -- config and secrets -----------------------------------------------------------------------


class ChangeView(OperatorModel):
    op: str
    source: str
    path: str
    scope: str
    action: str


class ConfigChanges(OperatorModel):
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


class ConfigApplied(OperatorModel):
    config_version: int
    pushed: list[str]
    """The sessions told."""
    changes: list[ChangeView]
    lines: list[str]
    pending: list[str] = []
    """Changes (of this apply or an earlier one) that run only after a choird restart."""


class ConfigShown(OperatorModel):
    config_version: int
    config_hash: str
    staged: bool
    config: JsonObject
    """The running config (names of secrets only)."""
    pending: list[ChangeView] = []
    """Applied changes that wait for a choird restart: `config` shows what runs until then."""
    pending_lines: list[str] = []


class SecretView(OperatorModel):
    name: str
    set: bool
    referenced_by: list[str]


class SecretList(OperatorModel):
    secrets: list[SecretView]
    missing: list[str]


class SecretsPushed(OperatorModel):
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


class ChatSent(Sparse):
    session_id: str
    injected: bool
    message_id: str | None
    """The message's id; for a command, the id its replies answer (`in_reply_to`)."""
    after_seq: int
    """The latest kept reply's seq: follow `chat.replies` from here."""
    durable: bool
    command: str | None = None
    """Only for a command: the catalogue command it ran (None: a usage error); its answer
    comes as `command…` replies."""


class ChatReply(OperatorModel):
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


# -- memory and knowledge ---------------------------------------------------------------------


class MemoryHitView(OperatorModel):
    """One search result and where it comes from."""

    id: str
    store: str
    score: float
    """Higher is better; its scale depends on the mode (cosine, text rank, fused rank)."""
    text: str
    session_id: str | None
    tier: str | None
    kind: str | None
    first_rev: int | None
    last_rev: int | None
    """The session events a chunk was cut from (None for summaries and knowledge)."""
    name: str | None
    """A knowledge item's name."""
    loc: str | None = None
    """A knowledge item's place in the hierarchy (None: none, or a session hit)."""
    type: str | None = None
    """A knowledge item's type (None for a session hit)."""
    tags: list[str] = Field(default_factory=list)
    """A knowledge item's tags."""
    memory: str | None = Field(default=None, exclude_if=lambda memory: memory is None)
    """A knowledge item's memory: system, knowledge, app or personal (left out for a session
    hit)."""
    user: str | None = None
    """Whose it is: a personal item's user, or the user of the session it was derived from
    (None: nobody's)."""


class MemorySearch(OperatorModel):
    agent_id: str
    store: str
    mode: str
    """The mode that ran: `text` when semantic or hybrid had no query vector."""
    asked_mode: str
    fallback: str | None
    """Why the mode that ran is not the one asked (None when it is)."""
    hits: list[MemoryHitView]


class ChunkView(OperatorModel):
    """A session chunk (tiers 2-3)."""

    id: str
    session_id: str
    tier: str
    kind: str
    chunk_index: int
    first_rev: int | None
    last_rev: int | None
    text: str
    has_vector: bool
    created_at: str | None


class KnowledgeView(OperatorModel):
    """A knowledge item (tier 4)."""

    agent_id: str
    id: str
    name: str
    """Its unique name: every command addresses it by name, alias or id."""
    aliases: list[str]
    """Other names it answers to, sorted."""
    version: int
    """1 when added, one more for each write of its content (`knowledge history`)."""
    text: str
    metadata: JsonObject
    created_at: str | None
    updated_at: str | None
    has_vector: bool
    loc: str | None = None
    """Its place in the hierarchy (`projects:choir:design`; None: none)."""
    type: str = "info"
    """system, record, info or abstract."""
    tags: list[str] = Field(default_factory=list)
    """Its labels (from its metadata)."""
    data: JsonObject = Field(default_factory=dict)
    """Structured data beside the text."""
    edges: list[KnowledgeEdgeView] | None = None
    """Its edges, both directions (`knowledge.show`; None where they were not read)."""
    memory: str = "knowledge"
    """The memory that holds it: system, knowledge, app or personal."""
    user: str | None = None
    """A personal item's user (its DM); None for the other memories."""
    provenance: ProvenanceView | None = Field(default=None, exclude_if=lambda p: p is None)
    """Who wrote its current content; left out when unknown (written before it was kept)."""


class ProvenanceView(OperatorModel):
    """Where a knowledge item's content came from: an agent's tool call in a session, or an
    operator's front end (`by`). Only the keys that apply are sent."""

    agent: str | None = Field(default=None, exclude_if=lambda v: v is None)
    session_id: str | None = Field(default=None, exclude_if=lambda v: v is None)
    rev: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """The session's committed revision when the call ran; the call's events follow it."""
    call_id: str | None = Field(default=None, exclude_if=lambda v: v is None)
    tool: str | None = Field(default=None, exclude_if=lambda v: v is None)
    user: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The session's DM: the user the agent talked to."""
    by: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The operator front end that wrote it (`choirctl`, `console`, a DM name)."""


class SourceEvent(OperatorModel):
    """One event of the session that wrote an item: the tool call, the user message before it."""

    rev: int
    lane: str
    kind: str
    """`user_msg`, `tool_call_requested`, `tool_result_committed`…"""
    text: str
    """The message, or the call's tool and arguments, or its result's summary (redacted)."""
    created_at: str | None


class KnowledgeSource(OperatorModel):
    """`knowledge.source`: where an item's content came from, with its source events."""

    agent_id: str
    name: str
    provenance: ProvenanceView | None
    """None: written before provenance was kept (source unknown)."""
    events: list[SourceEvent]
    """The user message before the call, the call and its result (empty for an operator's
    write or an unknown source)."""
    note: str
    """One line on what was found (`source unknown`, `written by the operator via choirctl`)."""


class KnowledgeExpansion(OperatorModel):
    """`knowledge.expand`: an item of the summary tree one step down — a roll-up's session
    summaries, a summary's archives and tool leaf (`sources`), or a leaf's session events
    (`messages`, a page: `next_offset` reads on)."""

    agent_id: str
    item: KnowledgeView
    level: str
    """`rollup`, `summary`, `archive` or `tools`: where the item sits in the tree."""
    sources: list[KnowledgeView] = Field(default_factory=list)
    session_id: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """A leaf's session; None for a roll-up or a summary."""
    from_rev: int | None = Field(default=None, exclude_if=lambda v: v is None)
    upto_rev: int | None = Field(default=None, exclude_if=lambda v: v is None)
    messages: list[SessionMessage] = Field(default_factory=list)
    """A leaf's events in its rev range, who said what (redacted)."""
    next_offset: int | None = None


class KnowledgeEdgeView(OperatorModel):
    """An edge seen from one item."""

    edge: str
    """relates_to, derived_from or supersedes."""
    direction: str
    """`out`: this item is the edge's source (it `edge` the other); `in`: its target."""
    name: str
    """The other item's name."""
    id: str
    """The other item's id."""


class KnowledgeLinked(OperatorModel):
    """`knowledge.link`: the edge's two ends, by their names now."""

    agent_id: str
    source: str
    target: str
    edge: str
    new: bool
    """False: the edge was there already (nothing written)."""


class KnowledgeUnlinked(OperatorModel):
    agent_id: str
    source: str
    target: str
    removed: int
    """Edges removed (a removal of none is refused, not answered)."""


class MemoryItem(OperatorModel):
    """`memory.show`: a session chunk with the events it was cut from, or a knowledge item."""

    agent_id: str
    store: str
    chunk: ChunkView | None
    knowledge: KnowledgeView | None
    events: list[EventView]
    """A chunk's source events (its rev range, from the session's stored events)."""
    events_truncated: bool
    """More events in the range than one answer carries: read them with `session events`."""


class TierCounts(OperatorModel):
    mid_term: int
    long_term_summary: int
    long_term_detail: int


class AgentMemoryStats(OperatorModel):
    agent_id: str
    chunks: TierCounts
    sessions: TierCounts
    """Sessions with chunks in each tier."""
    knowledge_items: int
    vectors_missing: int
    """Searchable rows (mid-term, summaries, knowledge) still without a vector."""
    index_bytes: dict[str, int]
    """On-disk size of each search index."""
    reembed: str | None = None
    """Why and how to re-embed, when the agent's vectors are another embedding model's
    (searched by text until then); None when they are the configured model's."""
    vector_coverage: float | None = None
    """The share of searchable rows (mid-term, summaries, knowledge) with their vector, 0-1;
    None when there are none."""
    sessions_pending: int = 0
    """Ended sessions not put into memory yet (their close is queued or under way)."""
    sessions_unsummarized: int = 0
    """Sessions in memory whose agent wrote no session summary (a crash, a timeout)."""
    tool_rows: int = 0
    """Tool calls told in a sentence (`memory backfill-tools`), in every tier."""
    tool_sessions_undescribed: int = 0
    """Sessions in memory whose tool calls have no rows yet: `memory backfill-tools` fills them."""
    tool_calls_undescribed: int = 0
    """The tool results of those sessions."""
    tree_depth: int = 0
    """Levels of the summary tree: 0 none, 1 compaction archives only, 2 session summaries
    linked to them (seed design 004)."""


class EmbeddingView(OperatorModel):
    """choird's embedding service."""

    provider: str
    """`local` or the configured model id."""
    dimensions: int
    queue_depth: int
    """Chunks waiting for (or in) a batch."""
    breaker: str
    """`closed` (calls go through), `open` (the provider failed: searches by text; once its
    cool-down is over the next call probes it) or `half_open` (that probe is out)."""


class MemoryStats(OperatorModel):
    agents: list[AgentMemoryStats]
    embedding: EmbeddingView


class KnowledgeList(OperatorModel):
    agent_id: str
    items: list[KnowledgeView]
    next_after: str | None
    """Pass as `after` for the next page; None after the last."""


class KnowledgeStored(OperatorModel):
    item: KnowledgeView
    updated: bool
    """An item with that name existed and its content was written (same id)."""
    embedded: bool
    """Its vector is stored: semantic search finds it now (else by text, until a backfill)."""
    sealed: bool = Field(default=False, exclude_if=lambda sealed: not sealed)
    """Stored sealed in an encrypted memory: never embedded, found by its name, loc, type and
    tags only (left out when False)."""


class KnowledgeVersionView(OperatorModel):
    """One version of a knowledge item's content."""

    version: int
    name: str
    """The item's name when the version was written."""
    text: str
    metadata: JsonObject
    written_at: str | None
    restored_from: int | None
    """The version this one restored (None: an ordinary write)."""
    loc: str | None = None
    type: str = "info"
    data: JsonObject = Field(default_factory=dict)
    provenance: ProvenanceView | None = Field(default=None, exclude_if=lambda p: p is None)
    """Who wrote this version; left out when unknown."""


class KnowledgeHistory(OperatorModel):
    """`knowledge.history`: the item as it is, and its versions, newest first."""

    item: KnowledgeView
    versions: list[KnowledgeVersionView]


class KnowledgeDeleted(OperatorModel):
    agent_id: str
    ref: str
    deleted: bool


class MemoryAbout(OperatorModel):
    """`memory.about`: the items an agent's sessions with a user wrote, oldest first."""

    agent_id: str
    user: str
    """The DM the items were learnt from."""
    items: list[KnowledgeView]


class MemoryForgotten(OperatorModel):
    """`memory.forget`: what was removed, by whom and when."""

    agent_id: str
    ref: str
    id: str
    """The forgotten item's id (the record of the forget keeps only it)."""
    versions: int
    """Versions removed with it."""
    by: str
    forgotten_at: str | None


class AgentReembedded(OperatorModel):
    """One agent's `memory reembed`: the model its vectors are now of, the one before."""

    agent_id: str
    model: str
    dims: int
    previous_model: str
    previous_dims: int
    embedded: int
    """Vectors stored by this run."""


class ReembedStopped(OperatorModel):
    """Where `memory reembed --all` stopped: the agent whose run failed, why (its refusal's
    wire code and one-line message), and the agents after it, not started."""

    agent_id: str
    code: str
    """The refusal's `ErrorCode` (`unavailable`, `conflict`, `invalid_request`, `internal`)."""
    message: str
    not_started: list[str]


class MemoryReembedded(OperatorModel):
    """The result of `memory reembed`: the agents finished, in order; with `--all`, where the
    run stopped if an agent's failed (absent when every agent finished)."""

    agents: list[AgentReembedded]
    stopped: ReembedStopped | None = Field(default=None, exclude_if=lambda s: s is None)


class SessionMessage(OperatorModel):
    """One message of a session: who said it, or a tool call told in one sentence."""

    rev: int
    who: str
    """`user`, `user (injected)`, `agent` or `agent (core job <name>)`."""
    text: str
    cut: bool = False
    """The text was cut (the whole event is in `session events`)."""


class SessionMessages(OperatorModel):
    session_id: str
    agent_id: str
    messages: list[SessionMessage]
    next_offset: int | None
    """Pass as `offset` for the next page; None after the last."""


class AgentToolsBackfilled(OperatorModel):
    """One agent's `memory backfill-tools`."""

    agent_id: str
    sessions: int
    """Closed sessions whose tool calls got their rows by this run."""
    rows: int
    """Tool-call rows stored by this run (one per call)."""
    already: int
    """Closed sessions with tool calls that had their rows before this run."""


class MemoryToolsBackfilled(OperatorModel):
    """The result of `memory backfill-tools`."""

    agents: list[AgentToolsBackfilled]


# -- gateways -----------------------------------------------------------------------------


class GatewayDmView(OperatorModel):
    """A DM on a gateway: who may talk there, and the agent it reaches now (§19.4)."""

    name: str
    user_id: str
    """The user's id on the gateway (Telegram: also the private chat's id)."""
    admin: bool
    agent_id: str | None
    """The agent whose running session holds the DM; None: none (or unknown, see
    `bindings_known`)."""
    session_id: str | None
    default_agent: str | None
    """The agent whose default DM this is."""


class GatewayDetail(OperatorModel):
    """One gateway in `gateway status`: never a token, never a message's text."""

    name: str
    type: str
    state: str
    """`running`; a bot's `connecting`, `backing_off`, `invalid_token` (rejected or revoked),
    `no_token`, `stopped`; `starting` before choird's startup step 8; `pending_restart` for
    one `config apply` added (it starts when choird restarts)."""
    since: str | None
    """When it entered that state (a bot's)."""
    pending: str | None
    """What an applied config changed that waits for a choird restart: `added`, `changed`
    (it runs as it started) or `removed` (it runs until then)."""
    bot: str | None
    """A bot's @username, once Telegram answered."""
    secret: str | None
    """The name of a bot's token secret (never its value): what `choirctl secret set` takes."""
    last_poll_at: str | None
    last_update_at: str | None
    """When the bot last received an update."""
    queued: int | None
    """Messages waiting to be sent; None for the console DM (it has no send queue)."""
    failed: int | None
    """Messages given up since choird started."""
    last_error: str | None
    """The latest failure, of polling or of a send (kept after the bot recovered)."""
    last_error_at: str | None
    dms: list[GatewayDmView]


class GatewayStatus(OperatorModel):
    """`gateway status`: every gateway choird serves or will at its next start."""

    gateways: list[GatewayDetail]
    bindings_known: bool
    """False while Postgres does not answer: which agent holds each DM is unknown."""


class InjectRequested(OperatorModel):
    session_id: str
    job_name: str
    requested: bool


# -- usage and spend ----------------------------------------------------------------------------


class SpendView(OperatorModel):
    """An agent's known LLM spend this UTC day and month, and its caps (null: none)."""

    agent_id: str
    day: str
    day_usd: float
    month_usd: float
    day_cap_usd: float | None
    month_cap_usd: float | None
    unknown_cost_calls: int
    """Calls this month whose cost is unknown (no price and none reported): not in the sums."""
    cap_reached: str | None
    """Which cap stops the agent's next LLM call, and how to raise it; null: none is reached."""


class UsageRow(OperatorModel):
    """One group of billed calls (LLM, embedding, TTS)."""

    key: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    characters: int = 0
    """Characters billed (TTS) or embedded; 0 for LLM calls."""
    latency_ms_avg: int
    cost_usd: float | None
    """Sum of the known costs; null when no call of the group has a known cost."""
    unknown_cost_calls: int
    """Calls whose cost is unknown, left out of `cost_usd` (never counted as 0)."""


class JobUsage(OperatorModel):
    agent_id: str
    job_id: str
    lane: str
    calls: int
    tokens: int
    cost_usd: float | None
    unknown_cost_calls: int


class UsageReport(OperatorModel):
    """The answer of `usage`."""

    by: str
    agent_id: str | None
    model: str | None
    kind: str | None = None
    """The one kind of call counted; null: every kind."""
    since: str | None
    """The first UTC day counted (`YYYY-MM-DD`); null: from the first call."""
    rows: list[UsageRow]
    total: UsageRow
    top_jobs: list[JobUsage]
    """The costliest core jobs in the same span."""
    spend: list[SpendView]
    """Each agent's spend today and this month against its caps."""


# -- the recovery inbox -----------------------------------------------------------------------


class InboxItemView(OperatorModel):
    """One thing waiting for a human after a restart, with what decides it."""

    item_id: str
    kind: str
    """`held_job`, `unknown_outcome`, `approval`, `approval_timed_out` or `failed_apply`."""
    agent_id: str | None
    session_id: str | None
    title: str
    """What waits, on one line."""
    context: list[str]
    """What to decide with: the calls and their arguments, the proposal, the failure."""
    since: str
    """When it started waiting (ISO 8601)."""
    choices: list[str]
    hint: str
    """The `choirctl inbox resolve` command that decides it."""


class InboxList(OperatorModel):
    items: list[InboxItemView]


class InboxResolved(OperatorModel):
    item_id: str
    choice: str
    outcome: str
    """What the owning verb did, on one line."""
    answer: JsonObject
    """That verb's own answer."""
