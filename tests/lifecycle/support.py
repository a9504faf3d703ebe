"""What the lifecycle tests share: a real choird on the process runtime, chats, process checks.

choird runs in the test process (`running_daemon`, the production composition root) on the
test session's Postgres; agents are real `choir-agent` processes it spawns, each with a private
HOME under the test's root. `choirctl` runs as a subprocess from a thread, so the event loop
keeps serving choird meanwhile.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from choir.client import ChoirClient
from choir.config.scaffolding.gitrepo import git
from choir.home import ChoirHome
from tests.harness.chat import reply_to
from tests.harness.processes import run_choirctl

REPLY_TIMEOUT_S = 20


async def choirctl(home: ChoirHome, *args: str) -> subprocess.CompletedProcess[str]:
    """`choirctl args` against `home`'s choird, without blocking the loop that serves it."""
    return await asyncio.to_thread(run_choirctl, home, *args)


async def chat(client: ChoirClient, text: str, agent_id: str = "agent-1") -> dict[str, Any]:
    """The agent's reply to `text` over the console DM."""
    return await reply_to(client, text, agent_id, within=REPLY_TIMEOUT_S)


def commit_file(repo: Path, relative: str, text: str) -> str:
    """Write `text` to `relative` in the git repo `repo` and commit it; the new HEAD."""
    path = repo / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git(repo, "add", "--", relative)
    git(repo, "commit", "-q", "-m", f"change {relative}")
    return git(repo, "rev-parse", "HEAD").strip()


def one_error_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The single `error: …` line a refused command printed; asserts the exit code too."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]
