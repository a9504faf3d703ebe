"""Bad input to the lifecycle commands: one line naming the problem and the fix, the documented
exit code, no traceback, and nothing leased or started."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from tests.harness.daemons import running_daemon
from tests.harness.homes import read_config, write_config
from tests.harness.processes import run_choir
from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import choirctl, one_error_line

pytestmark = pytest.mark.slow


def choir(home: ChoirHome, *args: str) -> subprocess.CompletedProcess[str]:
    return run_choir(home, *args, timeout=120)


async def start(home: ChoirHome, *flags: str) -> str:
    """The one error line of a refused `choirctl agent start agent-1 flags`."""
    done = await choirctl(home, "agent", "start", "agent-1", *flags)
    return one_error_line(done, done.returncode)


UNKNOWN_NAMES = [
    ("--workspace", "workspace", "default, other"),
    ("--llm", "model", "demo, demo-2"),
    ("--voice-profile", "voice profile", "none configured"),
    ("--git-identity", "git identity", "agent-1, agent-2"),
    ("--notion", "Notion integration", "none configured"),
    ("--email", "email account", "none configured"),
    ("--dm", "DM", "console, ops"),
]
"""Every start flag: (flag, what the message calls it, the known names it lists)."""


async def test_an_unknown_name_in_any_start_flag_lists_the_known_ones(choird: Choird) -> None:
    daemon, client = choird
    for flag, noun, known in UNKNOWN_NAMES:
        flags = [flag, "nope"] if flag == "--dm" else ["--dm", "console", flag, "nope"]
        done = await choirctl(daemon.home, "agent", "start", "agent-1", *flags)
        assert one_error_line(done, 2) == (
            f"error: cannot start agent-1: {flag}: no {noun} named 'nope' (known: {known})"
        )
    assert (await client.session_list("agent-1")).sessions == []


async def test_conflicts_name_each_resource_and_its_holder(choird: Choird) -> None:
    daemon, client = choird
    holder = await client.agent_start("agent-2", {"dm": "ops"})
    session = holder.session_id
    held_by = f"is leased to agent-2 (session {session}): stop agent-2 or pass"

    workspace = await start(daemon.home, "--dm", "console", "--workspace", "other")
    dm = await start(daemon.home, "--dm", "ops")
    identity = await start(daemon.home, "--dm", "console", "--git-identity", "agent-2")
    both = await start(daemon.home, "--dm", "ops", "--workspace", "other")
    again = await choirctl(daemon.home, "agent", "start", "agent-2", "--dm", "ops")

    assert workspace == f"error: workspace 'other' {held_by} --workspace"
    assert dm == f"error: DM 'ops' {held_by} --dm"
    assert identity == f"error: git identity 'agent-2' {held_by} --git-identity"
    assert f"workspace 'other' {held_by} --workspace" in both
    assert f"DM 'ops' {held_by} --dm" in both
    assert one_error_line(again, 5) == (
        f"error: agent-2 is already running (session {session}): "
        "stop it first with choirctl agent stop agent-2"
    )
    assert (await client.session_list("agent-1")).sessions == []
    await client.agent_stop("agent-2")


async def test_session_choice_and_unknown_agents(choird: Choird) -> None:
    daemon, _ = choird
    home = daemon.home
    both = await choirctl(
        home, "agent", "start", "agent-1", "--dm", "console", "--new-session", "--resume", "s-1"
    )
    unknown_session = await choirctl(
        home, "agent", "start", "agent-1", "--dm", "console", "--resume", "s-nope"
    )
    no_dm = await choirctl(home, "agent", "start", "agent-1")
    unknown_agent = {
        verb: await choirctl(home, "agent", verb, "agent-9")
        for verb in ("start", "stop", "restart", "update", "status")
    }

    assert one_error_line(both, 2) == "error: pass either --new-session or --resume, not both"
    assert one_error_line(unknown_session, 4).startswith("error: agent-1 has no session 's-nope'")
    assert no_dm.returncode == 2
    assert "--dm" in no_dm.stderr
    for verb, done in unknown_agent.items():
        if verb == "start":
            done = await choirctl(home, "agent", "start", "agent-9", "--dm", "console")
        line = one_error_line(done, 4)
        assert "no agent named 'agent-9'" in line, verb
        assert "agent-1, agent-2" in line, verb


async def test_a_missing_workspace_directory_leases_nothing(home: ChoirHome, root: Path) -> None:
    data = read_config(home)
    data["workspaces"]["gone"] = {"path": str(root / "not-there")}
    write_config(home, data)
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        done = await choirctl(
            home, "agent", "start", "agent-1", "--dm", "console", "--workspace", "gone"
        )
        sessions = (await client.session_list("agent-1")).sessions
        leases = (await client.workspace_list()).workspaces
    assert one_error_line(done, 2) == (
        f"error: workspace gone is missing ({root / 'not-there'}): create the directory or "
        "bind another with --workspace"
    )
    assert sessions == []
    assert all(w.leased_to is None for w in leases)


async def test_choir_up_and_down_refusals(choird: Choird) -> None:
    daemon, _ = choird
    home = daemon.home
    unknown = await asyncio.to_thread(choir, home, "up", "--no-tui", "--agent", "agent-9")
    bad_runtime = choir(home, "up", "--runtime", "podman")
    unknown_command = choir(home, "sideways")

    assert one_error_line(unknown, 4) == (
        "choir up: error: no agent named 'agent-9' (known: agent-1, agent-2): pass --agent <id>"
    )
    assert bad_runtime.returncode == 2
    assert "invalid choice: 'podman'" in bad_runtime.stderr
    assert unknown_command.returncode == 2
    assert "invalid choice: 'sideways'" in unknown_command.stderr


def test_choir_up_on_an_invalid_config_says_what_choird_said(root: Path) -> None:
    home = ChoirHome(root / "broken")
    home.root.mkdir()
    home.config_file.write_text('{"agents": {"agent-1": {}}}\n')
    home.secrets_file.write_text("{}\n")
    home.secrets_file.chmod(0o600)

    done = choir(home, "up", "--no-tui", "--runtime", "process")
    down = choir(home, "down")

    line = one_error_line(done, 3)
    assert line.startswith("choir up: error: choird did not start: ")
    assert "config.json" in line
    assert (down.returncode, down.stdout.strip()) == (0, "choird    not running: nothing to stop")
