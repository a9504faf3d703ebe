"""The asyncio lock manager: waiting, wake-up order, and release on every exit path."""

from __future__ import annotations

import asyncio

import pytest

from choir.agent.kernel.locks import LockManager, LocksRevokedError
from choir.core.locks.lockset import Lockset, LockUsageError

A, B, C = "core:a", "core:b", "core:c"
X_FILE = Lockset.of("file:x:X")
S_FILE = Lockset.of("file:x:S")
WORKSPACE_X = Lockset.of("workspace:X")


async def settle() -> None:
    """Let every ready task run until it blocks again."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_hold_grants_inside_the_block_and_releases_after() -> None:
    manager = LockManager()

    async with manager.hold(A, Lockset.of("file:x:X", "choirtmp:X")) as hold:
        assert hold.held
        assert manager.holders_of(A) == {"file:x": "X", "choirtmp": "X"}

    assert not hold.held
    assert manager.idle


async def test_waiters_enter_in_fifo_order_with_writers_blocking_later_readers() -> None:
    manager = LockManager()
    entered: list[str] = []

    async def use(owner: str, lockset: Lockset) -> None:
        async with manager.hold(owner, lockset):
            entered.append(owner)
            await settle()

    holder = await manager.acquire(A, X_FILE)
    tasks = []
    for owner, lockset in [("edge", S_FILE), (B, X_FILE), (C, S_FILE)]:
        tasks.append(asyncio.create_task(use(owner, lockset)))
        await settle()
    assert manager.waiting == 3
    assert entered == []

    holder.release()
    await asyncio.gather(*tasks)

    assert entered == ["edge", B, C]
    assert manager.idle


async def test_readers_share_a_file() -> None:
    manager = LockManager()
    both_in = asyncio.Barrier(2)

    async def read(owner: str) -> None:
        async with manager.hold(owner, S_FILE):
            await both_in.wait()

    async with asyncio.timeout(5):
        await asyncio.gather(read("edge"), read(A))


async def test_two_cores_write_different_files_at_the_same_time() -> None:
    manager = LockManager()
    both_in = asyncio.Barrier(2)

    async def write(owner: str, path: str) -> None:
        async with manager.hold(owner, Lockset.of(f"file:{path}:X")):
            await both_in.wait()

    async with asyncio.timeout(5):
        await asyncio.gather(write(A, "src/auth.go"), write(B, "src/auth_test.go"))


async def test_writers_of_the_same_file_are_serialized() -> None:
    manager = LockManager()
    inside = 0
    most_inside = 0

    async def write(owner: str) -> None:
        nonlocal inside, most_inside
        for _ in range(3):
            async with manager.hold(owner, X_FILE):
                inside += 1
                most_inside = max(most_inside, inside)
                await settle()
                inside -= 1

    await asyncio.gather(write(A), write(B), write(C))

    assert most_inside == 1
    assert manager.idle


async def test_exec_waits_for_file_locks_and_blocks_new_ones() -> None:
    manager = LockManager()
    read = await manager.acquire(B, S_FILE)
    exec_call = asyncio.create_task(manager.acquire(A, WORKSPACE_X))
    await settle()
    late_read = asyncio.create_task(manager.acquire(C, Lockset.of("file:y:S")))
    await settle()
    assert not exec_call.done()
    assert not late_read.done()

    read.release()
    (await exec_call).release()
    (await late_read).release()

    assert manager.idle


async def test_edge_reads_files_during_a_core_exec() -> None:
    manager = LockManager()

    async with (
        manager.hold(A, WORKSPACE_X),
        asyncio.timeout(5),
        manager.hold("edge", Lockset.of("file:README.md:S")),
    ):
        assert manager.holders_of("edge") == {"file:README.md": "S"}


async def test_exception_inside_the_block_releases() -> None:
    manager = LockManager()

    with pytest.raises(ValueError, match="tool failed"):
        async with manager.hold(A, WORKSPACE_X):
            raise ValueError("tool failed")

    assert manager.idle


async def test_timeout_while_holding_releases() -> None:
    manager = LockManager()

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01), manager.hold(A, WORKSPACE_X):
            await asyncio.sleep(10)

    assert manager.idle


async def test_timeout_while_waiting_leaves_the_queue() -> None:
    manager = LockManager()
    holder = await manager.acquire(A, X_FILE)

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01), manager.hold(B, X_FILE):
            pytest.fail("granted while core:a held the file")

    assert manager.waiting == 0
    assert manager.snapshot()[0].waiters == ()
    holder.release()
    assert manager.idle


async def test_cancelling_a_holder_releases() -> None:
    manager = LockManager()
    entered = asyncio.Event()

    async def job() -> None:
        async with manager.hold(A, WORKSPACE_X):
            entered.set()
            await asyncio.sleep(10)

    task = asyncio.create_task(job())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert manager.idle


async def test_cancelling_a_waiter_removes_it_and_lets_later_readers_in() -> None:
    manager = LockManager()
    reader = await manager.acquire("edge", S_FILE)
    writer = asyncio.create_task(manager.acquire(B, X_FILE))
    await settle()
    late_reader = asyncio.create_task(manager.acquire(C, S_FILE))
    await settle()
    assert not late_reader.done()

    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer

    (await late_reader).release()
    reader.release()
    assert manager.idle


async def test_grant_landing_as_cancellation_arrives_is_handed_back() -> None:
    manager = LockManager()
    holder = await manager.acquire(A, X_FILE)
    waiter = asyncio.create_task(manager.acquire(B, X_FILE))
    await settle()
    next_in_line = asyncio.create_task(manager.acquire(C, X_FILE))
    await settle()

    holder.release()  # grants core:b: its future is resolved, its task not yet resumed
    assert manager.holders_of(B) == {"file:x": "X"}
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter

    async with asyncio.timeout(1):  # a leaked grant would block core:c forever
        (await next_in_line).release()
    assert manager.idle


async def test_cancellation_just_before_the_grant_does_not_leak_it() -> None:
    manager = LockManager()
    holder = await manager.acquire(A, X_FILE)
    waiter = asyncio.create_task(manager.acquire(B, X_FILE))
    await settle()
    next_in_line = asyncio.create_task(manager.acquire(C, X_FILE))
    await settle()

    waiter.cancel()  # cancels core:b's future; the task has not run yet
    holder.release()  # the table grants core:b, the manager gives it straight back
    with pytest.raises(asyncio.CancelledError):
        await waiter

    async with asyncio.timeout(1):  # a leaked grant would block core:c forever
        (await next_in_line).release()
    assert manager.idle


async def test_release_all_revokes_locks_and_fails_queued_requests() -> None:
    manager = LockManager()
    other = await manager.acquire(C, Lockset.of("browser_tab:X"))
    job_hold = await manager.acquire(A, WORKSPACE_X)
    job_wait = asyncio.create_task(manager.acquire(A, Lockset.of("browser_tab:X")))
    edge_wait = asyncio.create_task(manager.acquire("edge", Lockset.of("file:x:X")))
    await settle()

    manager.release_all(A)

    with pytest.raises(LocksRevokedError, match="locks of core:a were released"):
        await job_wait
    (await edge_wait).release()
    job_hold.release()  # revoked already: a no-op, not a double release
    assert manager.holders_of(A) == {}
    async with manager.hold(A, WORKSPACE_X):
        job_hold.release()  # still a no-op: it belongs to the revoked epoch
        assert manager.holders_of(A) == {"workspace": "X"}
    other.release()
    assert manager.idle


async def test_release_is_idempotent_and_a_hold_is_entered_once() -> None:
    manager = LockManager()
    hold = await manager.acquire(A, X_FILE)

    with pytest.raises(LockUsageError, match="through this hold"):
        await hold.acquire()
    hold.release()
    hold.release()

    assert manager.idle


async def test_misuse_raises_from_hold() -> None:
    manager = LockManager()

    async with manager.hold(A, S_FILE):
        with pytest.raises(LockUsageError, match="upgrades are not allowed"):
            async with manager.hold(A, X_FILE):
                pytest.fail("upgrade granted")
        assert manager.holders_of(A) == {"file:x": "S"}

    assert manager.idle


async def test_snapshot_lists_holders_and_waiters() -> None:
    manager = LockManager(clock=lambda: 42.0)
    holder = await manager.acquire(A, WORKSPACE_X)
    waiter = asyncio.create_task(manager.acquire(B, Lockset.of("file:a.py:X")))
    await settle()

    info = {i.resource: i for i in manager.snapshot()}
    assert info["workspace"].holders == (A,)
    assert info["workspace"].held_since == 42.0
    assert [(w.owner, w.mode) for w in info["file:a.py"].waiters] == [(B, "X")]

    holder.release()
    (await waiter).release()
    assert manager.snapshot() == []
