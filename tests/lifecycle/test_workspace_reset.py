"""`workspace reset` stops the leasing agent first (§15.4); `.choirtmp` exists in every
workspace an agent starts on and after every reset."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from choir.home import ChoirHome
from choir.store.sessions import SessionStatus
from tests.harness.daemons import leased, session_row
from tests.harness.processes import gone
from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import chat, choirctl

pytestmark = pytest.mark.slow

SCRATCH = [".choirtmp", ".choirtmp/recv", ".choirtmp/send"]


def workspace(home: ChoirHome) -> Path:
    return home.workspaces / "default"


def entries(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


async def test_reset_stops_the_agent_gracefully_then_empties_the_workspace(
    choird: Choird,
) -> None:
    daemon, client = choird
    shutil.rmtree(workspace(daemon.home) / ".choirtmp")
    started = await client.agent_start("agent-1", {"dm": "console"})
    assert entries(workspace(daemon.home)) == SCRATCH  # made at start when missing
    await chat(client, "hello")
    (workspace(daemon.home) / "notes.txt").write_text("scratch work")

    reset = await client.workspace_reset("default")

    assert reset.stopped.model_dump(mode="json") == {
        "agent_id": "agent-1",
        "session_id": started.session_id,
        "status": "stopped",
        "exit_code": 0,
        "summary": reset.stopped.summary.model_dump(mode="json"),
    }
    assert reset.stopped.summary.stored is True
    assert reset.removed == 2  # notes.txt, .choirtmp
    assert entries(workspace(daemon.home)) == SCRATCH
    assert gone(started.pid)
    row = await session_row(daemon, started.session_id)
    assert row.status == SessionStatus.STOPPED
    assert await leased(daemon, started.session_id) == set()
    listed = {w.name: w for w in (await client.workspace_list()).workspaces}
    assert listed["default"].leased_to is None


async def test_choirctl_reset_names_the_agent_it_stopped(choird: Choird) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    other = await client.agent_start("agent-2", {"dm": "ops"})

    done = await choirctl(daemon.home, "workspace", "reset", "default", "--yes")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"agent-1 stopped first: session {started.session_id}",
        f"workspace default reset: 1 entries removed from {workspace(daemon.home)}",
    ]
    listed = {a.agent_id: a.state for a in (await client.agent_list()).agents}
    assert listed == {"agent-1": "stopped", "agent-2": "running"}  # only the holder stops
    assert other.session_id == (await client.agent_status("agent-2")).session_id
    await client.agent_stop("agent-2")
