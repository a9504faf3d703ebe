"""The agent tells a new connection its lanes' status again (issue 12: held state after a restart).

choird keeps every lane's state, budgets left, held core jobs and the lock table in memory only
(`StatusBoard`). Before, an agent reported a lane only when it moved, so after its connection
to choird was lost and made again — a choird restart adopting it — `status` showed no lanes, no
held job and no remaining calls until each lane happened to move. Now the agent's reconnecting
client tells the `StatusReporter` of every new connection, and it sends every lane's latest
report (held calls included) and the lock table again at once.

Real Unix sockets: the agent's real `ReconnectingClient`, `ControlPlane` and `StatusReporter`
against a listener that keeps reports in choird's real `StatusBoard`. The listener is closed
(the connection drops) and a new one with an empty board opens on the same socket, as a
restarted choird would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.link import ReconnectingClient
from choir.agent.replication.status import StatusReporter
from choir.protocol import LockState, ReportStatusRequest
from choir.protocol.wire.payloads import HeldCall
from choir.transport import TransportError, UdsServer
from tests.agent.status_listener import StatusListener
from tests.harness.homes import short_root

HELD = [HeldCall(call_id="core:report-3-0", tool="choir.exec")]
LOCKS = [LockState(resource="file:notes.txt", mode="X", holders=["edge"], held_for_s=0.5)]


@pytest.fixture
def socket() -> Iterator[Path]:
    with short_root("sr-") as root:
        yield root / "choir.sock"


@pytest.fixture
async def reporter(socket: Path) -> AsyncIterator[tuple[ReconnectingClient, StatusReporter]]:
    client = ReconnectingClient(socket, session_id="s-1", lease_token="t", connect_patience_s=5)
    reporter = StatusReporter(ControlPlane(client))
    try:
        yield client, reporter
    finally:
        await reporter.close()
        await client.close()


async def serving(socket: Path) -> tuple[StatusListener, UdsServer]:
    choird = StatusListener()
    server = UdsServer(socket, choird)
    await server.start()
    return choird, server


async def until_reported(choird: StatusListener, lanes: set[str], within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while True:
            if set(choird.board.lanes("s-1")) == lanes and choird.board.locks("s-1") is not None:
                return
            await asyncio.sleep(0.02)


async def heartbeat(client: ReconnectingClient) -> None:
    """What the heartbeat sender does after a loss: the call that finds the channel gone fails,
    the next one connects afresh."""
    async with asyncio.timeout(5):
        while True:
            try:
                await client.call("HEARTBEAT", {})
                return
            except TransportError:
                await asyncio.sleep(0.05)


async def test_a_new_connection_hears_every_lanes_status_again(
    socket: Path, reporter: tuple[ReconnectingClient, StatusReporter]
) -> None:
    client, status = reporter
    first, server = await serving(socket)
    status.report(ReportStatusRequest(lane="edge", state="EDGE_IDLE", budget_remaining={"x": 7}))
    status.report(ReportStatusRequest(lane="core:report", state="CORE_IDLE", held=HELD))
    status.report_locks(LOCKS)
    await until_reported(first, {"edge", "core:report"})
    await server.close()  # choird went away: the agent's connection is gone

    restarted, server = await serving(socket)  # a new choird, knowing nothing
    try:
        await heartbeat(client)
        await until_reported(restarted, {"edge", "core:report"})
    finally:
        await server.close()
    lanes = restarted.board.lanes("s-1")
    assert lanes["edge"].report.budget_remaining == {"x": 7}
    assert lanes["core:report"].report.held == HELD
    assert restarted.board.held() == {"s-1": {"core:report": HELD}}
    locks = restarted.board.locks("s-1")
    assert locks is not None
    assert list(locks.locks) == LOCKS
