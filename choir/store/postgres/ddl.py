"""Every table choir creates, as numbered migrations recorded in `choir_control.schema_version`.

There are two scopes: `control` (the shared `choir_control` schema, §23.1) and `agent:<id>` (one
per agent schema, §23.2-23.3, templated with the schema name and embedding dimensions). Pending
migrations of a scope run in order inside one transaction, under an advisory lock so that two
starting daemons cannot interleave; rerunning is a no-op. A schema change is a new migration
appended to its list — never an edit of an applied one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from choir.errors import ConflictError
from choir.store.postgres.pool import Connection

CONTROL_SCHEMA: Final = "choir_control"
CONTROL_SCOPE: Final = "control"
MIGRATION_LOCK: Final = 0x63686F6972  # "choir": serialises schema changes across connections


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered schema change of a scope; applied once, recorded in `schema_version`."""

    version: int
    description: str
    sql: str
    """Statements. Agent migrations are templates with `{schema}` (quoted) and `{dims}`, so their
    literal braces are doubled; control migrations are used as written."""


_BOOTSTRAP: Final = """
CREATE SCHEMA IF NOT EXISTS choir_control;
CREATE TABLE IF NOT EXISTS choir_control.schema_version (
    scope       text NOT NULL,
    version     int NOT NULL,
    description text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, version)
);
"""

CONTROL_MIGRATIONS: Final = (
    Migration(
        1,
        "control plane tables",
        """
CREATE TABLE choir_control.agents (
    agent_id      text PRIMARY KEY,
    name          text NOT NULL,
    image_version text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    config        jsonb NOT NULL DEFAULT '{}'
);
CREATE TABLE choir_control.sessions (
    session_id        text PRIMARY KEY,
    agent_id          text NOT NULL REFERENCES choir_control.agents (agent_id),
    lease_id          text,
    status            text NOT NULL,
    started_at        timestamptz NOT NULL DEFAULT now(),
    ended_at          timestamptz,
    resource_bindings jsonb NOT NULL DEFAULT '{}',
    config_version    bigint,
    last_heartbeat_at timestamptz,
    ack_rev           bigint NOT NULL DEFAULT 0,
    head_hash         text
);
CREATE INDEX sessions_agent_idx ON choir_control.sessions (agent_id, started_at DESC);
CREATE TABLE choir_control.session_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id text NOT NULL REFERENCES choir_control.sessions (session_id),
    rev        bigint NOT NULL CHECK (rev > 0),
    event_type text NOT NULL,
    lane       text NOT NULL CHECK (lane = 'edge' OR lane LIKE 'core:%'),
    payload    jsonb NOT NULL,
    hash_prev  text NOT NULL,
    hash       text NOT NULL,
    created_at timestamptz NOT NULL,
    UNIQUE (session_id, rev)
);
CREATE TABLE choir_control.session_snapshots (
    session_id text NOT NULL REFERENCES choir_control.sessions (session_id),
    rev        bigint NOT NULL,
    snapshot   jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, rev)
);
CREATE TABLE choir_control.pending_approvals (
    id           text PRIMARY KEY,
    session_id   text REFERENCES choir_control.sessions (session_id),
    agent_id     text NOT NULL,
    request_type text NOT NULL,
    payload      jsonb NOT NULL,
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'approved', 'rejected', 'timed_out')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    resolved_at  timestamptz,
    resolved_by  text,
    CONSTRAINT pending_approvals_resolved_check CHECK ((status = 'pending') = (resolved_at IS NULL))
);
CREATE INDEX pending_approvals_open_idx
    ON choir_control.pending_approvals (created_at) WHERE status = 'pending';
CREATE TABLE choir_control.leases (
    resource_kind text NOT NULL,
    resource_name text NOT NULL,
    agent_id      text NOT NULL,
    session_id    text NOT NULL REFERENCES choir_control.sessions (session_id),
    acquired_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource_kind, resource_name)
);
CREATE INDEX leases_session_idx ON choir_control.leases (session_id);
""",
    ),
    Migration(
        2,
        "artifacts of previewed events",
        """
CREATE TABLE choir_control.session_artifacts (
    session_id text NOT NULL REFERENCES choir_control.sessions (session_id),
    sha256     text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size       bigint NOT NULL CHECK (size > 0),
    content    bytea NOT NULL DEFAULT '',
    complete   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, sha256),
    CHECK (length(content) <= size)
);
ALTER TABLE choir_control.session_events ADD COLUMN artifact jsonb;
""",
    ),
    Migration(
        3,
        "durable inbox of user messages",
        """
CREATE TABLE choir_control.session_inbox (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id    text NOT NULL UNIQUE,
    session_id    text NOT NULL REFERENCES choir_control.sessions (session_id),
    agent_id      text NOT NULL,
    push          bytea NOT NULL,
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'delivered', 'undelivered')),
    accepted_at   timestamptz NOT NULL,
    delivered_rev bigint,
    settled_at    timestamptz
);
CREATE INDEX session_inbox_pending_idx
    ON choir_control.session_inbox (session_id, seq) WHERE status = 'pending';
""",
    ),
    Migration(
        4,
        "why each session ended",
        """
ALTER TABLE choir_control.sessions ADD COLUMN end_reason text;
""",
    ),
    Migration(
        5,
        "session memory closes (§11.8 steps 6-7)",
        """
CREATE TABLE choir_control.memory_closes (
    session_id  text PRIMARY KEY REFERENCES choir_control.sessions (session_id),
    agent_id    text NOT NULL,
    state       text NOT NULL CHECK (state IN ('closing', 'closed')),
    chunk_chars int NOT NULL CHECK (chunk_chars > 0),
    from_rev    bigint NOT NULL DEFAULT 0,
    first_index int NOT NULL DEFAULT 0,
    to_rev      bigint NOT NULL DEFAULT 0,
    chunks      int NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    closed_at   timestamptz,
    CHECK ((state = 'closed') = (closed_at IS NOT NULL))
);
""",
    ),
    Migration(
        6,
        "operator choices that survive a choird restart (issue 19)",
        # config_version and the hash of the config it names; each agent's last start overrides
        # (`agent restart` reverts a `model set` to them, also after a choird restart)
        """
CREATE TABLE choir_control.config_state (
    only_row       boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    config_version int NOT NULL CHECK (config_version > 0),
    config_hash    text NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE choir_control.agents ADD COLUMN start_overrides jsonb;
""",
    ),
)

HOST_TOOL_SCOPE: Final = "host_tool_calls"
HOST_TOOL_MIGRATIONS: Final = (
    Migration(
        1,
        "host tool calls by session and call id, with their results",
        """
CREATE TABLE choir_control.host_tool_calls (
    session_id  text NOT NULL REFERENCES choir_control.sessions (session_id),
    call_id     text NOT NULL,
    tool_name   text NOT NULL,
    state       text NOT NULL CHECK (state IN ('running', 'finished')),
    result      jsonb,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    PRIMARY KEY (session_id, call_id),
    CONSTRAINT host_tool_calls_result_check CHECK ((state = 'finished') = (result IS NOT NULL))
);
""",
    ),
)
"""Its own scope so it evolves apart from `CONTROL_MIGRATIONS`' numbering (`host_tool_calls`)."""

GATEWAY_SCOPE: Final = "gateway"
GATEWAY_MIGRATIONS: Final = (
    Migration(
        1,
        "telegram update offsets (§19.2)",
        """
CREATE TABLE choir_control.gateway_offsets (
    gateway        text NOT NULL,
    bot_id         bigint NOT NULL,
    next_update_id bigint NOT NULL CHECK (next_update_id >= 0),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (gateway, bot_id)
);
""",
    ),
    Migration(
        2,
        "per-DM position of the last agent reply sent to Telegram (issue 16)",
        # session_id null: nothing sent yet, every reply of the DM's next session is owed
        """
CREATE TABLE choir_control.gateway_reply_cursors (
    gateway    text NOT NULL,
    chat_id    bigint NOT NULL,
    session_id text,
    rev        bigint NOT NULL CHECK (rev >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (gateway, chat_id)
);
""",
    ),
    Migration(
        3,
        "live core-job cards, resumed after a choird restart",
        # one row per card whose job has not been seen to end; deleted with its final edit.
        # message_id null: the card is being sent (a row left so was killed in between)
        """
CREATE TABLE choir_control.gateway_job_cards (
    card_id     text PRIMARY KEY,
    gateway     text NOT NULL,
    chat_id     bigint NOT NULL,
    dm          text NOT NULL,
    agent_id    text NOT NULL,
    session_id  text NOT NULL,
    job_name    text NOT NULL,
    started_rev bigint NOT NULL CHECK (started_rev >= 1),
    started_at  timestamptz NOT NULL,
    message_id  bigint,
    shown       text NOT NULL DEFAULT '',
    state       text NOT NULL DEFAULT 'starting',
    cancelling  boolean NOT NULL DEFAULT false,
    prompts     bigint[] NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);
""",
    ),
    Migration(
        4,
        "per-session card cursor: the last core job start whose card was stored",
        # a start past a session's cursor never had a card sent: a restart sends it. The
        # sessions running as this migrates had every card they are owed sent already
        """
CREATE TABLE choir_control.gateway_card_cursors (
    session_id text PRIMARY KEY,
    rev        bigint NOT NULL CHECK (rev >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO choir_control.gateway_card_cursors (session_id, rev)
SELECT s.session_id, coalesce(max(e.rev), 0)
FROM choir_control.sessions s
LEFT JOIN choir_control.session_events e ON e.session_id = s.session_id
WHERE s.status = 'active'
GROUP BY s.session_id;
""",
    ),
)
"""The gateway's own scope, like `host_tool_calls`: it evolves apart from the control plane's."""

USAGE_SCOPE: Final = "usage"
USAGE_MIGRATIONS: Final = (
    Migration(
        1,
        "one row per LLM call, from its llm_call event (issue 19)",
        # Keyed by the event that records the call: a heartbeat resent after a lost answer
        # stores nothing twice. cost_usd is null when unknown (no price, none reported).
        """
CREATE TABLE choir_control.llm_usage (
    session_id        text NOT NULL REFERENCES choir_control.sessions (session_id),
    rev               bigint NOT NULL,
    agent_id          text NOT NULL,
    lane              text NOT NULL,
    job_id            text,
    purpose           text NOT NULL,
    model             text NOT NULL,
    provider_model    text,
    prompt_tokens     bigint NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens bigint NOT NULL CHECK (completion_tokens >= 0),
    cached_tokens     bigint NOT NULL CHECK (cached_tokens >= 0),
    latency_ms        int NOT NULL CHECK (latency_ms >= 0),
    cost_usd          double precision CHECK (cost_usd >= 0),
    cost_source       text CHECK (cost_source IN ('provider', 'price')),
    called_at         timestamptz NOT NULL,
    PRIMARY KEY (session_id, rev),
    CHECK ((cost_usd IS NULL) = (cost_source IS NULL))
);
CREATE INDEX llm_usage_agent_time_idx ON choir_control.llm_usage (agent_id, called_at);
CREATE INDEX llm_usage_time_idx ON choir_control.llm_usage (called_at);
""",
    ),
    Migration(
        2,
        "embedding and TTS calls in the usage table: a kind, characters, rows without an event",
        # An embedding call is choird's own (no session, no event): its row has no (session,
        # rev), so that key becomes unique-when-present and rows get an identity of their own.
        """
ALTER TABLE choir_control.llm_usage DROP CONSTRAINT llm_usage_pkey;
ALTER TABLE choir_control.llm_usage
    ADD COLUMN kind text NOT NULL DEFAULT 'llm' CHECK (kind IN ('llm', 'embedding', 'tts')),
    ADD COLUMN characters bigint NOT NULL DEFAULT 0 CHECK (characters >= 0),
    ALTER COLUMN session_id DROP NOT NULL,
    ALTER COLUMN rev DROP NOT NULL,
    ALTER COLUMN lane DROP NOT NULL,
    ADD CONSTRAINT llm_usage_event_key UNIQUE (session_id, rev),
    ADD COLUMN usage_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ADD CONSTRAINT llm_usage_event_check CHECK (
        (session_id IS NULL) = (rev IS NULL) AND (kind = 'embedding' OR rev IS NOT NULL)
    );
""",
    ),
)
"""Usage and cost have their own scope, like the gateway's: they evolve apart."""
RECOVERY_SCOPE: Final = "recovery_inbox"
RECOVERY_MIGRATIONS: Final = (
    Migration(
        1,
        "what the recovery inbox records: failed applies, approvals timed out while down",
        """
CREATE TABLE choir_control.recovery_items (
    item_id    text PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('failed_apply', 'approval_timed_out')),
    state      text NOT NULL CHECK (state IN ('running', 'open', 'decided')),
    agent_id   text,
    session_id text,
    subject    text NOT NULL,
    reason     text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    decided_at timestamptz,
    decided_by text,
    choice     text
);
CREATE INDEX recovery_items_undecided_idx
    ON choir_control.recovery_items (created_at) WHERE state <> 'decided';
""",
    ),
    Migration(
        2,
        "a session's open intents found without reading its log (`store.open_intents`)",
        # partial: each event enters at most one of them; the results' by call id, so looking
        # a result up never reads its payload (a tool's output, often stored out of line)
        """
CREATE INDEX session_events_intents_idx
    ON choir_control.session_events (session_id, rev) WHERE event_type = 'tool_call_committed';
CREATE INDEX session_events_results_idx
    ON choir_control.session_events (session_id, (payload->>'call_id'), rev)
    WHERE event_type = 'tool_result_committed';
""",
    ),
)
"""The recovery inbox's own scope, like the gateway's: it evolves apart from the control plane's."""

PROPOSAL_SCOPE: Final = "proposals"
PROPOSAL_MIGRATIONS: Final = (
    Migration(
        1,
        "approvals bound to their content, timeouts as rejections, applies and audit (issue 17)",
        # §19.6: silence is a rejection, so a timed-out approval becomes `rejected` by `timeout`;
        # an approved proposal that choird applies ends `applied` or `failed`; content_sha256 is
        # the hash of what was reviewed.
        """
UPDATE choir_control.pending_approvals SET status = 'rejected' WHERE status = 'timed_out';
ALTER TABLE choir_control.pending_approvals DROP CONSTRAINT pending_approvals_status_check;
ALTER TABLE choir_control.pending_approvals ADD CONSTRAINT pending_approvals_status_check
    CHECK (status IN ('pending', 'approved', 'applied', 'rejected', 'failed'));
ALTER TABLE choir_control.pending_approvals ADD COLUMN content_sha256 text
    CHECK (content_sha256 ~ '^[0-9a-f]{64}$');
ALTER TABLE choir_control.pending_approvals ADD COLUMN resolved_via text;
ALTER TABLE choir_control.pending_approvals ADD COLUMN outcome text;
CREATE TABLE choir_control.proposal_applies (
    approval_id  text PRIMARY KEY REFERENCES choir_control.pending_approvals (id),
    agent_id     text NOT NULL,
    step         text NOT NULL
                 CHECK (step IN ('commit', 'merge', 'build', 'update', 'done', 'failed')),
    branch       text NOT NULL,
    base_commit  text,
    commit_id    text,
    merged_from  text,
    image_id     text,
    failed_step  text,
    reason       text,
    started_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE INDEX proposal_applies_open_idx
    ON choir_control.proposal_applies (started_at) WHERE step NOT IN ('done', 'failed');
CREATE TABLE choir_control.approval_audit (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    approval_id text NOT NULL REFERENCES choir_control.pending_approvals (id),
    at          timestamptz NOT NULL,
    action      text NOT NULL,
    actor       text,
    via         text,
    detail      text NOT NULL DEFAULT ''
);
CREATE INDEX approval_audit_approval_idx ON choir_control.approval_audit (approval_id, id);
""",
    ),
    Migration(
        2,
        "a tool's apply waits for its implementation (two-phase registration, §8.10)",
        # an approved tool stops at `implement` (manifest and stub on the proposal branch) until
        # `choirctl tool register` validates the human's commit (`validate`) and goes on
        """
ALTER TABLE choir_control.proposal_applies DROP CONSTRAINT proposal_applies_step_check;
ALTER TABLE choir_control.proposal_applies ADD CONSTRAINT proposal_applies_step_check
    CHECK (step IN ('commit', 'implement', 'validate', 'merge', 'build', 'update', 'done',
                    'failed'));
""",
    ),
    Migration(
        3,
        "an apply's undo is durable: a choird killed before it finished undoing finishes it",
        # set with the failure, cleared once the merge is reverted and the agent redeployed:
        # a restarted choird that finds it set runs the undo again (each effect is idempotent)
        """
ALTER TABLE choir_control.proposal_applies
    ADD COLUMN undo_pending boolean NOT NULL DEFAULT false;
""",
    ),
)
"""Proposals and their applies have their own scope, like the gateway's: they evolve apart."""

AGENT_MIGRATIONS: Final = (
    Migration(
        1,
        "memory and knowledge tables",
        """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE {schema}.memory_documents (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    session_id  text NOT NULL,
    tier        text NOT NULL CHECK (tier IN ('mid_term', 'long_term_summary', 'long_term_detail')),
    chunk_index int NOT NULL,
    text        text NOT NULL,
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    created_at  timestamptz NOT NULL DEFAULT now(),
    metadata    jsonb NOT NULL DEFAULT '{{}}'
);
CREATE INDEX memory_documents_tsv_idx ON {schema}.memory_documents USING gin (tsv);
CREATE INDEX memory_documents_session_idx
    ON {schema}.memory_documents (session_id, tier, chunk_index);
CREATE TABLE {schema}.memory_embeddings (
    document_id uuid PRIMARY KEY REFERENCES {schema}.memory_documents (id) ON DELETE CASCADE,
    embedding   vector({dims}) NOT NULL
);
CREATE INDEX memory_embeddings_hnsw_idx
    ON {schema}.memory_embeddings USING hnsw (embedding vector_cosine_ops);
CREATE TABLE {schema}.knowledge_documents (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    key        text UNIQUE,
    text       text NOT NULL,
    tsv        tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    metadata   jsonb NOT NULL DEFAULT '{{}}'
);
CREATE INDEX knowledge_documents_tsv_idx ON {schema}.knowledge_documents USING gin (tsv);
CREATE TABLE {schema}.knowledge_embeddings (
    document_id uuid PRIMARY KEY REFERENCES {schema}.knowledge_documents (id) ON DELETE CASCADE,
    embedding   vector({dims}) NOT NULL
);
CREATE INDEX knowledge_embeddings_hnsw_idx
    ON {schema}.knowledge_embeddings USING hnsw (embedding vector_cosine_ops);
""",
    ),
    Migration(
        2,
        "session chunk provenance and idempotent chunk keys",
        # `kind` is checked by choir (`ChunkKind`), not by a CHECK, so a new kind of chunk needs
        # no migration. The unique key makes storing a session's chunks idempotent; its index
        # replaces the plain (session_id, tier, chunk_index) one.
        """
ALTER TABLE {schema}.memory_documents
    ADD COLUMN kind      text NOT NULL DEFAULT 'messages',
    ADD COLUMN first_rev bigint,
    ADD COLUMN last_rev  bigint,
    ADD CONSTRAINT memory_documents_chunk_key UNIQUE (session_id, tier, chunk_index);
DROP INDEX {schema}.memory_documents_session_idx;
""",
    ),
    Migration(
        3,
        "HNSW indexes built with ef_construction 128",
        # A better-connected graph reaches recall@10 0.95 with a narrower search: at 100k chunks
        # ef_search 48 reads ~1,050 index pages for 0.963 where pgvector's default build needs
        # ~1,500 (ef_search 80) for 0.966 (`bench.memory`); building costs ~1.6x.
        """
DROP INDEX {schema}.memory_embeddings_hnsw_idx;
CREATE INDEX memory_embeddings_hnsw_idx ON {schema}.memory_embeddings
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 128);
DROP INDEX {schema}.knowledge_embeddings_hnsw_idx;
CREATE INDEX knowledge_embeddings_hnsw_idx ON {schema}.knowledge_embeddings
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 128);
""",
    ),
    Migration(
        4,
        "the embedding model of the stored vectors",
        # One row (written by `choir.store.memory.embedding_model`, which knows the configured
        # model): what computed the vectors stored, so a model change is seen even at equal
        # dimensions and semantic search never compares vectors of two models.
        """
CREATE TABLE {schema}.embedding_model (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    model    text NOT NULL,
    dims     int NOT NULL
);
""",
    ),
    Migration(
        5,
        "HNSW indexes built with m 8",
        # Each insert rewires its new neighbours (up to 2m), re-selecting every one's own list:
        # the work grows much faster than m. At m 8 storing a 10k-event session's 2,509
        # vectors costs Postgres 1.6 s of CPU where m 16 cost 3.4 s; a search reaches recall@10
        # 0.963 at ef_search 96 reading ~1,250 index pages, where m 16 read ~1,170 for 0.961 at
        # 48 (`bench.memory`, 100k chunks).
        """
DROP INDEX {schema}.memory_embeddings_hnsw_idx;
CREATE INDEX memory_embeddings_hnsw_idx ON {schema}.memory_embeddings
    USING hnsw (embedding vector_cosine_ops) WITH (m = 8, ef_construction = 128);
DROP INDEX {schema}.knowledge_embeddings_hnsw_idx;
CREATE INDEX knowledge_embeddings_hnsw_idx ON {schema}.knowledge_embeddings
    USING hnsw (embedding vector_cosine_ops) WITH (m = 8, ef_construction = 128);
""",
    ),
    Migration(
        6,
        "knowledge names, aliases and versions",
        # The dedup key becomes the item's name (design 002): every item gets one. An unnamed
        # item is named `<slug of its first 40 characters>-<first 8 hex digits of its id>`, as
        # `choir.core.memory.knowledge.names.derived_name` names new ones; the full id replaces
        # the 8 digits in the unlikely case that name is taken. Names and aliases share one
        # namespace (`knowledge_names`, its primary key), so a name is never another item's
        # alias without any lock. Versions keep every content a write replaced.
        """
ALTER TABLE {schema}.knowledge_documents RENAME COLUMN key TO name;
UPDATE {schema}.knowledge_documents d
SET name = coalesce(nullif(trim(BOTH '-' FROM left(
    regexp_replace(lower(d.text), '[^a-z0-9]+', '-', 'g'), 40)), ''), 'item')
    || '-' || left(replace(d.id::text, '-', ''), 8)
WHERE d.name IS NULL;
UPDATE {schema}.knowledge_documents d
SET name = left(d.name, length(d.name) - 8) || replace(d.id::text, '-', '')
WHERE EXISTS (SELECT FROM {schema}.knowledge_documents o
              WHERE o.id <> d.id AND o.name = d.name AND d.created_at >= o.created_at);
ALTER TABLE {schema}.knowledge_documents
    ALTER COLUMN name SET NOT NULL,
    ADD COLUMN version int NOT NULL DEFAULT 1;
CREATE TABLE {schema}.knowledge_names (
    name        text PRIMARY KEY,
    document_id uuid NOT NULL REFERENCES {schema}.knowledge_documents (id) ON DELETE CASCADE,
    is_alias    boolean NOT NULL
);
CREATE INDEX knowledge_names_document_idx ON {schema}.knowledge_names (document_id);
INSERT INTO {schema}.knowledge_names (name, document_id, is_alias)
SELECT name, id, false FROM {schema}.knowledge_documents;
CREATE TABLE {schema}.knowledge_versions (
    document_id uuid NOT NULL REFERENCES {schema}.knowledge_documents (id) ON DELETE CASCADE,
    version     int NOT NULL,
    name        text NOT NULL,
    text        text NOT NULL,
    metadata    jsonb NOT NULL,
    written_at  timestamptz NOT NULL DEFAULT now(),
    restored_from int,
    PRIMARY KEY (document_id, version)
);
INSERT INTO {schema}.knowledge_versions (document_id, version, name, text, metadata, written_at)
SELECT id, 1, name, text, metadata, updated_at FROM {schema}.knowledge_documents;
""",
    ),
    Migration(
        7,
        "knowledge BM25 terms over name and text",
        # BM25 (`store/memory_search`) reads term frequencies and document lengths from these
        # generated columns (one may not read another, so the length recomputes the vector):
        # the name's words (split at any non-alphanumeric) and the text, with
        # Postgres' english stemming and stop words. Aliases add no terms. A length counts every
        # position of every lexeme (a tsvector keeps at most 256 positions per lexeme).
        """
CREATE FUNCTION {schema}.tsvector_tokens(tsvector) RETURNS int
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS 'SELECT coalesce(sum(cardinality(positions)), 0)::int FROM unnest($1)';
ALTER TABLE {schema}.knowledge_documents
    ADD COLUMN terms tsvector GENERATED ALWAYS AS (to_tsvector('english',
        regexp_replace(name, '[^[:alnum:]]+', ' ', 'g') || ' ' || text)) STORED,
    ADD COLUMN terms_length int GENERATED ALWAYS AS ({schema}.tsvector_tokens(to_tsvector(
        'english', regexp_replace(name, '[^[:alnum:]]+', ' ', 'g') || ' ' || text))) STORED;
CREATE INDEX knowledge_documents_terms_idx ON {schema}.knowledge_documents USING gin (terms);
""",
    ),
    Migration(
        8,
        "knowledge graph: loc, type, data and typed edges",
        # Design 003 (`choir.core.memory.knowledge.graph`): loc "" is no place in the hierarchy;
        # type and edge type are checked by choir, not by a CHECK, like a chunk's kind. Versions
        # keep loc, type and data with the text. Edges go with either end (ON DELETE CASCADE)
        # and name items by id, so a rename keeps them. Tags stay in `metadata`, indexed here.
        """
ALTER TABLE {schema}.knowledge_documents
    ADD COLUMN loc  text NOT NULL DEFAULT '',
    ADD COLUMN type text NOT NULL DEFAULT 'info',
    ADD COLUMN data jsonb NOT NULL DEFAULT '{{}}';
CREATE INDEX knowledge_documents_loc_idx
    ON {schema}.knowledge_documents (loc text_pattern_ops);
CREATE INDEX knowledge_documents_tags_idx
    ON {schema}.knowledge_documents USING gin ((metadata -> 'tags'));
ALTER TABLE {schema}.knowledge_versions
    ADD COLUMN loc  text NOT NULL DEFAULT '',
    ADD COLUMN type text NOT NULL DEFAULT 'info',
    ADD COLUMN data jsonb NOT NULL DEFAULT '{{}}';
CREATE TABLE {schema}.knowledge_edges (
    source_id  uuid NOT NULL REFERENCES {schema}.knowledge_documents (id) ON DELETE CASCADE,
    type       text NOT NULL,
    target_id  uuid NOT NULL REFERENCES {schema}.knowledge_documents (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, type, target_id),
    CHECK (source_id <> target_id)
);
CREATE INDEX knowledge_edges_target_idx ON {schema}.knowledge_edges (target_id);
""",
    ),
    Migration(
        9,
        "knowledge memory classes: system, knowledge, app, personal (per user)",
        # Design 003's classes (`choir.core.memory.access`): every item is in one of the
        # agent's four memories, set when it is added and never changed; a personal item
        # belongs to one user (the session's DM), "" for the other classes. Items from before
        # classes are the agent's knowledge.
        """
ALTER TABLE {schema}.knowledge_documents
    ADD COLUMN memory_class text NOT NULL DEFAULT 'knowledge'
        CHECK (memory_class IN ('system', 'knowledge', 'app', 'personal')),
    ADD COLUMN owner_user text NOT NULL DEFAULT ''
        CHECK ((memory_class = 'personal') = (owner_user <> ''));
CREATE INDEX knowledge_documents_memory_idx
    ON {schema}.knowledge_documents (memory_class, owner_user);
""",
    ),
    Migration(
        10,
        "knowledge provenance",
        # Who wrote each item's content (`choir.core.memory.knowledge.provenance`): the agent's
        # session, revision and tool call, or the operator's front end. NULL: written before it was
        # recorded ("source unknown"). The index finds what was learnt with one user.
        """
ALTER TABLE {schema}.knowledge_documents ADD COLUMN provenance jsonb;
ALTER TABLE {schema}.knowledge_versions ADD COLUMN provenance jsonb;
CREATE INDEX knowledge_versions_user_idx
    ON {schema}.knowledge_versions ((provenance ->> 'user'));
""",
    ),
    Migration(
        11,
        "forgotten knowledge",
        # The operator's `memory forget` (`choir.store.knowledge.forget`): one row per forgotten
        # item, written in the transaction that deletes it — who (the front end) and when, and
        # nothing of what it said (its name included: it may be the very thing forgotten).
        """
CREATE TABLE {schema}.knowledge_forgotten (
    document_id  uuid PRIMARY KEY,
    by           text NOT NULL,
    versions     int NOT NULL,
    forgotten_at timestamptz NOT NULL DEFAULT now()
);
""",
    ),
    Migration(
        12,
        "memory key checks",
        # An encrypted memory's key check (`choir.core.memory.sealing.key_check`), recorded at
        # the agent's first start with a key: a later start's key is told wrong here, before
        # anything is read or written. The key itself is never stored (choird holds it in
        # memory only).
        """
CREATE TABLE {schema}.memory_key_checks (
    memory_class text PRIMARY KEY,
    key_check    bytea NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now()
);
""",
    ),
    Migration(
        13,
        "session-derived memory belongs to the session's user",
        # What choird derives from a session of a user (`choir.core.memory.access.Viewer`) is
        # that user's: its session memory rows and its summary tree items (archives, tool
        # sequence, summary: knowledge class) get the session's bound DM as `owner_user`, read
        # from `sessions.resource_bindings` (a session with none: "", as before). A personal
        # item still always has its user; a knowledge item may have one now (system and app
        # items never do). A roll-up made
        # before roll-ups were per user gets its summaries' one user; one over several users'
        # summaries is removed (derived content: its summaries are pending again, rolled up
        # per user; the `memory_rollup` event keeps its text in the session's log).
        """
DO $$
DECLARE name text;
BEGIN
    -- migration 9's check, named by Postgres (a check of two columns: `<table>_check`)
    SELECT c.conname INTO name FROM pg_constraint c
    WHERE c.conrelid = '{schema}.knowledge_documents'::regclass AND c.contype = 'c'
        AND pg_get_constraintdef(c.oid) LIKE '%owner_user%';
    EXECUTE format('ALTER TABLE {schema}.knowledge_documents DROP CONSTRAINT %I', name);
END $$;
ALTER TABLE {schema}.knowledge_documents ADD CONSTRAINT knowledge_documents_owner_user_check
    CHECK ((memory_class <> 'personal' OR owner_user <> '')
           AND (owner_user = '' OR memory_class IN ('personal', 'knowledge')));
ALTER TABLE {schema}.memory_documents ADD COLUMN owner_user text NOT NULL DEFAULT '';
DO $$
BEGIN
    -- no sessions table (a schema made without the control plane): no session to read
    IF to_regclass('choir_control.sessions') IS NULL THEN
        RETURN;
    END IF;
    UPDATE {schema}.memory_documents d SET owner_user = s.resource_bindings ->> 'dm'
    FROM choir_control.sessions s
    WHERE s.session_id = d.session_id AND coalesce(s.resource_bindings ->> 'dm', '') <> '';
    UPDATE {schema}.knowledge_documents d SET owner_user = s.resource_bindings ->> 'dm'
    FROM choir_control.sessions s
    WHERE d.memory_class = 'knowledge' AND d.owner_user = ''
        AND s.session_id = coalesce(d.metadata -> 'compaction_archive' ->> 'session_id',
                                    d.metadata -> 'session_summary' ->> 'session_id',
                                    d.metadata -> 'tool_sequence' ->> 'session_id')
        AND coalesce(s.resource_bindings ->> 'dm', '') <> '';
END $$;
DELETE FROM {schema}.knowledge_documents r
WHERE r.metadata ? 'memory_rollup' AND (
    SELECT count(DISTINCT s.owner_user) FROM {schema}.knowledge_documents s
    WHERE s.metadata ? 'session_summary'
        AND r.metadata -> 'memory_rollup' -> 'covers' ? s.name) > 1;
UPDATE {schema}.knowledge_documents r SET owner_user = (
    SELECT min(s.owner_user) FROM {schema}.knowledge_documents s
    WHERE s.metadata ? 'session_summary'
        AND r.metadata -> 'memory_rollup' -> 'covers' ? s.name)
WHERE r.metadata ? 'memory_rollup' AND EXISTS (
    SELECT FROM {schema}.knowledge_documents s
    WHERE s.metadata ? 'session_summary' AND s.owner_user <> ''
        AND r.metadata -> 'memory_rollup' -> 'covers' ? s.name);
""",
    ),
)


async def apply_migrations(
    conn: Connection, scope: str, migrations: tuple[Migration, ...], **params: object
) -> list[int]:
    """Apply the migrations of `scope` not yet recorded, in order; return the versions applied.

    `params` fill the `{placeholders}` of agent migrations. Refuses a database that records a
    version this choir does not know (it was migrated by a newer choir).
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute(_BOOTSTRAP)
        rows = await conn.fetch(
            "SELECT version FROM choir_control.schema_version WHERE scope = $1", scope
        )
        recorded = {row["version"] for row in rows}
        _check_known(scope, recorded, migrations)
        applied = []
        for migration in migrations:
            if migration.version in recorded:
                continue
            await conn.execute(migration.sql.format_map(params) if params else migration.sql)
            await conn.execute(
                "INSERT INTO choir_control.schema_version (scope, version, description) "
                "VALUES ($1, $2, $3)",
                scope,
                migration.version,
                migration.description,
            )
            applied.append(migration.version)
    return applied


async def apply_control_schema(conn: Connection) -> list[int]:
    """Create or upgrade `choir_control` (§23.1); returns the control versions applied now."""
    applied = await apply_migrations(conn, CONTROL_SCOPE, CONTROL_MIGRATIONS)
    await apply_migrations(conn, HOST_TOOL_SCOPE, HOST_TOOL_MIGRATIONS)
    await apply_migrations(conn, GATEWAY_SCOPE, GATEWAY_MIGRATIONS)
    await apply_migrations(conn, USAGE_SCOPE, USAGE_MIGRATIONS)
    await apply_migrations(conn, RECOVERY_SCOPE, RECOVERY_MIGRATIONS)
    await apply_migrations(conn, PROPOSAL_SCOPE, PROPOSAL_MIGRATIONS)
    return applied


def _check_known(scope: str, recorded: set[int], migrations: tuple[Migration, ...]) -> None:
    unknown = recorded - {migration.version for migration in migrations}
    if unknown:
        raise ConflictError(
            f"the database's {scope} schema is at version {max(unknown)}, newer than this choir "
            f"knows ({max(m.version for m in migrations)}); upgrade choir"
        )
