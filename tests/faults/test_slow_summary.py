"""A slow session summary at `agent stop` (§11.8, §17.2; issue 12 "Fault suites that stay").

The summary call may take up to `summary_timeout_ms`: choird must wait for it (its graceful
stop grace covers the lanes' safe point, the summary and the final flush) instead of sending
SIGTERM first, and `agent stop` must say when there is no summary — on stderr, in `--json` and
in choird's log — while the stop itself succeeds (exit 0).

A real choird on the process runtime spawns the real `choir-agent`, whose model is a scripted
server that answers the summary request slowly; `choirctl` runs as a subprocess.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import running_daemon, stored_events
from tests.harness.homes import read_config, scripted_home, write_config
from tests.lifecycle.support import chat, choirctl

pytestmark = pytest.mark.slow

SUMMARY = json.dumps(
    {"summary": "The user said hello.", "topics": ["greetings"], "decisions": [], "open_items": []}
)


def slow_summary(delay_ms: int) -> Script:
    return Script(
        steps=[
            ReplyStep(match=SUMMARY_MARKER, delay_ms=delay_ms, text=SUMMARY),
            ReplyStep(match="hello", repeat=True, text="Hello from the script."),
        ]
    )


async def stop_after_hello(
    root: Path, pg_params: ConnectParams, *, delay_ms: int, **timeouts: int
) -> tuple[Any, list[str], float]:
    """Start agent-1, chat once, stop it with `choirctl agent stop --json`: the finished
    command, the session's event kinds, and how long the stop took."""
    async with ScriptedModelServer(slow_summary(delay_ms)) as model:
        home = scripted_home(root, pg_params, model.url)
        configure(home, **timeouts)
        async with (
            running_daemon(home) as daemon,
            await ChoirClient.connect(home, call_timeout=None) as client,
        ):
            started = await client.agent_start("agent-1", {"dm": "console"})
            assert (await chat(client, "hello"))["text"] == "Hello from the script."
            began = time.monotonic()
            done = await choirctl(home, "agent", "stop", "agent-1", "--json")
            took = time.monotonic() - began
            events = await stored_events(daemon, started.session_id)
            assert any(SUMMARY_MARKER in json.dumps(r.body) for r in model.requests)
    return done, [e.event_type for e in events], took


def configure(home: ChoirHome, **timeouts: int) -> None:
    data = read_config(home)
    data.update(timeouts)
    write_config(home, data)


async def test_a_summary_slower_than_the_old_sigterm_is_waited_for_and_stored(
    root: Path, pg_params: ConnectParams
) -> None:
    # 17 s: past the 15 s after which choird used to send SIGTERM, within the summary timeout
    done, kinds, took = await stop_after_hello(
        root, pg_params, delay_ms=17_000, summary_timeout_ms=25_000, stop_timeout_ms=1_000
    )
    assert done.returncode == 0, done.stderr
    stopped = json.loads(done.stdout)
    assert stopped["status"] == "stopped"
    assert stopped["exit_code"] == 0
    summary = stopped["summary"]
    assert (summary["stored"], summary["skipped"], summary["warn"]) == (True, None, False)
    assert kinds[-1] == "session_summary"
    assert summary["rev"] == len(kinds)
    assert summary["detail"] == f"stored (rev {len(kinds)})"
    assert done.stderr == ""
    assert 17 <= took < 25


async def test_a_summary_past_its_timeout_is_skipped_and_stop_says_so(
    root: Path, pg_params: ConnectParams, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="choird.lifecycle")
    done, kinds, took = await stop_after_hello(
        root, pg_params, delay_ms=20_000, summary_timeout_ms=1_500, stop_timeout_ms=1_000
    )
    assert done.returncode == 0, done.stderr
    stopped = json.loads(done.stdout)
    assert stopped["status"] == "stopped"
    summary = stopped["summary"]
    assert (summary["stored"], summary["skipped"], summary["warn"]) == (False, "timed_out", True)
    why = "the model did not answer within 1.5 s (summary_timeout_ms in config.json)"
    assert summary["detail"] == f"skipped: {why}"
    assert done.stderr == f"warning: agent-1 has no session summary: skipped: {why}\n"
    assert "session_summary" not in kinds
    assert took < 10  # the configured timeout, not the model's 20 s
    [record] = [r for r in caplog.records if r.name == "choird.lifecycle"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "agent stopped without a session summary"


async def test_stop_prints_the_stored_summary(root: Path, pg_params: ConnectParams) -> None:
    async with ScriptedModelServer(slow_summary(0)) as model:
        home = scripted_home(root, pg_params, model.url)
        async with (
            running_daemon(home),
            await ChoirClient.connect(home, call_timeout=None) as client,
        ):
            started = await client.agent_start("agent-1", {"dm": "console"})
            await chat(client, "hello")
            done = await choirctl(home, "agent", "stop", "agent-1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"agent-1 stopped: session {started.session_id} stopped"
    assert lines[1].startswith("summary: stored (rev ")
    assert done.stderr == ""


async def test_the_console_stop_warns_of_a_missing_summary(
    root: Path, pg_params: ConnectParams
) -> None:
    from tests.tui.actions.conftest import confirmation, notes
    from tests.tui.conftest import column
    from tests.tui.pilot import console, until

    async with ScriptedModelServer(slow_summary(20_000)) as model:
        home = scripted_home(root, pg_params, model.url)
        configure(home, summary_timeout_ms=1_500, stop_timeout_ms=1_000)
        async with (
            running_daemon(home),
            await ChoirClient.connect(home, call_timeout=None) as client,
        ):
            await client.agent_start("agent-1", {"dm": "console"})
            await chat(client, "hello")
            async with console(home) as (app, pilot):
                await until(pilot, lambda: column(app, "agents-table", "state")[0] == "running")
                await pilot.press("x")
                await confirmation(pilot)  # a loaded machine mounts the dialog late
                await pilot.press("y")
                await until(pilot, lambda: column(app, "agents-table", "state")[0] == "stopped")
                warning = (
                    "warning",
                    "agent-1: no session summary — skipped: the model did not answer within "
                    "1.5 s (summary_timeout_ms in config.json)",
                )
                await until(pilot, lambda: warning in notes(app), what="the summary warning")
