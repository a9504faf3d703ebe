"""session_events ingest into embedded Postgres: events/s at batch sizes 1, 100 and 1000.

Each batch is one transaction committed durably (fsync and synchronous_commit on), the way
choird stores the committed events a heartbeat delivers. Also reports how long a warm restart
of the embedded database takes, part of choird's 3 s readiness budget.

    python -m bench.ingest [--json] [--quick]
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import figures_dict, parse_args, report
from choir.store.events import EventRecord, insert_events
from choir.store.postgres.database import Database, open_database
from choir.store.postgres.target import EmbeddedTarget

BATCH_SIZES = (1, 100, 1000)
GOALS = {
    "events_per_s_batch_1000": "goal >= 20,000 (stretch 50,000)",
    "warm_start_s": "goal < 3 (all of choird)",
}


def make_batch(first_rev: int, count: int) -> list[EventRecord]:
    """Events shaped like committed tool results (~300 bytes of payload each)."""
    now = datetime.now(UTC)
    return [
        EventRecord(
            rev=rev,
            event_type="tool_result_committed",  # as choird stores it: in the results index
            lane="edge",
            payload={
                "kind": "tool_result_committed",
                "call_id": f"call-{rev:08d}",
                "invocation_id": f"inv-{rev:08d}",
                "tool": "choir.fs.read",
                "result": {"status": "success", "summary": "read 120 lines of src/app.py"},
                "data": {"path": "src/app.py", "lines": 120, "truncated": False},
            },
            hash_prev=hashlib.sha256(str(rev - 1).encode()).hexdigest(),
            hash=hashlib.sha256(str(rev).encode()).hexdigest(),
            created_at=now,
        )
        for rev in range(first_rev, first_rev + count)
    ]


async def ingest_rate(db: Database, session_id: str, batch_size: int, total: int) -> float:
    """Events per second storing `total` events, one durable transaction per batch."""
    batches = [make_batch(rev, batch_size) for rev in range(1, total + 1, batch_size)]
    async with db.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO choir_control.sessions (session_id, agent_id, status) "
            "VALUES ($1, 'bench', 'active')",
            session_id,
        )
        started = time.perf_counter()
        for batch in batches:
            async with conn.transaction():
                await insert_events(conn, session_id, batch)
        elapsed = time.perf_counter() - started
    return sum(len(b) for b in batches) / elapsed


async def check_durable(db: Database) -> None:
    async with db.pool.acquire() as conn:
        settings = await conn.fetch(
            "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit')"
        )
        await conn.execute(
            "INSERT INTO choir_control.agents (agent_id, name) VALUES ('bench', 'B')"
        )
    if any(row["setting"] != "on" for row in settings):
        raise SystemExit(f"not a durable setup: {[tuple(row) for row in settings]}")


async def run(quick: bool) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="choir-bench-ingest-"))
    try:
        target = EmbeddedTarget(root / "pgdata")
        async with open_database(target):
            pass  # first start: initdb, not what an operator waits for on every start
        started = time.perf_counter()
        async with open_database(target) as db:
            warm_start_s = time.perf_counter() - started
            await check_durable(db)
            rates = {}
            for size in BATCH_SIZES:
                total = (200 if size == 1 else 5_000) if quick else (2_000 if size == 1 else 50_000)
                rates[f"events_per_s_batch_{size}"] = await ingest_rate(
                    db, f"bench-{size}", size, total
                )
        return figures_dict(**rates, warm_start_s=warm_start_s)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    args = parse_args(__doc__ or "")
    figures = asyncio.run(run(args.quick))
    report("session_events ingest (embedded Postgres, durable commits)", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
