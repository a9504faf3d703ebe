"""Lock tables on the operator socket: REPORT_STATUS carries them, `session.locks` answers the
latest, and the live feed publishes each new one as a `locks` item (the TUI's Locks view)."""

from __future__ import annotations

import asyncio

import pytest

from choir.errors import NotFoundError
from choir.protocol import LockState, LockWaiter, ReportStatusRequest
from choir.protocol.operator.items import FeedItem
from choir.protocol.operator.views import LocksView
from tests.harness.waits import poll_until

from .operator_served import served_api, served_choird, served_home, served_pushes  # noqa: F401  (fixtures)
from .test_operator_api import start

TABLE = [
    LockState(resource="file:src/a.py", mode="X", holders=["core:fix"], held_for_s=1.5),
    LockState(
        resource="workspace",
        mode="S",
        holders=["core:fix", "edge"],
        waiters=[LockWaiter(owner="core:docs", mode="X", waiting_s=0.25)],
        held_for_s=2.0,
    ),
]


def with_locks(locks: list[LockState] | None) -> ReportStatusRequest:
    return ReportStatusRequest(lane="edge", state="EDGE_WAITING_TOOL", locks=locks)


async def test_session_locks_is_empty_until_the_agent_reports_a_table(choird, services):
    agent = await start(services)

    answer = await choird.session_locks(agent.session_id)

    assert answer == LocksView(session_id=agent.session_id, reported_at=None, locks=[])


async def test_session_locks_answers_the_latest_table(choird, services, clock):
    agent = await start(services)
    services.status.report(agent.session_id, with_locks(TABLE), clock())
    services.status.report(agent.session_id, with_locks(None), clock())  # unchanged: kept

    answer = await choird.session_locks(agent.session_id)

    assert answer.reported_at == clock().isoformat()
    assert [(lock.resource, lock.mode, lock.holders) for lock in answer.locks] == [
        ("file:src/a.py", "X", ["core:fix"]),
        ("workspace", "S", ["core:fix", "edge"]),
    ]
    assert answer.locks[1].model_dump() == TABLE[1].model_dump()
    assert answer.locks[1].held_for_s == 2.0
    services.status.report(agent.session_id, with_locks([]), clock())
    assert (await choird.session_locks(agent.session_id)).locks == []


async def test_a_report_without_locks_leaves_them_off_the_wire():
    assert "locks" not in with_locks(None).model_dump(mode="json")
    assert with_locks([]).model_dump(mode="json")["locks"] == []


async def test_session_locks_of_an_unknown_session_is_not_found(choird):
    with pytest.raises(NotFoundError, match="nope"):
        await choird.session_locks("nope")


async def test_the_feed_publishes_each_new_lock_table(choird, services, clock):
    agent = await start(services)
    items: list[FeedItem] = []

    async def listen() -> None:
        async for item in choird.subscribe():
            items.append(item)

    reader = asyncio.create_task(listen())
    await poll_until(lambda: bool(items))
    services.status.report(agent.session_id, with_locks(None), clock())
    services.status.report(agent.session_id, with_locks(TABLE), clock())
    await poll_until(lambda: len(items) == 4)
    reader.cancel()

    assert [item.kind for item in items] == ["subscribed", "lane", "lane", "locks"]
    locks = items[3].data
    assert isinstance(locks, LocksView)
    assert locks.session_id == agent.session_id
    assert [lock.resource for lock in locks.locks] == ["file:src/a.py", "workspace"]
