"""The request payloads of the operator verbs (choirctl, the TUI, the gateway -> choird).

One model per verb shape, `extra="forbid"` like every wire model: a misspelled option is an
error naming the field, never silently ignored. `choir.protocol.operator.contract` says which
verb takes which.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from choir.protocol.base import WireModel
from choir.protocol.log.lanes import JobName, LaneId

MAX_EVENTS: Final = 1000
"""Most events one `session.events` answer (or snapshot page) carries."""


class NoArguments(WireModel):
    """Verbs that take nothing (`status`, `agent.list`, `config.apply`, …)."""


class AgentRef(WireModel):
    agent_id: str = Field(min_length=1)
    """An agent id from config.json."""


class AgentRollback(WireModel):
    """`agent.rollback`: the agent, and where to go back to."""

    agent_id: str = Field(min_length=1)
    """An agent id from config.json."""
    to: str | None = Field(default=None, min_length=1)
    """A kept image (its id, tag or image version) or a commit of the agent repo (built
    first); None: the newest kept image older than the one the agent runs."""


class StartOverrides(WireModel):
    """Start-time bindings replacing the agent's defaults (§17.1 start flags); None keeps it."""

    workspace: str | None = None
    llm: str | None = None
    voice_profile: str | None = None
    git_identity: str | None = None
    notion: str | None = None
    email: str | None = None
    dm: str | None = None
    """Required from choirctl (it has no DM of its own); the gateway's /start passes its own."""


class AgentStart(WireModel):
    agent_id: str
    overrides: StartOverrides = StartOverrides()
    new_session: bool = False
    """Start a fresh session even when the previous one could be resumed."""
    resume: str | None = None
    """Resume this session instead of choosing one."""
    memory_key: str | None = Field(default=None, repr=False, exclude_if=lambda key: key is None)
    """The key of the agent's encrypted memories (64 hex digits; `choirctl agent start
    --memory-key-file`): choird checks it and holds it in memory only, never stores, logs or
    returns it."""


class SessionRef(WireModel):
    session_id: str = Field(min_length=1)
    """A session id, as `session list` shows it."""


class SessionList(WireModel):
    agent_id: str | None = None
    """Only this agent's sessions; None lists every agent's."""
    limit: int = Field(default=50, ge=1, le=1000)
    """Newest sessions first, at most this many."""


class SessionEvents(WireModel):
    session_id: str = Field(min_length=1)
    """The session whose committed events to read."""
    from_rev: int | None = Field(default=None, ge=1)
    """First revision wanted; None means the last `limit` events."""
    limit: int = Field(default=100, ge=1, le=MAX_EVENTS)
    """Most events to return (follow: most events of the initial snapshot when `from_rev` is
    None)."""
    follow: bool = False
    """Stream: the snapshot, then new events as heartbeats store them, until the session ends."""


class SessionArtifact(WireModel):
    session_id: str = Field(min_length=1)
    """The session holding the event."""
    rev: int = Field(ge=1)
    """The revision of an event committed as a preview."""
    offset: int = Field(default=0, ge=0)
    """First byte of its artifact wanted."""


class SessionCancel(WireModel):
    session_id: str = Field(min_length=1)
    """The active session running the job."""
    job_name: JobName
    """The core job to cancel, as `session cores` names it."""


class SessionCompact(WireModel):
    session_id: str = Field(min_length=1)
    """The active session to compact."""
    lane: LaneId | None = None
    """Only this lane (`edge` or `core:<job>`); None compacts every lane."""


RecoverChoice = Literal["resume", "read_only", "abort"]
"""What the operator decides for calls of unknown outcome."""


class SessionRecover(WireModel):
    session_id: str
    """The session to inspect or decide for."""
    job_name: str | None = None
    """Decide for this held job only; None decides every held job."""
    choice: RecoverChoice | None = None
    """The decision; None only lists the interrupted calls."""


class ApprovalList(WireModel):
    all: bool = False
    """Include resolved approvals (approved, rejected, timed out), not only pending ones."""
    agent_id: str | None = None
    """Only this agent's approvals."""


class ApprovalRef(WireModel):
    approval_id: str = Field(min_length=1)
    """An approval id, as `approval list` shows it."""


class ApprovalAnswer(WireModel):
    approval_id: str = Field(min_length=1)
    """The pending approval to answer."""
    by: str = Field(default="choirctl", min_length=1, max_length=64)
    """Who answers, recorded as `resolved_by` (`choirctl`, `console`, a DM name)."""
    agent_id: str | None = None
    """Only if it is this agent's (a regular DM answers only its bound agent's, §19.6)."""
    restart: bool = Field(default=False, exclude_if=lambda restart: not restart)
    """Approve a config change that only takes effect after a restart, and restart what it
    needs (the agents it names; choird's own changes wait for `choir restart`). Without it such
    an approval is refused and stays pending."""


class ToolRegister(WireModel):
    """`tool.register` (§8.10 phase 2): a human's implementation of an approved tool proposal."""

    agent_id: str = Field(min_length=1)
    """The agent whose repo holds the proposal branch."""
    branch: str = Field(min_length=1)
    """The proposal branch, `proposal/<session>/<tool>`, as `approval show` names it."""


class ApprovalExtend(WireModel):
    """Answer a paused job's budget question (`budget_extension`): extend by `amount`."""

    approval_id: str = Field(min_length=1)
    """The pending `budget_extension` approval."""
    amount: int = Field(ge=1)
    """How much more of the budget: steps, tool calls, tokens or ms (the question says which)."""
    by: str = Field(default="choirctl", min_length=1, max_length=64)
    """Who answers, recorded as `resolved_by`."""
    agent_id: str | None = None
    """Only if it is this agent's (a regular DM answers only its bound agent's, §19.6)."""


class WorkspaceRef(WireModel):
    name: str = Field(min_length=1)
    """A workspace name from config.json."""


class ModelSet(WireModel):
    agent_id: str = Field(min_length=1)
    """The running agent to switch."""
    llm: str = Field(min_length=1)
    """A model name from config.json's `models`."""


class VoiceSet(WireModel):
    agent_id: str = Field(min_length=1)
    """The running agent to switch."""
    voice_profile: str = Field(min_length=1)
    """A profile name from config.json's `voice_profiles`."""


class LogsRequest(WireModel):
    source: str = Field(min_length=1)
    """`choird` or an agent id."""
    follow: bool = True
    """After the snapshot, keep sending lines as they are written (tail -f)."""


class ChatSend(WireModel):
    agent_id: str
    """The agent to talk to; it must be running and bound to a console DM."""
    text: str = Field(min_length=1, max_length=32_000)
    """A message, or a command (§19.3): `/inject <instruction>` for edge's next safe point
    (§12.8), `/help` lists the others."""


class ChatReplies(WireModel):
    agent_id: str
    """Whose replies to follow."""
    after_seq: int = Field(default=0, ge=0)
    """Skip kept replies up to this sequence number."""


MEMORY_MAX_LIMIT: Final = 100
"""Most hits one `memory.search` answers (the store's own cap)."""


class MemorySearch(WireModel):
    agent_id: str = Field(min_length=1)
    """Whose memory to search (any configured agent: the operator reads every store)."""
    query: str = Field(default="", max_length=4000)
    """The query text; may be empty only for `session_detail` (then every detail chunk)."""
    store: str = "session"
    """`session` (mid-term chunks, long-term summaries) or `knowledge`; checked by choird, which
    names the valid ones."""
    mode: str = "hybrid"
    """`semantic`, `text`, `hybrid`, (session store) `session_detail` or (knowledge store)
    `relevance`. Semantic and hybrid search by text when no embedder answers, relevance without
    semantic similarity; the answer says so."""
    session_id: str | None = None
    """The promoted session to open (`session_detail` only)."""
    limit: int = Field(default=10, ge=1, le=MEMORY_MAX_LIMIT)
    """Most hits, best first."""
    loc: str | None = None
    """Knowledge: keep items at this loc or below it (`projects:choir`)."""
    type: str | None = None
    """Knowledge: keep items of this type (system, record, info, abstract)."""
    tags: list[str] = Field(default_factory=list)
    """Knowledge: keep items carrying all of these tags."""
    memory: str | None = None
    """Knowledge: keep items of this memory (system, knowledge, app or personal; None: all)."""
    user: str | None = None
    """Knowledge: keep personal items of this user (a DM name); with memory personal or alone."""


class MemoryItemRef(WireModel):
    item_id: str = Field(min_length=1)
    """A session chunk's or knowledge item's id (a UUID), as `memory search` shows it."""
    agent_id: str | None = None
    """Whose memory holds it; None looks in every configured agent's."""


class MemoryStatsRequest(WireModel):
    agent_id: str | None = None
    """One agent's memory; None: every configured agent's."""


class KnowledgeList(WireModel):
    agent_id: str = Field(min_length=1)
    """Whose knowledge."""
    limit: int = Field(default=50, ge=1, le=1000)
    """Most items, oldest first."""
    after: str | None = None
    """The previous page's last id (`next_after`): the page after it."""
    loc: str | None = None
    """Keep items at this loc or below it (`projects:choir`)."""
    type: str | None = None
    """Keep items of this type (system, record, info, abstract)."""
    tags: list[str] = Field(default_factory=list)
    """Keep items carrying all of these tags."""
    memory: str | None = None
    """Keep items of this memory (system, knowledge, app or personal; None: all)."""
    user: str | None = None
    """Keep personal items of this user (a DM name); with memory personal or alone."""


class KnowledgeRef(WireModel):
    agent_id: str = Field(min_length=1)
    """Whose knowledge."""
    ref: str = Field(min_length=1)
    """An item's name, one of its aliases, or its id."""


class KnowledgeExpand(WireModel):
    """`knowledge expand`: one step down the summary tree from an item."""

    agent_id: str = Field(min_length=1)
    ref: str = Field(min_length=1)
    """A roll-up's, a session summary's, an archive's or a tool leaf's name, alias or id."""
    offset: int | None = Field(default=None, ge=0)
    """For a leaf: the revision to read its events on after (None: its first; the previous
    page's `next_offset`)."""
    limit: int = Field(default=50, ge=1, le=500)


class KnowledgePut(WireModel):
    agent_id: str = Field(min_length=1)
    """Whose knowledge to write (the operator may write any agent's)."""
    text: str = Field(min_length=1)
    """What to remember; choird refuses more than 32 KiB, naming the limit."""
    name: str | None = None
    """The item's name, the dedup key: the item it names (or whose alias it is) is written,
    else an item of that name is added (None: a name derived from the text)."""
    tags: list[str] = Field(default_factory=list)
    """Labels stored in the item's metadata."""
    loc: str | None = None
    """Its place in the hierarchy (`projects:choir:design`; "" clears it; None: unchanged or
    none)."""
    type: str | None = None
    """system, record, info or abstract (None: unchanged, or info for a new item)."""
    data: dict[str, Any] | None = None
    """Structured data beside the text, at most 16 KiB as JSON (None: unchanged or none)."""
    memory: str | None = None
    """Which of the agent's memories a new item goes to: system, knowledge, app or personal
    (None: knowledge); an existing item stays in its own."""
    user: str | None = None
    """A personal item's user: the DM (a key of `dms`) whose sessions see it."""
    kind: str | None = None
    """correction, preference, fact or task: its importance in relevance search (None: kept,
    or fact for a new item)."""
    by: str = Field(default="choirctl", min_length=1, max_length=64)
    """Who writes, recorded as the content's provenance (`choirctl`, `console`, a DM name)."""


class KnowledgeAdd(WireModel):
    agent_id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    """What to remember; choird refuses more than 32 KiB, naming the limit."""
    name: str | None = None
    """Its name: refused when an item answers to it (None: a name derived from the text)."""
    tags: list[str] = Field(default_factory=list)
    loc: str | None = None
    """Its place in the hierarchy (`projects:choir:design`; "" clears it; None: unchanged or
    none)."""
    type: str | None = None
    """system, record, info or abstract (None: unchanged, or info for a new item)."""
    data: dict[str, Any] | None = None
    """Structured data beside the text, at most 16 KiB as JSON (None: unchanged or none)."""
    memory: str | None = None
    """Which of the agent's memories it goes to: system, knowledge, app or personal (None:
    knowledge)."""
    user: str | None = None
    """A personal item's user: the DM (a key of `dms`) whose sessions see it."""
    kind: str | None = None
    """correction, preference, fact or task: its importance in relevance search (None: kept,
    or fact for a new item)."""
    by: str = Field(default="choirctl", min_length=1, max_length=64)
    """Who writes, recorded as the content's provenance (`choirctl`, `console`, a DM name)."""


class KnowledgeWrite(WireModel):
    agent_id: str = Field(min_length=1)
    ref: str = Field(min_length=1)
    """The item's name, one of its aliases, or its id."""
    text: str | None = Field(default=None, min_length=1)
    """Its new content; the previous one is kept as a version (None: the text is kept, the
    write changes tags, loc, type or data)."""
    tags: list[str] = Field(default_factory=list)
    """New labels (empty: the item keeps its own)."""
    loc: str | None = None
    """Its place in the hierarchy (`projects:choir:design`; "" clears it; None: unchanged or
    none)."""
    type: str | None = None
    """system, record, info or abstract (None: unchanged, or info for a new item)."""
    data: dict[str, Any] | None = None
    """Structured data beside the text, at most 16 KiB as JSON (None: unchanged or none)."""
    kind: str | None = None
    """correction, preference, fact or task: its importance in relevance search (None: kept,
    or fact for a new item)."""
    by: str = Field(default="choirctl", min_length=1, max_length=64)
    """Who writes, recorded as the content's provenance (`choirctl`, `console`, a DM name)."""


class KnowledgeRename(WireModel):
    agent_id: str = Field(min_length=1)
    ref: str = Field(min_length=1)
    """The item's name, one of its aliases, or its id."""
    name: str = Field(min_length=1)
    """Its new name: not one any other item answers to."""


class KnowledgeAlias(WireModel):
    agent_id: str = Field(min_length=1)
    ref: str = Field(min_length=1)
    """The item's name, one of its aliases, or its id."""
    alias: str = Field(min_length=1)
    """Another name for it: not one any other item answers to."""


class KnowledgeLink(WireModel):
    agent_id: str = Field(min_length=1)
    ref: str = Field(min_length=1)
    """The edge's source: an item's name, one of its aliases, or its id."""
    target: str = Field(min_length=1)
    """The edge's target, named the same ways."""
    edge: str = Field(min_length=1)
    """relates_to, derived_from (the source was made from the target) or supersedes (the
    source replaces the target)."""


class KnowledgeUnlink(WireModel):
    agent_id: str = Field(min_length=1)
    ref: str = Field(min_length=1)
    """The edge's source: an item's name, one of its aliases, or its id."""
    target: str = Field(min_length=1)
    """The edge's target, named the same ways."""
    edge: str | None = None
    """The edge type to remove (None: every edge from the source to the target)."""


class KnowledgeHistoryRequest(WireModel):
    agent_id: str = Field(min_length=1)
    ref: str = Field(min_length=1)
    """The item's name, one of its aliases, or its id."""
    limit: int = Field(default=50, ge=1, le=1000)
    """Most versions, newest first."""


class KnowledgeRestore(WireModel):
    agent_id: str = Field(min_length=1)
    ref: str = Field(min_length=1)
    """The item's name, one of its aliases, or its id."""
    version: int = Field(ge=1)
    """The version whose content becomes the newest version (`knowledge history`)."""
    by: str = Field(default="choirctl", min_length=1, max_length=64)
    """Who writes, recorded as the content's provenance (`choirctl`, `console`, a DM name)."""


class MemoryAbout(WireModel):
    """`memory about`: what an agent learnt from one user."""

    agent_id: str = Field(min_length=1)
    user: str = Field(min_length=1)
    """The user: a DM's name (config.json `dms`) or its user id on its gateway."""
    limit: int = Field(default=100, ge=1, le=1000)
    """Most items, oldest first."""


class MemoryForget(WireModel):
    """`memory forget`: remove a knowledge item from every memory store and index."""

    agent_id: str = Field(min_length=1)
    ref: str = Field(min_length=1)
    """The item's name, one of its aliases, or its id."""
    by: str = Field(default="choirctl", min_length=1, max_length=64)
    """Who forgets it, recorded with the time (`choirctl`, `choir tui`, a DM name)."""


class MemoryReembed(WireModel):
    """`memory reembed`: one agent (`agent_id`) or every agent (`all`)."""

    agent_id: str | None = Field(default=None, min_length=1)
    all: bool = False
    missing: bool = False
    """Only the rows stored without a vector (after an embedding outage); refused for an agent
    whose vectors are of another model."""


class SessionMessages(WireModel):
    """`session messages`: a page of a session's messages in order."""

    session_id: str = Field(min_length=1)
    offset: int = Field(default=0, ge=0)
    """The revision to read on after (0: the start; the previous page's `next_offset`)."""
    limit: int = Field(default=50, ge=1, le=500)


class MemoryBackfillTools(WireModel):
    """`memory backfill-tools`: one agent (`agent_id`) or every agent (`all`)."""

    agent_id: str | None = Field(default=None, min_length=1)
    all: bool = False


class SessionInject(WireModel):
    session_id: str = Field(min_length=1)
    """The active session running the job."""
    job_name: JobName
    """The core job to instruct, as `session cores` names it."""
    text: str = Field(min_length=1, max_length=32_000)
    """The instruction; the job reads it at its next step (§12.8)."""


UsageGrouping = Literal["day", "model", "agent", "job", "agent_day", "kind"]
UsageKind = Literal["llm", "embedding", "tts"]
"""What kind of billed call: an LLM call, choird's embedding of memory, a TTS call."""
"""How `usage` groups calls: per UTC day, model, agent, core job (edge's calls as `edge`), or
per agent and day (the console's Usage view)."""


class UsageRequest(WireModel):
    """`usage`: LLM calls and what they cost, grouped."""

    agent_id: str | None = Field(default=None, min_length=1)
    """One agent's calls; None: every agent's."""
    model: str | None = Field(default=None, min_length=1)
    """One named model's calls; None: every model's."""
    since: str | None = Field(default=None, pattern=r"^(\d{4}-\d{2}-\d{2}|\d{1,4}d)$")
    """From this UTC day (`2026-11-01`) or this many days back (`7d`: today and the 6 before);
    None: from the first call."""
    by: UsageGrouping = "day"
    """The grouping."""
    kind: UsageKind | None = None
    """One kind of call; None: every kind."""


InboxChoice = Literal["resume", "read_only", "abort", "approve", "reject", "retry", "dismiss"]
"""What the operator may decide for a recovery inbox item; each kind takes some of them."""


class InboxList(WireModel):
    """`inbox.list`: what waits for a human after a restart (the recovery inbox)."""

    agent_id: str | None = None
    """Only this agent's items."""


class InboxResolve(WireModel):
    """`inbox.resolve`: decide one recovery inbox item through the verb that owns it."""

    item_id: str = Field(min_length=1)
    """An item id, as `inbox list` shows it (`held:<session>:<job>`, `approval:<id>`, …)."""
    choice: InboxChoice
    """One of the item's `choices`."""
    by: str = Field(default="choirctl", min_length=1, max_length=64)
    """Who decides (recorded where the owning verb records it)."""
