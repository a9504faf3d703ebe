"""`choir up` / `choir down` as a new user runs them: from an empty `$CHOIR_HOME` to a chat
reply, and back to nothing — no process, no lease.

Everything is real and runs as subprocesses: `choir up` initialises the home (embedded Postgres
from pgserver, the demo model), starts choird in the background and agent-1 on the process
runtime; `choirctl chat` talks to it; `choir down` stops it all.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest

from choir.home import ChoirHome
from choir.launch.choird_process import alive
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import connect_plain, wait_until_ready
from choir.store.postgres.target import DEFAULT_DATABASE
from tests.harness.processes import run_choir as choir
from tests.harness.processes import run_choirctl
from tests.security.process_agents import bwrap_works, sandbox_word

pytestmark = pytest.mark.slow


def processes_of(home: ChoirHome) -> list[str]:
    """Every live process whose command line names the home (choird, agents, Postgres)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(home.root) in command and alive(int(entry.name)):
            found.append(f"{entry.name}: {command}")
    return found


async def control_rows(home: ChoirHome) -> tuple[int, int]:
    """(leases held, active sessions) in the home's embedded Postgres, started just to look."""
    server = EmbeddedPostgres(home.pgdata)
    await asyncio.to_thread(server.start)
    try:
        params = server.params.with_database(DEFAULT_DATABASE)
        await wait_until_ready(params)
        conn = await connect_plain(params)
        try:
            leases = await conn.fetchval("SELECT count(*) FROM choir_control.leases")
            active = await conn.fetchval(
                "SELECT count(*) FROM choir_control.sessions WHERE status = 'active'"
            )
        finally:
            await conn.close()
    finally:
        await asyncio.to_thread(server.stop)
    return int(leases), int(active)


def test_up_from_an_empty_home_chat_and_down_leaves_nothing(root: Path) -> None:
    home = ChoirHome(root / "h")

    up = choir(home, "up", "--no-tui", "--runtime", "process")
    assert up.returncode == 0, up.stdout + up.stderr
    shown = up.stdout.splitlines()
    assert shown[0] == (
        f"home      {home.root}: created (embedded Postgres, console DM, "
        "demo model (scripted, not a real LLM))"
    )
    assert f"choird    starting in the background (log: {home.choird_log})" in shown
    assert any(re.fullmatch(r"choird    ready in \d+\.\d s \(pid \d+\)", line) for line in shown)
    assert "agent-1   built" in shown
    assert any(
        line.startswith("agent-1   started: session s-")
        and line.endswith(f"(new), process runtime ({sandbox_word()}), DM console")
        for line in shown
    )
    assert '  talk      choirctl chat agent-1 "hello"' in shown
    choird_pid = int(re.search(r"choird pid (\d+)", up.stdout).group(1))  # type: ignore[union-attr]

    reply = run_choirctl(home, "chat", "agent-1", "hello")
    assert reply.returncode == 0, reply.stderr
    assert reply.stdout.startswith("Hello! I'm choir's demo model")

    again = choir(home, "up", "--no-tui")
    status = run_choirctl(home, "agent", "status", "agent-1", "--json")
    agent = json.loads(status.stdout)
    assert again.returncode == 0, again.stderr
    assert f"choird    already running (pid {choird_pid})" in again.stdout
    assert f"agent-1   already running (session {agent['session_id']})" in again.stdout
    assert "choir     everything was already up" in again.stdout
    running = ("running", "process", bwrap_works())
    assert (agent["state"], agent["runtime"], agent["sandboxed"]) == running

    down = choir(home, "down")
    assert down.returncode == 0, down.stderr
    assert down.stdout.splitlines()[:2] == [
        "agent-1   stopping gracefully (session summary, final flush)",
        f"agent-1   stopped: session {agent['session_id']} stopped",
    ]
    assert f"(pid {choird_pid})" in down.stdout
    assert not alive(choird_pid)
    assert not alive(agent["pid"])
    assert processes_of(home) == []
    assert not home.operator_socket.exists()
    assert asyncio.run(control_rows(home)) == (0, 0)

    twice = choir(home, "down")
    assert (twice.returncode, twice.stdout) == (0, "choird    not running: nothing to stop\n")


def test_up_with_a_model_key_stores_it_as_a_secret_only(root: Path) -> None:
    from choir.launch.up_home import prepare_home

    home = ChoirHome(root / "keyed")
    key = "sk-or-test-key-not-real"
    ready = prepare_home(home, {"OPENROUTER_API_KEY": key})

    config = json.loads(home.config_file.read_text())
    secrets = json.loads(home.secrets_file.read_text())
    assert (ready.created, ready.model) == (True, "openrouter")
    assert config["models"]["openrouter"] == {
        "provider": "openrouter",
        "model": "anthropic/claude-sonnet-4",
        "endpoint": "https://openrouter.ai/api/v1",
        "secret": "openrouter-key",
    }
    assert config["agents"]["agent-1"]["defaults"]["llm"] == "openrouter"
    assert secrets == {"openrouter-key": key}
    assert home.secrets_file.stat().st_mode & 0o077 == 0
    assert key not in home.config_file.read_text()
    assert run_choirctl(home, "config", "check").returncode == 0
    kept = prepare_home(home, {"OPENAI_API_KEY": "other"})
    assert (kept.created, json.loads(home.config_file.read_text())) == (False, config)


def test_choird_gets_no_model_key_in_its_environment() -> None:
    from choir.launch.choird_process import daemon_environment

    env = daemon_environment({"OPENROUTER_API_KEY": "k", "PATH": "/bin", "CHOIR_HOME": "/x"})
    assert env == {"PATH": "/bin"}
