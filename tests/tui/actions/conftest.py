"""A real choird (and agent) for the console's action views, and the console driven on it.

choird runs in the test process on the test session's Postgres; agent-1 is started through the
operator API like the console would (process runtime: the real `choir-agent` subprocess, with a
private HOME) and talks to a `ScriptedModelServer` owned by the test. Asking it to "propose a
tool" makes it call `choir.propose.tool`, so an approval is requested the way agents request
them. Test modules import `console`, `until` and `show_tab` from here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from tests.harness.cluster import serving
from tests.harness.homes import read_config
from tests.harness.proposals import TOOL_PROPOSAL
from tests.tui.pilot import until
from tui.app import ChoirApp
from tui.dialogs import ConfirmDialog

CONFIG_PROPOSAL: dict[str, Any] = {
    "summary": "Give operators ten minutes to answer approvals",
    "patch": {"approval_timeout_ms": 600_000, "event_window_size": None},
    "rationale": "Half an hour is too long to wait.",
}

RESTART_PROPOSAL: dict[str, Any] = {
    "summary": "Sign my commits with a clearer name",
    "patch": {"git_identities": {"agent-1": {"name": "choir agent one"}}},
    "rationale": "The operator asked for it.",
}
"""Takes effect only when agent-1 restarts: approved only with the restart choice."""

SCRIPT = Script(
    description="the console's action views: proposals, replies and a core job",
    steps=[
        ReplyStep(after="tool", match="proposal submitted", repeat=True, text="Proposed."),
        ReplyStep(after="tool", match="job-a started", repeat=True, text="Started job-a."),
        ReplyStep(after="tool", match="done.txt", repeat=True, text="Wrote done.txt."),
        ToolCallsStep(
            match="propose a tool",
            repeat=True,
            calls=[ScriptedCall(name="choir.propose.tool", arguments=TOOL_PROPOSAL)],
        ),
        ToolCallsStep(
            match="propose a restart change",
            repeat=True,
            calls=[ScriptedCall(name="choir.propose.config_change", arguments=RESTART_PROPOSAL)],
        ),
        ToolCallsStep(
            match="propose a config change",
            repeat=True,
            calls=[ScriptedCall(name="choir.propose.config_change", arguments=CONFIG_PROPOSAL)],
        ),
        ToolCallsStep(
            match="start a job",
            repeat=True,
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={"job_name": "job-a", "task_spec": "Write finished into done.txt."},
                )
            ],
        ),
        ReplyStep(match="hello", repeat=True, text="Hello from the script."),
        ToolCallsStep(
            calls=[
                ScriptedCall(
                    name="choir.fs.write",
                    arguments={"path": "done.txt", "op": "overwrite", "content": "finished\n"},
                )
            ],
            repeat=True,
        ),
    ],
)


@dataclass
class Choird:
    """choird in the test process, its operator client and the scripted model agents use."""

    daemon: ChoirDaemon
    client: ChoirClient
    home: ChoirHome
    model: ScriptedModelServer
    root: Path

    async def start_agent(self, agent_id: str = "agent-1") -> str:
        """Start `agent_id` on the process runtime; its session id."""
        started = await self.client.agent_start(agent_id)
        return str(started.session_id)

    async def propose(self, what: str = "tool", agent_id: str = "agent-1") -> dict[str, Any]:
        """Have the agent propose something; the pending approval choird stored."""
        before = {a.approval_id for a in (await self.client.approval_list()).approvals}
        await self.client.chat_send(agent_id, f"please propose a {what}")
        began = time.monotonic()
        while time.monotonic() - began < 20:
            for approval in (await self.client.approval_list()).approvals:
                if approval.approval_id not in before:
                    return dict(approval)
            await asyncio.sleep(0.05)
        raise AssertionError(f"{agent_id} proposed no {what} within 20 s")


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def other(home: ChoirHome) -> Path:
    """Workspace `other` (agent-2's), holding a stale file."""
    path = Path(read_config(home)["workspaces"]["other"]["path"])
    path.mkdir(parents=True, exist_ok=True)
    (path / "old.txt").write_text("stale\n")
    return path


@pytest.fixture
async def choird(home: ChoirHome, root: Path, model: ScriptedModelServer) -> AsyncIterator[Choird]:
    """choird serving `home` (agents it starts get a HOME of their own under it)."""
    async with serving(home, call_timeout=30) as (daemon, client):
        yield Choird(daemon, client, home, model, root)


def notes(app: ChoirApp) -> list[tuple[str, str]]:
    """The notifications on screen now, as (severity, message)."""
    return [(note.severity, note.message) for note in app._notifications]


async def confirmation(pilot: Pilot[Any]) -> ConfirmDialog:
    """The confirmation dialog the last key opened."""
    await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmDialog), what="a dialog")
    dialog = pilot.app.screen
    assert isinstance(dialog, ConfirmDialog)
    return dialog
