"""A crashed session with a long log is listed in the recovery inbox, and by `choirctl session
recover`, with the same calls of unknown outcome as folding its whole log gives — now read
through the intents only, bounded by the agent's latest snapshot (`choir.store.open_intents`).

Real choird (in this process, process runtime), real Postgres, choirctl as a subprocess; the
log is written as heartbeats store it, with a snapshot every 1000 events as the agent takes
them, its calls and their arguments of every shape (`tests.store.intent_logs`).
"""

from __future__ import annotations

import json

import pytest

from choir.core.recovery_inbox import call_line, outcome_id
from choir.store.events import insert_events
from choir.store.snapshots import save_snapshot
from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import choirctl
from tests.store.intent_logs import call_log, folded, interrupted, ledger_snapshot, records

pytestmark = pytest.mark.slow

EVENTS = 20_000
SNAPSHOT_EVERY = 1_000


async def test_a_long_crashed_session_lists_the_calls_its_whole_log_leaves_open(
    choird: Choird,
) -> None:
    daemon, client = choird
    assert daemon.services is not None
    assert daemon.database is not None
    session_id = (await daemon.services.sessions.start("agent-1", {})).session_id
    # the crash comes between snapshots: the events after the last one are read too
    events = records([(e.lane, e.event_type, e.payload) for e in call_log(7, EVENTS + 300)])
    async with daemon.database.pool.acquire() as conn:
        for start in range(0, len(events), SNAPSHOT_EVERY):
            batch = events[start : start + SNAPSHOT_EVERY]
            await insert_events(conn, session_id, batch)
            if len(batch) == SNAPSHOT_EVERY:
                rev = batch[-1].rev
                await save_snapshot(conn, session_id, rev, ledger_snapshot(events, rev))
    await daemon.services.sessions.mark_crashed(session_id, "killed by the test")

    expected = folded(events)
    assert len(expected) > 3  # calls left open all along the log, not only at its end
    listed = await choirctl(daemon.home, "inbox", "--json")
    assert listed.returncode == 0, listed.stderr
    [item] = [i for i in json.loads(listed.stdout)["items"] if i["kind"] == "unknown_outcome"]
    assert item["item_id"] == outcome_id(session_id)
    assert item["context"] == [call_line(tool, arguments) for _, _, tool, arguments, _ in expected]
    assert item["since"] == expected[0][4]
    assert f"session crashed with {len(expected)} call(s) of unknown outcome" in item["title"]
    assert (await client.inbox_list(agent_id="agent-1")).items[0].context == item["context"]

    recovered = await choirctl(daemon.home, "session", "recover", session_id, "--json")
    assert recovered.returncode == 0, recovered.stderr
    calls = [call.model_dump(mode="json") for call in interrupted(events)]
    assert json.loads(recovered.stdout)["interrupted"] == calls
    assert [call["call_id"] for call in calls] == [call_id for _, call_id, _, _, _ in expected]
