"""`memory forget` killed midway: choird (a real process) dies with the item deleted inside the
forget's transaction but before it commits. Nothing is half-removed — the item, its alias, its
two versions, its vector and its edge are all there and no forget is recorded — and the forget
run again on a restarted choird removes all of it and records it once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from choir.store.postgres.pool import open_pool
from choir.store.postgres.target import ConnectParams
from tests.ctl.cli import choirctl
from tests.faults.support import spawn_choird, teardown
from tests.harness.homes import external_postgres, make_home
from tests.harness.waits import poll_until
from tests.memory_ops.curation_support import forgets, traces

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_a_forget_killed_before_commit_leaves_the_item_whole(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))

    def ctl(*args: str):  # type: ignore[no-untyped-def]
        return asyncio.to_thread(choirctl, home.root, *args)

    choird = None
    try:
        async with open_pool(pg_params, min_size=1, max_size=2) as pool:
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            put = await ctl("knowledge", "put", "agent-1", "the user's phone is 555-0100",
                            "--name", "user.phone", "--json")  # fmt: skip
            await ctl("knowledge", "put", "agent-1", "standup is at 9:30", "--name", "standup")
            await ctl("knowledge", "alias", "agent-1", "user.phone", "phone")
            await ctl("knowledge", "write", "agent-1", "phone", "the user's phone is 555-0199")
            await ctl("knowledge", "link", "agent-1", "phone", "relates_to", "standup")
            item_id = put.json()["item"]["id"]
            whole = await traces(pool, "agent-1", item_id)
            await asyncio.to_thread(teardown, home, choird)

            choird = await asyncio.to_thread(
                spawn_choird,
                home,
                "--runtime",
                "process",
                CHOIR_FAILPOINTS="memory.forget.after_delete=exit",
            )
            killed = await ctl("memory", "forget", "agent-1", "phone", "--yes")
            process = choird.process
            await poll_until(lambda: process.poll() is not None, within=30)
            after_kill = await traces(pool, "agent-1", item_id)

            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            shown = await ctl("knowledge", "show", "agent-1", "phone")
            forgot = await ctl("memory", "forget", "agent-1", "phone", "--yes")
            gone = await traces(pool, "agent-1", item_id)
            recorded = await forgets(pool, "agent-1")
    finally:
        await asyncio.to_thread(teardown, home, choird)

    assert whole == {
        "documents": 1, "names": 2, "versions": 2, "vectors": 1, "edges": 1, "forgotten": 0
    }  # fmt: skip
    assert process.returncode == 137  # killed inside the forget's transaction
    assert killed.code != 0
    assert len(killed.err.strip().splitlines()) == 1
    assert after_kill == whole
    assert shown.code == 0
    assert forgot.code == 0, forgot.err
    assert gone == {
        "documents": 0, "names": 0, "versions": 0, "vectors": 0, "edges": 0, "forgotten": 1
    }  # fmt: skip
    assert [(str(r["document_id"]), r["by"], r["versions"]) for r in recorded] == [
        (item_id, "choirctl", 2)
    ]
