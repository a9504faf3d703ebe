"""After a restart, the admin DMs are told what waits in the recovery inbox (issue 19).

A real choird with the bot `tg` against the local Bot API server: the admin DM `boss` and the
regular DM `phone`. The previous choird died during `agent update` — its record is left
`running`, exactly as a kill leaves it — so the next choird lists the update as failed and tells
`boss`, once, what waits; `phone` is told nothing. With nothing waiting, nobody is told.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from choir.client import ChoirClient
from choir.daemon.operator.recovery_start import INTERRUPTED, NOTICE_DELAY_S
from choir.home import ChoirHome
from choir.store.recovery_items import begin_apply
from tests.harness.botapi import BotApiServer
from tests.harness.daemons import pool_of, running_daemon

from .conftest import BOSS, PHONE

pytestmark = pytest.mark.slow

NOTICE = "choird restarted: 1 item(s) wait for a decision."


async def test_an_update_a_dying_choird_left_is_told_to_the_admin_dm_only(
    home: ChoirHome, api: BotApiServer
) -> None:
    async with running_daemon(home) as first, pool_of(first).acquire() as conn:
        # an update in flight when choird died
        await begin_apply(conn, "apply-0123456789ab", "agent.update", "agent-1", datetime.now(UTC))

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

    async with running_daemon(home):  # nothing waits: nothing said
        await asyncio.sleep(NOTICE_DELAY_S + 2)
    assert api.texts(BOSS) == [notice]
