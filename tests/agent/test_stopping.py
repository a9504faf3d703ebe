"""Graceful stop's machinery (§17.2) on a real kernel: the drain gate, settling, hurrying.

The live-agent behaviour (a tool in flight finishing, the deadline, SIGTERM twice, a restart)
is in `tests/e2e_agent/test_graceful_stop.py`; these pin the pieces it is built from.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.agent.replication.live_config import DynamicConfig, DynamicState
from choir.agent.stopping import STOPPING, Drain, settle, unless_hurried
from choir.agent.wiring import Kernel, open_kernel
from tests.agent.test_arbiter import UNIMPLEMENTED, call, limits, make_root


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[Kernel]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("one\n")
    async with open_kernel(
        make_root(tmp_path), workspace, limits=limits(), runtime_tools=UNIMPLEMENTED
    ) as k:
        yield k


async def test_once_stopping_a_new_call_is_answered_and_committed_never_run(
    kernel: Kernel,
) -> None:
    drain = Drain()
    kernel.arbiter.add_gate(drain.gate)
    before = await kernel.arbiter.propose(call("edge", "choir.fs.read", path="notes.txt"))
    assert before.status == "success"

    drain.begin("shutdown (stop)")
    after = await kernel.arbiter.propose(
        call("edge", "choir.fs.write", path="new.txt", op="overwrite", content="x")
    )
    assert after.error_code == STOPPING
    assert after.summary == "choir.fs.write was not run: the agent is stopping (shutdown (stop))"
    assert not (kernel.workspace.root / "new.txt").exists()
    kinds = [entry.kind for entry in kernel.log][-2:]
    assert kinds == ["tool_call_requested", "tool_result_committed"]  # the transcript stays valid
    assert kernel.arbiter.unresolved_intents() == []


def test_a_second_request_hurries_and_keeps_the_first_reason() -> None:
    drain = Drain()
    assert not drain.draining
    drain.begin("shutdown (restart)", resumes=True)
    assert (drain.draining, drain.hurried, drain.resumes) == (True, False, True)
    drain.begin("SIGTERM")
    assert (drain.hurried, drain.reason, drain.resumes) == (True, "shutdown (restart)", True)


def state_with(**config: int) -> DynamicState:
    return DynamicState(DynamicConfig.of(1, config))


async def test_lanes_that_reach_their_safe_point_end_by_themselves() -> None:
    drain = Drain()

    async def lane() -> None:
        await drain.wait()
        await asyncio.sleep(0.05)  # finishing the call in flight

    task = asyncio.create_task(lane())
    drain.begin("stop")
    assert await settle(task, drain, state_with(stop_timeout_ms=2_000)) is True
    assert task.done()
    assert not task.cancelled()


async def test_lanes_past_the_deadline_are_cancelled() -> None:
    drain = Drain()
    cleaned: list[str] = []

    async def lane() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append("committed a cancelled result")

    task = asyncio.create_task(lane())
    drain.begin("stop")
    began = asyncio.get_running_loop().time()
    assert await settle(task, drain, state_with(stop_timeout_ms=100)) is False
    assert asyncio.get_running_loop().time() - began < 1
    assert task.cancelled()
    assert cleaned == ["committed a cancelled result"]


async def test_a_hurried_stop_cancels_at_once_and_skips_the_summary() -> None:
    drain = Drain()
    task = asyncio.create_task(asyncio.sleep(30))
    drain.begin("stop")
    asyncio.get_running_loop().call_later(0.05, drain.begin, "SIGTERM")
    assert await settle(task, drain, state_with(stop_timeout_ms=60_000)) is False

    summary = asyncio.sleep(30, result="summary")
    assert await unless_hurried(summary, drain) is None
    assert await unless_hurried(asyncio.sleep(0, result="quick"), Drain()) == "quick"
