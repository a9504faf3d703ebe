"""`approval show` prints what a proposal would change as a diff — plain when piped, coloured on
a terminal, the raw payload with `--json` — and the Approvals tab shows the same diff."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess

import pytest

from tests.build.support import tool
from tests.harness.processes import BIN, environment, run_choirctl
from tests.lifecycle.support import commit_file
from tests.tui.actions.conftest import Choird
from tests.tui.pilot import console, show_tab, until
from tui.views.approvals import ApprovalsView

pytestmark = pytest.mark.slow

EXISTING = json.loads(tool("weather.lookup", "An older lookup."))
"""The tool file the agent repo holds already: a valid manifest the proposal replaces."""


async def test_approval_show_prints_the_tool_file_it_would_change_as_a_diff(choird: Choird):
    repo = choird.home.sources / "agents" / "agent-1"
    commit_file(repo, "tools/weather.lookup.json", json.dumps(EXISTING, indent=2) + "\n")
    await choird.start_agent()
    key = (await choird.propose("tool"))["approval_id"]

    plain = await asyncio.to_thread(run_choirctl, choird.home, "approval", "show", key)
    raw = await asyncio.to_thread(run_choirctl, choird.home, "approval", "show", key, "--json")
    coloured = await asyncio.to_thread(on_a_terminal, choird, "approval", "show", key)

    assert plain.returncode == 0, plain.stderr
    head, diff = plain.stdout.split("\ndiff:\n")
    assert '"rationale": "Operators keep asking about the weather."' in head
    assert '"manifest"' not in head  # the diff shows it
    assert diff.splitlines()[:2] == [
        "--- a/agent-1:tools/weather.lookup.json",
        "+++ b/agent-1:tools/weather.lookup.json",
    ]
    changed = [line.rstrip(",") for line in diff.splitlines() if line[:1] in "+-"]
    assert '-    "description": "An older lookup."' in changed
    assert '+    "description": "Look up today\'s weather for a city."' in changed
    assert "\x1b[" not in plain.stdout
    answer = json.loads(raw.stdout)
    assert answer["payload"]["manifest"]["llm"]["name"] == "weather.lookup"
    assert answer["diff"] == diff
    assert "\x1b[" in coloured
    assert "An older lookup." in coloured


async def test_the_approvals_tab_shows_a_config_change_as_a_coloured_diff(choird: Choird):
    await choird.start_agent()
    async with console(choird.home) as (app, pilot):
        await show_tab(pilot, "approvals")
        view = app.query_one(ApprovalsView)
        key = (await choird.propose("config change"))["approval_id"]
        await until(pilot, lambda: bool(view.diffs.get(key)), what="the proposal's diff")
        await pilot.press("e")

        detail = view.query_one("#approval-detail").render()
        text = str(detail)
        assert "--- a/config.json" in text
        assert '+  "approval_timeout_ms": 600000,' in text
        assert '"summary"' not in text.split("\ndiff\n")[0]  # prose, not JSON
        added = text.index('+  "approval_timeout_ms"')
        styles = {str(span.style) for span in detail.spans if span.start <= added < span.end}
        assert any("green" in style for style in styles), styles


def on_a_terminal(choird: Choird, *args: str) -> str:
    """What `choirctl args` writes to a terminal (a pty), escapes included."""
    leader, follower = pty.openpty()
    env = environment(CHOIR_HOME=str(choird.home.root), COLUMNS="200", TERM="xterm")
    env.pop("NO_COLOR", None)
    with subprocess.Popen(
        [str(BIN / "choirctl"), *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
        env=env,
    ) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")
