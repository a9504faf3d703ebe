"""A keyed `agent start` killed midway: choird (a real process) dies with the encrypted memory's
key check recorded inside its transaction but before it commits. Nothing is half-written — no
check is recorded, no agent runs, the key is in no log — and a restarted choird holds no key:
the next keyed start records its key's check, and a start with another key is refused."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest

from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool, open_pool
from choir.store.postgres.target import ConnectParams
from tests.ctl.cli import Run, choirctl
from tests.faults.support import agent_processes, spawn_choird, teardown
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def _checks(pool: Pool) -> list[str]:
    table = f"{quote_ident(agent_schema('agent-1'))}.memory_key_checks"
    async with pool.acquire() as conn:
        rows = await conn.fetch(f"SELECT memory_class FROM {table} ORDER BY memory_class")
    return [row["memory_class"] for row in rows]


async def test_a_keyed_start_killed_before_commit_records_nothing(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))
    data: dict[str, Any] = read_config(home)
    data["agents"]["agent-1"]["memories"] = [
        {"class": "personal", "role": "read-write", "encrypted": True},
        {"class": "app", "role": "read-write", "encrypted": True},
    ]
    write_config(home, data)
    key, other = secrets.token_bytes(32), secrets.token_bytes(32)
    start = ("agent", "start", "agent-1", "--dm", "console", "--memory-key-file", "-")

    def ctl(*args: str, stdin: str) -> Any:
        return asyncio.to_thread(choirctl, home.root, *args, stdin=stdin)

    choird = None
    try:
        async with open_pool(pg_params, min_size=1, max_size=2) as pool:
            choird = await asyncio.to_thread(
                spawn_choird,
                home,
                "--runtime",
                "process",
                CHOIR_FAILPOINTS="memory.key.after_record=exit",
            )
            killed: Run = await ctl(*start, stdin=key.hex())
            process = choird.process
            await poll_until(lambda: process.poll() is not None, within=30)
            after_kill = await _checks(pool)
            running = agent_processes(home)

            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            started: Run = await ctl(*start, stdin=key.hex())
            recorded = await _checks(pool)
            stopped = await asyncio.to_thread(choirctl, home.root, "agent", "stop", "agent-1")
            refused: Run = await ctl(*start, stdin=other.hex())
    finally:
        await asyncio.to_thread(teardown, home, choird)

    assert process.returncode == 137  # killed inside the key check's transaction
    assert killed.code != 0
    assert len(killed.err.strip().splitlines()) == 1
    assert after_kill == []
    assert running == []
    assert started.code == 0, started.err
    assert recorded == ["app", "personal"]
    assert stopped.code == 0, stopped.err
    assert refused.code == 2
    assert refused.err.strip().endswith(
        "the memory key does not open memory agent-1/app: it is not the key its items were "
        "sealed with; start the agent with the key file it was first started with"
    )
    logs = b"".join(p.read_bytes() for p in home.logs.rglob("*") if p.is_file())
    assert key.hex().encode() not in logs
    assert other.hex().encode() not in logs
