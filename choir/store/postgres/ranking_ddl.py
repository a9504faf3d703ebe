"""The agent-schema tables of knowledge ranking: a scope of its own, `agent-ranking:<id>`.

Migrations of this scope run after the agent scope's (`ddl.AGENT_MIGRATIONS`, which creates the
knowledge tables) in the same transaction of `ensure_agent_schema`: ranking evolves apart from
the item tables, as the control plane's scopes do, so its steps never compete for a number with
theirs. Templates take `{schema}` (quoted); literal braces are doubled.

1. The BM25 change log (`choir.daemon.memory.search.bm25_index` keeps each agent's in-memory index
   current from it): a trigger records, in the writing transaction, which item's name or text
   changed (or that it went) and the writer's transaction id. A write killed midway rolls back
   with its log row, so the log never disagrees with the items. No backfill: the terms are the
   generated `terms` column (agent migration 7), and an index starts from a full read.
2. Relevance (design 004): the kind that sets an item's importance (correction, preference,
   fact, task; checked by choir, as chunk kinds are) and how often and when it was last
   returned by a search (reinforcement). Access counts live in their own table so that a
   search's reinforcement never rewrites the item row (nor its version, nor the change log).
"""

from __future__ import annotations

from typing import Final

from choir.store.postgres.ddl import Migration

RANKING_SCOPE: Final = "agent-ranking"

RANKING_MIGRATIONS: Final = (
    Migration(
        1,
        "knowledge term change log for the in-memory BM25 index",
        """
CREATE TABLE {schema}.knowledge_term_changes (
    document_id uuid PRIMARY KEY,
    changed_by  xid8 NOT NULL
);
CREATE INDEX knowledge_term_changes_xid_idx ON {schema}.knowledge_term_changes (changed_by);
CREATE FUNCTION {schema}.knowledge_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.knowledge_term_changes (document_id, changed_by)
    VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END, pg_current_xact_id())
    ON CONFLICT (document_id) DO UPDATE SET changed_by = excluded.changed_by;
    RETURN NULL;
END $$;
CREATE TRIGGER knowledge_terms_changed
    AFTER INSERT OR DELETE OR UPDATE OF name, text ON {schema}.knowledge_documents
    FOR EACH ROW EXECUTE FUNCTION {schema}.knowledge_terms_changed();
""",
    ),
    Migration(
        2,
        "knowledge kinds and access counts for relevance",
        """
ALTER TABLE {schema}.knowledge_documents ADD COLUMN kind text NOT NULL DEFAULT 'fact';
CREATE TABLE {schema}.knowledge_access (
    document_id   uuid PRIMARY KEY
                  REFERENCES {schema}.knowledge_documents (id) ON DELETE CASCADE,
    access_count  int NOT NULL DEFAULT 0,
    last_accessed timestamptz NOT NULL
);
""",
    ),
)
