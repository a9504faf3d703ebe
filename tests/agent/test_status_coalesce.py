"""Lane reports are coalesced per lane (issue 13 point 7: the link's cost per model call).

Before, the agent sent one REPORT_STATUS per lane transition — several per model call, about
8 % of the agent's CPU in bench.step_e2e, and as many RPCs for choird to answer. choird keeps
only each lane's latest report, so now a burst of moves costs one report per lane per
`STATUS_COALESCE_S`, and the latest state of every lane always arrives — at once after a quiet
spell, and on `close()` even within the coalescing window.

Real Unix sockets: the agent's real `ControlPlane` and `StatusReporter` against a listener that
keeps reports in choird's real `StatusBoard` and counts the RPCs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.status import StatusReporter
from choir.protocol import LockState, ReportStatusRequest
from choir.transport import UdsServer, connect
from tests.agent.status_listener import StatusListener
from tests.harness.homes import short_root

LOCKS = [LockState(resource="file:notes.txt", mode="X", holders=["edge"], held_for_s=0.5)]
STATES = ["EDGE_REASONING", "EDGE_WAITING_TOOL"]


@pytest.fixture
def socket() -> Iterator[Path]:
    with short_root("sc-") as root:
        yield root / "choir.sock"


@pytest.fixture
async def choird(socket: Path) -> AsyncIterator[StatusListener]:
    choird = StatusListener()
    server = UdsServer(socket, choird)
    await server.start()
    try:
        yield choird
    finally:
        await server.close()


@pytest.fixture
async def control_plane(socket: Path, choird: StatusListener) -> AsyncIterator[ControlPlane]:
    control_plane = ControlPlane(await connect(socket, session_id="s-1", lease_token="t"))
    try:
        yield control_plane
    finally:
        await control_plane.close()


def state(lane: str, n: int) -> ReportStatusRequest:
    return ReportStatusRequest(
        lane=lane, state=STATES[n % 2], step=n, budget_remaining={"calls": 100 - n}
    )


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if condition():
                return
            await asyncio.sleep(0.005)


async def test_a_burst_of_moves_sends_each_lanes_latest_state_not_every_move(
    choird: StatusListener, control_plane: ControlPlane
) -> None:
    status = StatusReporter(control_plane, coalesce_s=0.2)
    try:
        for n in range(1, 51):  # two lanes move 50 times each within one window
            status.report(state("edge", n))
            status.report(state("core:job", n))
            await asyncio.sleep(0)
        await until(lambda: len(choird.board.lanes("s-1")) == 2)
        await until(lambda: choird.board.lanes("s-1")["edge"].report.step == 50)
        await until(lambda: choird.board.lanes("s-1")["core:job"].report.step == 50)
    finally:
        await status.close()
    # the first move went at once, the rest waited for the window: one more per lane
    assert len(choird.calls) <= 4, [(c.lane, c.step) for c in choird.calls]
    assert choird.board.lanes("s-1")["edge"].report == state("edge", 50)


async def test_close_sends_the_last_state_inside_the_window(
    choird: StatusListener, control_plane: ControlPlane
) -> None:
    status = StatusReporter(control_plane, coalesce_s=60)
    status.report(state("edge", 1))
    await until(lambda: len(choird.calls) == 1)
    status.report(state("edge", 2))
    status.report(state("edge", 3))  # replaces 2, which was never sent
    await asyncio.sleep(0.05)
    assert [c.step for c in choird.calls] == [1]  # held back: within the window
    async with asyncio.timeout(5):  # far less than the window: close does not wait it out
        await status.close()
    assert [c.step for c in choird.calls] == [1, 3]


async def test_a_lock_table_rides_on_the_next_report_even_when_it_is_replaced(
    choird: StatusListener, control_plane: ControlPlane
) -> None:
    status = StatusReporter(control_plane, coalesce_s=60)
    status.report(state("edge", 1))
    await until(lambda: len(choird.calls) == 1)
    status.report(state("edge", 2))
    status.report_locks(LOCKS)
    status.report(state("edge", 3))
    await status.close()
    locks = choird.board.locks("s-1")
    assert locks is not None
    assert list(locks.locks) == LOCKS
    assert choird.calls[-1].step == 3
    assert choird.calls[-1].locks == LOCKS


async def test_a_lone_move_after_a_quiet_spell_goes_at_once(
    choird: StatusListener, control_plane: ControlPlane
) -> None:
    status = StatusReporter(control_plane, coalesce_s=0.5)
    try:
        status.report(state("edge", 1))
        await until(lambda: len(choird.calls) == 1)
        await asyncio.sleep(0.6)  # quiet for longer than the window
        status.report(state("edge", 2))
        await until(lambda: len(choird.calls) == 2, within=0.4)  # not held back
    finally:
        await status.close()
