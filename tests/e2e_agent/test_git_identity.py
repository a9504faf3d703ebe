"""The leased git identity reaches the running agent's git (§14.4), and its token stays in memory.

A real choird starts the real choir-agent on the process runtime; agent-1's git identity has
the `git-token` secret (tests/harness/homes.py). Real git, run with the agent's HOME, must commit as
the identity and get the token from `git credential fill` for github.com only — and the token
must appear nowhere on disk: not in the agent's HOME, not in its log. The agent runs unsandboxed
(`CHOIR_BWRAP=`), so that its HOME is a host directory this test's git can use; inside the
sandbox, `tests/runtime/test_process_sandbox.py` asks the agent's own git.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.daemon.runtimes.bwrap import BWRAP_ENV
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.harness.agent_logs import agent_log_text
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import GIT_TOKEN, external_postgres, make_home

pytestmark = pytest.mark.slow


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params))


@pytest.fixture
async def choird(
    home: ChoirHome, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    monkeypatch.setenv(BWRAP_ENV, "")
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        yield daemon, client


async def git(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Real git with only the agent's HOME (no system config, never prompting)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(home / ".choir" / "gitconfig"),  # what the agent's tools get
    }
    process = await asyncio.create_subprocess_exec(
        "git",
        *args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out, err = await process.communicate(stdin.encode())
    return subprocess.CompletedProcess(args, process.returncode or 0, out.decode(), err.decode())


def files_containing(root: Path, text: str) -> list[Path]:
    """Regular files under `root` whose bytes contain `text`."""
    needle = text.encode()
    return [
        path
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes()
    ]


async def test_the_agent_commits_as_its_identity_and_serves_the_token_to_github_only(
    choird: tuple[ChoirDaemon, ChoirClient],
) -> None:
    daemon, client = choird
    await client.agent_start("agent-1", {"dm": "console"})
    agent_home = daemon.home.root / "runtime" / "agent-1" / "home"
    socket = agent_home / ".choir" / "cred.sock"

    async def configured() -> bool:
        email = await git(agent_home, "config", "--global", "user.email")
        return email.stdout.strip() == "agent-1@choir.local" and socket.is_socket()

    await poll_until(configured, within=20, every=0.1)
    name = await git(agent_home, "config", "--global", "user.name")
    assert name.stdout.strip() == "choir agent-1"
    assert oct(socket.stat().st_mode & 0o777) == oct(0o600)

    github = await git(
        agent_home, "credential", "fill", stdin="url=https://github.com/org/repo.git\n\n"
    )
    assert github.returncode == 0, github.stderr
    assert f"password={GIT_TOKEN}" in github.stdout.splitlines()
    evil = await git(
        agent_home, "credential", "fill", stdin="url=https://evil.example.com/org/repo.git\n\n"
    )
    assert evil.returncode != 0
    assert GIT_TOKEN not in evil.stdout + evil.stderr

    assert files_containing(agent_home, GIT_TOKEN) == []
    await client.agent_stop("agent-1")
    assert not socket.exists()
    assert files_containing(agent_home, GIT_TOKEN) == []
    assert agent_log_text(daemon.home, "agent-1")  # archived at the exit
    assert files_containing(daemon.home.logs, GIT_TOKEN) == []
