"""`agent.start` / `agent.stop` on the process runtime, as choirctl drives them.

A real choird in the test process on a home `choirctl init` made (its demo model: `scripted`
with no endpoint, so choir-agent serves the demo script itself), the test session's Postgres,
and the real `choir-agent` spawned by choird's process runtime.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.daemon.runtimes.process import merge_tree
from choir.errors import ConflictError, UsageError
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import SessionStatus
from tests.harness.agent_logs import agent_log_text
from tests.harness.chat import reply_to
from tests.harness.daemons import leased, poll_until, running_daemon, session_row
from tests.harness.homes import external_postgres, make_home
from tests.harness.processes import gone
from tests.security.process_agents import bwrap_works

pytestmark = pytest.mark.slow


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params))


@pytest.fixture
async def choird(home: ChoirHome) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        yield daemon, client


async def test_start_chat_and_graceful_stop(choird: tuple[ChoirDaemon, ChoirClient]) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    assert (started.runtime, started.sandboxed, started.resumed) == (
        "process",
        bwrap_works(),
        False,
    )
    session_id = started.session_id

    reply = await reply_to(client, "hello", within=20)
    assert reply["text"].startswith("Hello!")
    listed = {a.agent_id: a for a in (await client.agent_list()).agents}
    assert listed["agent-1"].state == "running"
    with pytest.raises(ConflictError, match="already running"):
        await client.agent_start("agent-1", {"dm": "console"})

    stopped = await client.agent_stop("agent-1")
    assert (stopped.status, stopped.exit_code) == ("stopped", 0)
    assert (await session_row(daemon, session_id)).status == SessionStatus.STOPPED
    assert await leased(daemon, session_id) == set()
    assert gone(started.pid)
    assert agent_log_text(daemon.home, "agent-1")  # archived at the exit
    tree = daemon.home.root / "runtime" / "agent-1" / "choir"
    assert (tree / "version.json").is_file()
    assert (tree / "tools" / "global" / "choir.fs.read.json").is_file()


async def test_an_unknown_model_is_refused_naming_the_known_ones(
    choird: tuple[ChoirDaemon, ChoirClient],
) -> None:
    daemon, client = choird
    with pytest.raises(UsageError, match=r"--llm: no model named 'gpt-9' \(known: demo\)"):
        await client.agent_start("agent-1", {"dm": "console", "llm": "gpt-9"})
    assert daemon.runtime is not None
    assert daemon.runtime.running("agent-1") is None


async def test_a_killed_agent_is_marked_crashed_and_its_leases_released(
    choird: tuple[ChoirDaemon, ChoirClient],
) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    await reply_to(client, "hello", within=20)
    os.kill(started.pid, signal.SIGKILL)

    async def crashed() -> bool:
        row = await session_row(daemon, started.session_id)
        return row.status == SessionStatus.CRASHED

    assert await poll_until(crashed, within=3) < 3
    assert await leased(daemon, started.session_id) == set()
    resumed = await client.agent_start("agent-1", {"dm": "console"})
    assert (resumed.session_id, resumed.resumed) == (started.session_id, True)
    await client.agent_stop("agent-1")


def test_the_tree_merges_agent_over_global(tmp_path: Path) -> None:
    global_repo, agent_repo, tree = tmp_path / "g", tmp_path / "a", tmp_path / "tree"
    files = {
        global_repo / "identity" / "USER.md": "global user",
        global_repo / "identity" / "SOUL.md": "global soul",
        global_repo / "identity" / "SOUL-CORE.md": "global core",
        global_repo / "skills" / "s.json": "global s",
        global_repo / "skills" / "g.json": "global g",
        global_repo / "tools" / "t.json": "global t",
        agent_repo / "identity" / "SOUL.md": "agent soul",
        agent_repo / "identity" / "USER.md": "agent user",
        agent_repo / "skills" / "s.json": "agent s",
        agent_repo / "tools" / "t.json": "agent t",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    merge_tree(global_repo, agent_repo, tree)
    assert (tree / "USER.md").read_text() == "global user"
    assert (tree / "SOUL.md").read_text() == "agent soul"
    assert (tree / "SOUL-CORE.md").read_text() == "global core"
    assert (tree / "skills" / "s.json").read_text() == "agent s"
    assert (tree / "skills" / "g.json").read_text() == "global g"
    assert (tree / "tools" / "global" / "t.json").read_text() == "global t"
    assert (tree / "tools" / "agent" / "t.json").read_text() == "agent t"


def test_choirctl_agent_start_requires_dm() -> None:
    from typer.testing import CliRunner

    from choir.ctl.agent.commands import app

    result = CliRunner().invoke(app, ["start", "agent-1"])
    assert result.exit_code == 2
    assert "--dm" in result.output
