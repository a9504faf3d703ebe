"""A core job held after a crash is shown wherever an operator or user looks (issue 12, point 8).

The crash of `test_recovery.py`: a core job's non-idempotent `choir.exec` is interrupted by
SIGKILL, and the resumed agent holds the job. Before, only a log warning and `session recover`
said so; now `status`, `agent status`, `agent list`, `session cores` (choirctl and the operator
API), the console (header, Agents, Cores) and the user's DM say it, each with the command that
decides — and once the operator decided, the job is no longer shown as held.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.protocol.operator.answers import HeldJobs
from choir.scripted import ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.test_recovery import killed_mid_append, launch, replies_until, script  # noqa: F401 — fixture
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import scripted_home
from tests.harness.processes import run_choirctl
from tests.tui.conftest import column
from tests.tui.pilot import console, show_tab, until
from tui.widgets.health import health_text

pytestmark = pytest.mark.slow

STATE = "held: unknown outcome of choir.exec"


@pytest.fixture
def home(
    root: Path,
    pg_params: ConnectParams,
    model: ScriptedModelServer,
) -> ChoirHome:
    return scripted_home(root, pg_params, model.url)


async def choirctl(home: ChoirHome, *args: str) -> str:
    done = await asyncio.to_thread(run_choirctl, home, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_held_job_is_shown_everywhere_with_what_to_do(home: ChoirHome, root: Path) -> None:
    (root / "ws").mkdir()
    appended = root / "ws" / "appended.txt"
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as operator:
        assert daemon.services is not None
        sent, session = await killed_mid_append(daemon, operator, root)
        await daemon.services.sessions.mark_crashed(session, "killed by the test")

        second = await launch(daemon, root, "second")
        try:
            decide = f"choirctl session recover {session} --job appender --choice "
            decide += "resume|read-only|abort"

            # the user's DM
            notice = (await replies_until(operator, sent.after_seq, "is on hold"))[-1]
            assert notice["category"] == "notice"
            assert notice["text"].startswith(
                "Core job appender is on hold: the agent restarted while choir.exec ran"
            )
            assert decide in notice["text"]

            async def held_in_status() -> bool:
                return bool((await operator.status()).held_jobs.count)

            await poll_until(held_in_status, within=10)

            # status
            held = (await operator.status()).held_jobs
            assert held.count == 1
            assert held.hint == f"choirctl session recover {session} --choice {CHOICES}"
            [job] = held.jobs
            assert (job.agent_id, job.session_id, job.job_name) == (
                "agent-1",
                session,
                "appender",
            )
            assert (job.state, job.hint) == (STATE, decide)
            shown = await choirctl(home, "status")
            assert f"held      1 core job(s) wait for a decision: {held.hint}" in shown
            assert f"agent-1 {session} appender: {STATE}" in shown

            # agent status and agent list
            status = await operator.agent_status("agent-1")
            assert [(j.job_name, j.state, j.hint) for j in status.held_jobs] == [
                ("appender", STATE, decide)
            ]
            shown = await choirctl(home, "agent", "status", "agent-1")
            assert f"HELD       core job appender: {STATE}; decide with {decide}" in shown
            assert "running, 1 held" in await choirctl(home, "agent", "list")

            # session cores
            [core] = (await operator.session_cores(session)).cores
            assert core.held is not None
            assert core.held.state == STATE
            assert core.held.calls[0].tool == "choir.exec"
            shown = await choirctl(home, "session", "cores", session)
            assert STATE in shown
            assert f"decide appender: {decide}" in shown
            cores_json = json.loads(await choirctl(home, "session", "cores", session, "--json"))
            assert cores_json["cores"][0]["held"]["hint"] == decide

            # the console: header, Agents, Cores
            async with console(home) as (app, pilot):
                await until(pilot, lambda: "held 1 core job" in health_text(app.state).plain)
                await until(
                    pilot,
                    lambda: column(app, "agents-table", "state")[0] == "running, 1 held",
                    what="the held count in the Agents tab",
                )
                await until(pilot, lambda: decide in _detail(app), what="the decide command")
                await show_tab(pilot, "cores")
                await until(pilot, lambda: column(app, "cores-table", "state") == [STATE])

                # decided: the job leaves every list
                await operator.session_recover(session, job_name="appender", choice="abort")
                await until(pilot, lambda: "held" not in health_text(app.state).plain)
                await until(pilot, lambda: column(app, "cores-table", "state") == ["terminated"])
            assert (await operator.status()).held_jobs == HeldJobs(count=0, jobs=[], hint=None)
            assert (await operator.agent_status("agent-1")).held_jobs == []
            [core] = (await operator.session_cores(session)).cores
            assert (core.state, core.held) == ("CORE_TERMINATED", None)
            assert appended.read_text() == "x\n"  # never run again
        finally:
            second.kill()
            await second.wait()


CHOICES = "resume|read-only|abort"


def _detail(app: Any) -> str:
    from textual.widgets import Static

    detail = app.query_one("#agent-detail", Static)
    return str(getattr(detail.render(), "plain", detail.render()))
