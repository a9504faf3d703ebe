"""Host and meta tools end to end: the agent's kernel → its own Unix socket → choird's services.

A real session (Postgres-backed leases and token), the real per-agent socket listener with the
agent handler, the agent's real `ControlPlane` client, and the kernel's arbiter. Host tools go
out as EXECUTE_HOST_TOOL; meta tools become pending approvals whose outcome is pushed back and
committed in the proposing lane.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from choir.agent.kernel.proposal import ToolProposal
from choir.agent.replication.control_plane import ControlPlane, ControlPlaneHostBridge
from choir.agent.wiring import Kernel, open_kernel
from choir.config import Budgets
from choir.core.budgets import BudgetLimits
from choir.daemon.agents.handler import AgentHandler
from choir.daemon.agents.host_tools import HostToolCall
from choir.daemon.agents.pushes import wire_pushes
from choir.daemon.agents.services import AgentServices
from choir.home import ChoirHome
from choir.protocol import ToolResult
from choir.transport import PushHub, RpcError, UdsServer, connect
from tests.harness.proposals import TOOL_PROPOSAL

SEEDS = Path(__file__).parents[2] / "seeds" / "global"
LANE_TOOLS = (
    "choir.core.spawn",
    "choir.core.inject",
    "choir.core.cancel",
    "choir.core.list",
    "choir.core.report",
)
UNIMPLEMENTED = frozenset(
    {
        *LANE_TOOLS,
        "choir.memory.compact",
        "choir.email.send",
        "choir.email.receive",
        "choir.email.check",
        "choir.notion.query",
        "choir.tts.speak",
        "choir.web.search",
    }
)


@dataclass
class Wired:
    kernel: Kernel
    control_plane: ControlPlane
    services: AgentServices
    hub: PushHub
    session_id: str


@pytest.fixture
async def wired(home: ChoirHome, services: AgentServices, tmp_path: Path) -> AsyncIterator[Wired]:
    started = await services.sessions.start("agent-1", {})
    hub = PushHub()
    disconnect = wire_pushes(services, hub)
    socket = home.agent_socket("agent-1")
    socket.parent.mkdir(parents=True, exist_ok=True)
    handler = AgentHandler(services.rpc, services.sessions, bound_agent="agent-1")
    root = tmp_path / "choir"
    shutil.copytree(SEEDS / "tools", root / "tools" / "global")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with UdsServer(socket, handler, hub=hub):
        client = await connect(
            socket, session_id=started.session_id, lease_token=started.lease_token
        )
        control_plane = ControlPlane(client)
        limits = BudgetLimits(**Budgets().model_dump())
        async with open_kernel(
            root,
            workspace,
            limits=limits,
            runtime_tools=UNIMPLEMENTED,
            host=ControlPlaneHostBridge(control_plane),
        ) as kernel:
            yield Wired(kernel, control_plane, services, hub, started.session_id)
        await control_plane.close()
    disconnect()


async def test_a_host_tool_runs_in_choird_through_execute_host_tool(wired: Wired) -> None:
    seen: list[HostToolCall] = []

    async def browse(call: HostToolCall) -> ToolResult:
        seen.append(call)
        return ToolResult.ok("rendered", title="Example")

    wired.services.host_tools.register("choir.web.browse", browse)
    proposal = ToolProposal("edge", "call-1", "choir.web.browse", {"url": "http://127.0.0.1/x"})
    result = await wired.kernel.arbiter.propose(proposal)
    assert result.status == "success", result
    assert result.data == {"title": "Example"}
    assert seen[0].context.agent_id == "agent-1"
    assert seen[0].input["url"] == "http://127.0.0.1/x"
    intent = next(e for e in wired.kernel.log if e.kind == "tool_call_committed")
    assert intent.event["locks"] == [{"resource": "browser_tab", "mode": "X"}]


async def test_a_host_tool_without_a_handler_is_a_structured_error(wired: Wired) -> None:
    proposal = ToolProposal(
        "edge", "call-2", "choir.memory.query", {"store": "knowledge", "mode": "text", "query": "x"}
    )
    result = await wired.kernel.arbiter.propose(proposal)
    assert result.status == "error"
    assert result.error_code == "unknown_host_tool"


async def test_a_meta_tool_never_executes_and_its_outcome_is_committed(wired: Wired) -> None:
    proposal = ToolProposal("edge", "call-3", "choir.propose.tool", dict(TOOL_PROPOSAL))
    result = await wired.kernel.arbiter.propose(proposal)
    assert result.status == "success", result
    approval_id = result.data["approval_id"]
    intent = next(e for e in wired.kernel.log if e.kind == "tool_call_committed")
    assert intent.event["locks"] == []
    pending = await wired.services.approvals.list(status="pending")
    assert [a.id for a in pending] == [approval_id]
    assert pending[0].request_type == "tool"

    # rejected, the agent is told at once (approved, a tool's outcome waits for its apply)
    pushes = wired.control_plane.pushes()
    await wired.services.approvals.reject(approval_id, by="choirctl")
    envelope = await asyncio.wait_for(anext(pushes), 5)
    assert envelope.push.kind == "approval_resolved"
    await pushes.aclose()
    entry = wired.kernel.arbiter.resolve_approval(approval_id, "rejected")
    assert entry is not None
    assert entry.lane == "edge"
    assert entry.event == {
        "kind": "approval_resolved",
        "approval_id": approval_id,
        "status": "rejected",
    }
    assert wired.kernel.arbiter.resolve_approval(approval_id, "rejected") is None


async def test_another_agents_lease_is_refused_on_this_socket(
    home: ChoirHome, services: AgentServices, wired: Wired
) -> None:
    other = await services.sessions.start("agent-2", {})
    client = await connect(
        home.agent_socket("agent-1"), session_id=other.session_id, lease_token=other.lease_token
    )
    try:
        with pytest.raises(RpcError, match="this socket serves another agent"):
            await client.call("REPORT_STATUS", {"lane": "edge", "state": "EDGE_IDLE"})
    finally:
        await client.close()


async def test_a_skill_that_would_not_load_is_refused_back_to_the_model(wired: Wired) -> None:
    spec = {
        "name": "triage",
        "description": "Sort notes.",
        "initial_state": "sort",
        "states": {
            "sort": {
                "objective": "Sort them.",
                "allowed_tools": ["choir.fs.wrte"],
                "transitions": [{"on": "complete", "to": "done"}],
            },
            "done": {"terminal": True},
        },
    }
    proposal = ToolProposal(
        "edge", "call-5", "choir.propose.skill", {"spec": spec, "rationale": "notes pile up"}
    )
    result = await wired.kernel.arbiter.propose(proposal)

    assert (result.status, result.error_code) == ("error", "proposal_refused"), result
    assert "unknown tool 'choir.fs.wrte'" in result.summary
    assert "did you mean 'choir.fs.write'" in result.summary
    assert await wired.services.approvals.list(status=None) == []  # nothing offered

    spec["states"]["sort"]["allowed_tools"] = ["choir.fs.read"]  # type: ignore[index]
    fixed = ToolProposal("edge", "call-6", proposal.tool, dict(proposal.arguments))
    result = await wired.kernel.arbiter.propose(fixed)
    assert result.status == "success", result
    [stored] = await wired.services.approvals.list()
    assert stored.content_sha256 is not None
    assert len(stored.content_sha256) == 64
