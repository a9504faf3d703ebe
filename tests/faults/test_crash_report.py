"""A crashed agent is reported where an operator looks, with why, when and the next step (issue 12).

Two agents on the shared cluster (`tests/harness/`), the console open on them; then a real kill -9
of agent-1. Before, `choirctl status` said only "agents 1 of 2 running", `agent status` and
`agent list` said "crashed" with nothing to do about it, and `chat` answered "agent-1 is not
running: start it first (agent agent-1)". Now, each within 5 s of the kill: `status` (text and
--json), `agent status`, `agent list` and a refused `chat` name the agent, the cause from the
session row (killed by SIGKILL), when, and the command that resumes its session; the console's
header names it and its Agents detail says `s` resumes it. The operator runs exactly that
command, and everything is healthy again within 10 s with nothing else repaired.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from tests.faults.conftest import ClusterOf
from tests.faults.invariants import InvariantChecker, checker_for
from tests.faults.test_large_events import STEPS as LARGE_STEPS
from tests.faults.test_large_events import TAMPER
from tests.harness.cluster import Cluster, probe_step
from tests.harness.daemons import poll_until, pool_of
from tests.lifecycle.support import choirctl, one_error_line
from tests.tui.pilot import console, show_tab, until
from tui.widgets.health import health_text

# serial: the invariants hold each failure report to 5 s and each recovery to 10 s; under
# parallel load on two cores the other workers' CPU use breaks those budgets, not choird.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

KILLED = re.compile(
    r"choir-agent (was killed by signal 9 \(SIGKILL\)|exited with code 137 \(killed by signal 9 "
    r"\(SIGKILL\)\)) without ending its session"
)
"""The process runtime's wrapper reports the signal itself, bwrap as 128 + 9."""


def resumes(session_id: str) -> str:
    return (
        f"choirctl agent start agent-1 --dm console resumes session {session_id} "
        "(add --new-session to start afresh)"
    )


async def shown(cluster: Cluster, checker: InvariantChecker, *args: str, expect: str) -> str:
    """Run `choirctl args` until its output contains `expect`; the checker times it from the
    kill (within 5 s, naming a next step)."""

    async def probe() -> str | None:
        done = await choirctl(cluster.home, *args)
        output = done.stdout + done.stderr
        return output if expect in output else None

    return (await checker.reported(probe)).text


async def test_a_killed_agent_is_reported_everywhere_with_the_step_that_resumes_it(
    cluster_of: ClusterOf,
) -> None:
    cluster = await cluster_of([probe_step()], agents=2)
    started = {agent_id: await cluster.start(agent_id) for agent_id in cluster.agents}
    session = started["agent-1"]["session_id"]
    checker = checker_for(cluster)
    assert await cluster.answers("agent-1")

    async with console(cluster.home) as (app, pilot):
        await until(pilot, lambda: app.state.running_count() == 2, what="both agents running")
        checker.fault("kill -9 of agent-1")
        await cluster.kill("agent-1")

        async def on_console() -> str | None:
            await pilot.pause(0.05)
            header = health_text(app.state).plain
            return (
                header if "down agent-1 crashed — press s in Agents to resume" in header else None
            )

        surfaces = await asyncio.gather(
            checker.reported(on_console),
            shown(cluster, checker, "status", expect=resumes(session)),
            shown(cluster, checker, "status", "--json", expect=session),
            shown(cluster, checker, "agent", "status", "agent-1", expect=resumes(session)),
            shown(cluster, checker, "agent", "list", expect=resumes(session)),
            shown(cluster, checker, "chat", "agent-1", "hello?", expect=resumes(session)),
        )
        header, status_text, status_json, agent_status, agent_list, chat = (
            surfaces[0].text,
            *surfaces[1:],
        )

        # status: one DOWN line with the cause, when, and the step
        [down] = [line for line in status_text.splitlines() if line.startswith("DOWN")]
        step = re.escape(resumes(session))
        assert re.fullmatch(
            rf"DOWN      agent-1 crashed \d+s ago \({KILLED.pattern}\): {step}", down
        )
        [outage] = json.loads(status_json)["agents"]["interrupted"]
        assert (outage["agent_id"], outage["session_id"], outage["status"]) == (
            "agent-1",
            session,
            "crashed",
        )
        assert KILLED.fullmatch(outage["reason"]), outage["reason"]
        assert outage["ended_at"] is not None
        assert outage["next_step"] == "choirctl agent start agent-1 --dm console"
        assert outage["new_session"] == "choirctl agent start agent-1 --dm console --new-session"
        assert outage["resumes"] is True
        # agent status, agent list: the same, for this agent only
        assert "DOWN       agent-1 crashed" in agent_status
        listed = [line for line in agent_list.splitlines() if resumes(session) in line]
        assert len(listed) == 1
        assert listed[0].startswith("agent-1 crashed ")
        assert "agent-2" not in "".join(listed)
        as_json = await choirctl(cluster.home, "agent", "status", "agent-1", "--json")
        assert json.loads(as_json.stdout)["interrupted"] == outage
        # chat: refused with one line, the cause and the step
        refused = await choirctl(cluster.home, "chat", "agent-1", "hello?")
        line = one_error_line(refused, 5)
        assert re.fullmatch(
            rf"error: agent-1 is not running: session {session} crashed \d+ s ago "
            rf"\({KILLED.pattern}\); {re.escape(resumes(session))}",
            line,
        ), line
        assert "start it first" not in chat
        # the console: the header (above), and the Agents detail
        assert "agent-2" not in header.split("down ")[1]
        await show_tab(pilot, "agents")
        await until(
            pilot,
            lambda: "press s to resume it, or run " + resumes(session) in _detail(app),
            what="the crash and its next step in the Agents detail",
        )
        assert KILLED.search(_detail(app)), _detail(app)

        # the operator does what the report said, and nothing else
        done = await choirctl(cluster.home, "agent", "start", "agent-1", "--dm", "console")
        assert done.returncode == 0, done.stderr
        assert f"session {session} (resumed)" in done.stdout
        await checker.healthy(lambda: cluster.answers("agent-1"))
        await until(pilot, lambda: "down" not in health_text(app.state).plain, within=10)
    assert (await cluster.client.status()).agents.interrupted == []
    assert (await cluster.client.agent_status("agent-1")).interrupted is None
    verdict = await checker.verify(cluster.conversations.values())
    print(verdict.timings)  # each surface's report, and the recovery, after the kill


async def test_a_failed_resume_is_reported_with_its_cause_and_a_fresh_start(
    cluster_of: ClusterOf,
) -> None:
    """A resume that cannot work leaves the agent crashed: `status` says the resume failed, why,
    and that a new session is the way out."""
    cluster = await cluster_of(LARGE_STEPS)
    session = (await cluster.start("agent-1"))["session_id"]
    await cluster.say("agent-1", "first medium reply please")
    await cluster.kill("agent-1")
    await poll_until(lambda: crashed(cluster), within=15)
    async with pool_of(cluster.daemon).acquire() as conn:
        await conn.execute(TAMPER, session)
    failed = await choirctl(cluster.home, "agent", "start", "agent-1", "--dm", "console")
    assert failed.returncode == 1, failed.stderr

    [outage] = (await cluster.client.status()).agents.interrupted
    assert outage.reason.startswith("resume failed: ")
    assert "hash does not match" in outage.reason
    assert outage.new_session == "choirctl agent start agent-1 --dm console --new-session"
    shown_text = (await choirctl(cluster.home, "status")).stdout
    assert "DOWN      agent-1 crashed " in shown_text
    assert "(resume failed: " in shown_text
    assert "add --new-session to start afresh" in shown_text


async def crashed(cluster: Cluster) -> bool:
    return await cluster.state("agent-1") == "crashed"


def _detail(app: Any) -> str:
    from textual.widgets import Static

    detail = app.query_one("#agent-detail", Static)
    return str(getattr(detail.render(), "plain", detail.render()))
