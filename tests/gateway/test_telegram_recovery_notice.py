"""After a restart, the admin DMs are told what waits in the recovery inbox (issue 19).

A real choird with the bot `tg` against the local Bot API server: the admin DM `boss` and the
regular DM `phone`. The previous choird died during `agent update` — its record is left
`running`, exactly as a kill leaves it — so the next choird lists the update as failed and tells
`boss`, once, what waits; `phone` is told nothing. With nothing waiting at the start, nobody is told
(what fails after it is not the restart's news).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from choir.client import ChoirClient
from choir.daemon.operator.recovery.start import INTERRUPTED, NOTICE_DELAY_S
from choir.home import ChoirHome
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import connect_plain
from choir.store.postgres.target import ConnectParams
from choir.store.recovery_items import apply_failed, begin_apply
from tests.harness.botapi import BotApiServer
from tests.harness.daemons import pool_of, running_daemon

from .conftest import BOSS, PHONE

pytestmark = pytest.mark.slow

NOTICE = "choird restarted: 1 item(s) wait for a decision."


async def test_an_update_a_dying_choird_left_is_told_to_the_admin_dm_only(
    home: ChoirHome, api: BotApiServer, pg_params: ConnectParams
) -> None:
    conn = await connect_plain(pg_params)
    try:  # the database a previous choird left: an update in flight when it died
        await apply_control_schema(conn)
        await begin_apply(conn, "apply-0123456789ab", "agent.update", "agent-1", datetime.now(UTC))
    finally:
        await conn.close()

    async with running_daemon(home), await ChoirClient.connect(home) as client:
        [item] = (await client.inbox_list()).items
        assert (item.item_id, item.kind, item.agent_id) == (
            "apply-0123456789ab",
            "failed_apply",
            "agent-1",
        )
        assert item.context == [INTERRUPTED]
        await api.wait_for(lambda: bool(api.texts(BOSS)), within=NOTICE_DELAY_S + 20)
        [notice] = api.texts(BOSS)
        assert notice.startswith(NOTICE)
        assert "- agent-1: agent.update failed" in notice
        assert "choirctl inbox" in notice
        assert api.texts(PHONE) == []

        await client.inbox_resolve(item.item_id, "dismiss")

    async with running_daemon(home) as third, pool_of(third).acquire() as conn:
        # nothing waited at the start; an update failing just after it is news, not the restart's
        await begin_apply(conn, "apply-after-start", "agent.update", "agent-1", datetime.now(UTC))
        await apply_failed(conn, "apply-after-start", "the build failed")
        await asyncio.sleep(NOTICE_DELAY_S + 2)
    assert api.texts(BOSS) == [notice]
