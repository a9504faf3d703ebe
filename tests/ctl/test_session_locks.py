"""`choirctl session locks`: the lock table the console's Locks tab shows, as a command."""

from __future__ import annotations

from choir.protocol import LockState, LockWaiter, ReportStatusRequest
from tests.daemon.operator_served import Operator, served_operator  # noqa: F401  (fixture)

from .test_operator_cmds import choirctl, start


async def test_session_locks_prints_the_reported_table(operator: Operator):
    agent = await start(operator.services)
    sid = agent.session_id

    empty = await choirctl(operator.home, "session", "locks", sid)
    table = [
        LockState(
            resource="workspace",
            mode="X",
            holders=["core:slow"],
            waiters=[LockWaiter(owner="edge", mode="S", waiting_s=0.5)],
            held_for_s=3.25,
        )
    ]
    report = ReportStatusRequest(lane="edge", state="EDGE_WAITING_TOOL", locks=table)
    operator.services.status.report(sid, report, operator.clock())
    human = await choirctl(operator.home, "session", "locks", sid)
    data = (await choirctl(operator.home, "session", "locks", sid, "--json")).json()
    unknown = await choirctl(operator.home, "session", "locks", "s-nope")

    assert (empty.code, empty.out) == (0, "(no locks)\n")
    assert human.out.splitlines()[1].split() == ["workspace", "X", "core:slow", "edge:S", "3.2s"]
    assert data["locks"][0]["holders"] == ["core:slow"]
    assert data["locks"][0]["waiters"] == [{"owner": "edge", "mode": "S", "waiting_s": 0.5}]
    assert unknown.code == 4
