"""The Postgres server and connections: embedded or external, pool, DDL, failures."""
