"""choird's Postgres layer (§23): the server, the pool, the schema and one module per aggregate.

- `target`: where Postgres is (`EmbeddedTarget` or `ExternalTarget`) and `ConnectParams`.
- `embedded`: `EmbeddedPostgres`, PostgreSQL + pgvector from `pgserver` under `$CHOIR_HOME/pgdata`.
- `pool`: connections and pools with jsonb (orjson) and pgvector codecs; one-line errors.
- `database`: `open_database(target)`, choird's startup steps 3 and 5 in one context manager.
- `ddl`: numbered migrations of `choir_control` and of every agent schema.
- `agent_schema`: `ensure_agent_schema` (startup step 4) and `run_as_agent`.
- `events`: the session event log — batched, idempotent inserts with fork detection.

Functions take a connection; callers own transactions. Nothing here is imported by choirctl or
the TUI, which reach the database only through choird.
"""
