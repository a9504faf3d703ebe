"""End to end in a real terminal: `choir tui` in tmux approves what a live agent proposed.

choird runs in the test process on the test session's Postgres; agent-1 runs on the process
runtime and proposes a tool through the scripted model, so a real approval is pending. Then the
real `choir tui` command starts in a detached tmux session of its own (a private tmux server,
120x40), and the test drives it like an operator: `send-keys` to press keys, `capture-pane` to
read the screen. Approving is checked where it counts: in choird.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from choir.home import ChoirHome
from tests.harness.processes import environment
from tests.tui.actions.conftest import Choird

# serial: the terminal is read on a clock (keys 0.1 s apart, polls with a deadline).
pytestmark = [
    pytest.mark.serial,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

CHOIR = Path(sys.executable).parent / "choir"


class Terminal:
    """A tmux session on a private server: keys in, screen text out."""

    def __init__(self, server: str) -> None:
        self.server = server

    async def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        process = await asyncio.create_subprocess_exec(
            "tmux", "-L", self.server, "-f", "/dev/null", *args,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
        if process.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {err.decode().strip()}")
        return out.decode()

    async def keys(self, *keys: str) -> None:
        for key in keys:
            await self.tmux("send-keys", "-t", "console", key)
            await asyncio.sleep(0.1)

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-t", "console")

    async def shows(self, text: str, within: float = 30.0) -> str:
        """The screen once it shows `text`; fails with the screen after `within` seconds."""
        began, seen = time.monotonic(), ""
        while time.monotonic() - began < within:
            seen = await self.screen()
            if text in seen:
                return seen
            await asyncio.sleep(0.1)
        raise AssertionError(f"the console never showed {text!r}; the screen was:\n{seen}")


@asynccontextmanager
async def choir_tui(home: ChoirHome, root: Path) -> AsyncIterator[Terminal]:
    """`choir tui --home <home>` running in a 120x40 tmux pane."""
    terminal = Terminal(f"choir-test-{os.getpid()}-{time.monotonic_ns()}")
    operator_home = root / "operator-home"
    operator_home.mkdir(exist_ok=True)
    env = environment(HOME=str(operator_home), TERM="xterm-256color", COLORTERM="truecolor")
    # pytest-xdist workers export COLUMNS=80/LINES=24, which Textual prefers to the pane's size
    for variable in ("COLUMNS", "LINES"):
        env.pop(variable, None)
    command = f"{CHOIR} tui --home {home.root}"
    await terminal.tmux(
        "new-session", "-d", "-s", "console", "-x", "120", "-y", "40", command, env=env
    )
    try:
        yield terminal
    finally:
        with contextlib.suppress(AssertionError):  # the console quit, the server went with it
            await terminal.tmux("kill-server")


async def test_choir_tui_in_a_terminal_approves_a_pending_approval(choird: Choird):
    await choird.start_agent()
    approval_id = (await choird.propose("tool"))["approval_id"]

    async with choir_tui(choird.home, choird.root) as terminal:
        await terminal.shows("approvals 1")  # the header, once connected and resynced
        await terminal.keys("6")
        screen = await terminal.shows(approval_id)
        assert "weather.lookup" in screen or "Operators keep asking" in screen
        await terminal.keys("a")
        await terminal.shows(f"Approve {approval_id} (tool) from agent-1?")
        await terminal.keys("y")
        await terminal.shows(f"{approval_id} approved")
        await terminal.shows("approvals 0")
        await terminal.keys("q")

    shown = await choird.client.approval_show(approval_id)
    assert (shown.status, shown.resolved_by) == ("approved", "choir tui")
