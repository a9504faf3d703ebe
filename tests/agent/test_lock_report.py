"""Lock-table reports: the watcher sends the table when it changes, with ages as of the send."""

from __future__ import annotations

import asyncio

from choir.agent.kernel.lock_report import LockWatch, lock_states
from choir.agent.kernel.locks import LockManager
from choir.core.locks.lockset import Lockset
from choir.protocol import LockState


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_the_watch_sends_only_changed_tables_with_holders_waiters_and_ages() -> None:
    clock = FakeClock()
    manager = LockManager(clock)
    sent: list[list[LockState]] = []
    watch = LockWatch(manager, sent.append, clock=clock)

    assert not watch.check()  # empty, as last sent (nothing)
    hold = await manager.acquire("core:a", Lockset.of("file:x:X"))
    waiter = asyncio.create_task(manager.acquire("edge", Lockset.of("file:x:S")))
    await asyncio.sleep(0)
    clock.now = 102.5
    assert watch.check()
    assert not watch.check()  # same table: nothing sent

    (lock,) = sent[0]
    assert (lock.resource, lock.mode, lock.holders, lock.held_for_s) == (
        "file:x",
        "X",
        ["core:a"],
        2.5,
    )
    assert [(w.owner, w.mode, w.waiting_s) for w in lock.waiters] == [("edge", "S", 2.5)]
    hold.release()
    (await waiter).release()
    assert watch.check()
    assert sent[-1] == []


async def test_the_watch_task_reports_a_held_lock_within_its_period() -> None:
    manager = LockManager()
    sent: list[list[LockState]] = []
    watch = LockWatch(manager, sent.append, period_s=0.01)
    watch.start()
    try:
        async with manager.hold("core:b", Lockset.of("workspace:S")):
            for _ in range(100):
                if sent:
                    break
                await asyncio.sleep(0.01)
    finally:
        await watch.close()
    assert [(lock.resource, lock.holders) for lock in sent[0]] == [("workspace", ["core:b"])]


def test_an_idle_manager_reports_an_empty_table() -> None:
    manager = LockManager()
    assert lock_states(manager.snapshot(), 0.0) == []
