"""The console's monitoring views on a real choird: fixtures and helpers.

choird runs in the test process (`running_daemon`, the production composition root) on the test
session's Postgres, with the process runtime: agents are real `choir-agent` subprocesses, each with
a private HOME under the test's short root, talking to a `ScriptedModelServer` the test owns.
The console is the real `ChoirApp` under Textual's pilot, connected over the operator socket.

The script: "start the slow job" spawns core job `slow`, whose first step runs `sleep` with
`choir.exec` — holding the workspace lock (X) for `SLOW_S` seconds, long enough to watch.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from tests.harness.cluster import serving
from tui.app import ChoirApp

SLOW_S = 8
"""How long the slow job's command holds the workspace lock."""

SCRIPT = Script(
    description="the console's monitoring views: a core job holding the workspace lock",
    steps=[
        ToolCallsStep(
            match="start the slow job",
            repeat=True,
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={"job_name": "slow", "task_spec": "Run the slow command."},
                )
            ],
        ),
        ReplyStep(after="tool", repeat=True, text="Done."),
        ReplyStep(match="hello", repeat=True, text="Hello from the script."),
        # what is left is a core job's first request: the slow command
        ToolCallsStep(
            repeat=True,
            calls=[ScriptedCall(name="choir.exec", arguments={"command": f"sleep {SLOW_S}"})],
        ),
    ],
)


@dataclass
class Live:
    """choird in the test process, its operator client, the scripted model and the root."""

    daemon: ChoirDaemon
    client: ChoirClient
    home: ChoirHome
    model: ScriptedModelServer
    root: Path


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
async def live(home: ChoirHome, root: Path, model: ScriptedModelServer) -> AsyncIterator[Live]:
    """choird serving `home` (the harness's); agents still running at the end are stopped."""
    async with serving(home) as (daemon, client):
        yield Live(daemon, client, home, model, root)


def cell_text(value: object) -> str:
    return str(getattr(value, "plain", value))


def column(app: ChoirApp, table_id: str, key: str) -> list[str]:
    """The plain text of one column of a view's DataTable, top to bottom."""
    from textual.widgets import DataTable

    table: DataTable[Any] = app.query_one(f"#{table_id}", DataTable)
    return [cell_text(table.get_cell(row, key)) for row in table.rows]


async def settle(seconds: float = 0.1) -> None:
    await asyncio.sleep(seconds)
