"""A stopped tool call keeps its locks until its work has really stopped (§7.4, §9.4).

The file tools run in a thread, which cannot be interrupted. The `fs.read.in_thread` and
`fs.write.in_thread` failpoints make that thread sleep — work that no cancellation can cut
short — while the call times out or its lane is cancelled, and another lane wants the same file.
Each test checks: the other lane gets the file only after the thread returned; the `Cancelled`
event and the call's result are committed while the call still holds its locks; a write stopped
before its point of no return leaves the file as it was. `fs.write.before_rename` sleeps past
that point: the write then finishes, and its real result is what gets committed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from choir import failpoints
from choir.agent.kernel.commitlog import LogEntry
from choir.agent.wiring import Kernel, open_kernel
from choir.failpoints import ENV_VAR
from tests.agent.test_arbiter import (
    UNIMPLEMENTED,
    call,
    limits,
    make_root,
    until_held,
    until_waiting,
)

THREAD_MS = 600
"""How long a failpoint keeps the tool's thread busy."""
NOTES = "one\ntwo\nthree\n"


@pytest.fixture
def arm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    monkeypatch.setattr(failpoints, "_armed", None)
    monkeypatch.delenv(ENV_VAR, raising=False)

    def arm(spec: str) -> None:
        failpoints.arm_from_env({ENV_VAR: spec})

    yield arm
    failpoints.arm_from_env({})


def with_timeout(root: Path, tool: str, timeout_ms: int) -> None:
    """Give `tool` a short timeout through an agent manifest replacing the global one."""
    manifest = json.loads((root / "tools" / "global" / f"{tool}.json").read_text())
    manifest["runtime"]["timeout_ms"] = timeout_ms
    (root / "tools" / "agent" / f"{tool}.json").write_text(json.dumps(manifest))


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[Kernel]:
    root = make_root(tmp_path)
    with_timeout(root, "choir.fs.read", 100)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(NOTES)
    async with open_kernel(root, workspace, limits=limits(), runtime_tools=UNIMPLEMENTED) as k:
        for job in ("reader", "writer"):
            assert k.arbiter.policy.start_job(job) is None
        yield k


def locks_at_commit(kernel: Kernel, lane: str) -> dict[str, dict[str, str]]:
    """For each `cancelled` / `tool_result_committed` event of `lane`: what `lane` held as it
    was committed (the log calls listeners inside the append)."""
    seen: dict[str, dict[str, str]] = {}

    def watch(entry: LogEntry) -> None:
        if entry.lane == lane and entry.kind in ("cancelled", "tool_result_committed"):
            seen[entry.kind] = dict(kernel.locks.holders_of(lane))

    kernel.log.subscribe(watch)
    return seen


async def until_written(kernel: Kernel, content: str) -> None:
    """Until `choir.fs.write`'s thread has flushed all of `content` to its temp file next to the
    target: it is past its last cancellation check, into the fsync and the armed failpoint's
    sleep. (A fixed sleep guessed that; parallel test load made the guess wrong.)"""
    size = len(content.encode())

    def written() -> bool:
        found = kernel.workspace.root.glob(".choir-write-*.tmp")
        return any(path.stat().st_size == size for path in found)

    async with asyncio.timeout(10):
        while not written():  # noqa: ASYNC110 - a file in a thread's hands has no event
            await asyncio.sleep(0.005)


def events_of(kernel: Kernel, call_id: str) -> list[str]:
    return [e.kind for e in kernel.log if e.event.get("call_id") == call_id]


async def test_a_timed_out_read_holds_its_lock_until_its_thread_returns(
    kernel: Kernel, arm: Callable[[str], None]
) -> None:
    arm(f"fs.read.in_thread=sleep({THREAD_MS})")
    at_commit = locks_at_commit(kernel, "core:reader")
    read = call("core:reader", "choir.fs.read", path="notes.txt")
    started = time.monotonic()
    reading = asyncio.create_task(kernel.arbiter.propose(read))
    await until_held(kernel, "core:reader")  # it times out at 100 ms; its thread sleeps on

    write = call("core:writer", "choir.fs.write", path="notes.txt", op="append", content="four\n")
    written = await kernel.arbiter.propose(write)
    waited = time.monotonic() - started

    result = await reading
    assert result.status == "timeout"
    assert written.status == "success"
    assert waited >= THREAD_MS / 1000, f"the writer got the file after {waited:.2f}s"
    assert events_of(kernel, read.call_id)[-2:] == ["cancelled", "tool_result_committed"]
    [stopped] = [e for e in kernel.log if e.kind == "cancelled"]
    assert stopped.event["call_id"] == read.call_id
    assert stopped.event["target"] == "core:reader"
    assert "did not finish within 0.1 s" in stopped.event["reason"]
    assert at_commit == {
        "cancelled": {"file:notes.txt": "S"},
        "tool_result_committed": {"file:notes.txt": "S"},
    }
    kinds = [e.kind for e in kernel.log]
    write_intent = next(
        i
        for i, e in enumerate(kernel.log)
        if e.event.get("call_id") == write.call_id and e.kind == "tool_call_committed"
    )
    assert kinds.index("tool_result_committed") < write_intent
    assert kernel.locks.idle
    kernel.log.verify()


async def test_a_cancelled_write_stops_before_its_rename_and_holds_its_lock_until_then(
    kernel: Kernel, arm: Callable[[str], None]
) -> None:
    arm(f"fs.write.in_thread=sleep({THREAD_MS})")
    at_commit = locks_at_commit(kernel, "core:writer")
    write = call("core:writer", "choir.fs.write", path="notes.txt", op="overwrite", content="new")
    started = time.monotonic()
    writing = asyncio.create_task(kernel.arbiter.propose(write))
    await until_written(kernel, "new")  # the thread wrote its temp file; it sleeps before renaming
    writing.cancel()

    read = await kernel.arbiter.propose(call("core:reader", "choir.fs.read", path="notes.txt"))
    read_at = time.monotonic() - started
    with pytest.raises(asyncio.CancelledError):
        await writing

    assert read.data["content"] == NOTES  # nothing of the cancelled write, then or later
    assert read_at >= THREAD_MS / 1000, f"the reader got the file after {read_at:.2f}s"
    await asyncio.sleep(0.1)
    assert (kernel.workspace.root / "notes.txt").read_text() == NOTES
    assert sorted(p.name for p in kernel.workspace.root.iterdir()) == [".choirtmp", "notes.txt"]
    assert events_of(kernel, write.call_id) == [
        "tool_call_requested",
        "tool_call_committed",
        "cancelled",
        "tool_result_committed",
    ]
    committed = kernel.arbiter.committed_result(write.call_id)
    assert committed is not None
    assert committed.status == "cancelled"
    assert at_commit == {
        "cancelled": {"file:notes.txt": "X"},
        "tool_result_committed": {"file:notes.txt": "X"},
    }
    assert kernel.locks.idle
    kernel.log.verify()


async def test_a_second_cancel_does_not_cut_the_wait_for_the_thread_short(
    kernel: Kernel, arm: Callable[[str], None]
) -> None:
    arm(f"fs.write.in_thread=sleep({THREAD_MS})")
    write = call("core:writer", "choir.fs.write", path="notes.txt", op="overwrite", content="new")
    started = time.monotonic()
    writing = asyncio.create_task(kernel.arbiter.propose(write))
    await until_written(kernel, "new")
    writing.cancel()
    await asyncio.sleep(0.1)  # a while later, the thread still asleep: cancel again
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    assert time.monotonic() - started >= THREAD_MS / 1000
    assert kernel.locks.idle
    assert (kernel.workspace.root / "notes.txt").read_text() == NOTES


async def test_a_call_cancelled_while_it_waits_for_locks_commits_cancelled(
    kernel: Kernel, arm: Callable[[str], None]
) -> None:
    arm(f"fs.write.in_thread=sleep({THREAD_MS // 2})")
    holder = asyncio.create_task(
        kernel.arbiter.propose(
            call("core:writer", "choir.fs.write", path="notes.txt", op="append", content="x")
        )
    )
    await until_held(kernel, "core:writer")
    read = call("core:reader", "choir.fs.read", path="notes.txt")
    waiting = asyncio.create_task(kernel.arbiter.propose(read))
    await until_waiting(kernel)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert events_of(kernel, read.call_id) == [
        "tool_call_requested",
        "cancelled",
        "tool_result_committed",
    ]
    assert (await holder).status == "success"
    assert kernel.locks.idle


async def test_a_write_stopped_past_its_point_of_no_return_commits_what_it_did(
    kernel: Kernel, arm: Callable[[str], None]
) -> None:
    arm(f"fs.write.before_rename=sleep({THREAD_MS})")
    at_commit = locks_at_commit(kernel, "core:writer")
    write = call("core:writer", "choir.fs.write", path="notes.txt", op="append", content="four\n")
    writing = asyncio.create_task(kernel.arbiter.propose(write))
    await asyncio.sleep(0.15)  # past the point of no return, before the rename
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    assert (kernel.workspace.root / "notes.txt").read_text() == NOTES + "four\n"
    assert events_of(kernel, write.call_id)[-1] == "tool_result_committed"
    assert "cancelled" not in events_of(kernel, write.call_id)
    committed = kernel.arbiter.committed_result(write.call_id)
    assert committed is not None
    assert committed.status == "success"
    assert committed.summary.endswith("(it finished as it was being stopped)")
    assert at_commit == {"tool_result_committed": {"file:notes.txt": "X"}}
    assert kernel.locks.idle
