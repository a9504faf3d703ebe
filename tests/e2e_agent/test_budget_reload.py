"""A budget lowered by `config load` + `config apply` binds running sessions (§7.6, §16.3), and
`agent status` shows what is really left (issue 12, points 3 and 9).

The real `choir-agent` with a scripted model whose core jobs call `choir.exec` for ever: the
budget is lowered while a job runs, and the job must stop at the new limit with the usual budget
outcome; a new job in the same session must obey it from its start. Set-up as `test_lanes.py`.
"""

from __future__ import annotations

from typing import Any

import pytest

from choir.scripted import ReplyStep, Script, ToolCallsStep
from tests.e2e_agent.test_agent_process import Agent
from tests.e2e_agent.test_lanes import (  # noqa: F401 — `launch` is a fixture
    Launch,
    durable,
    launch,
    replies_until,
    run,
    spawn,
)
from tests.harness.daemons import poll_until, stored_events
from tests.harness.homes import read_config, write_config

pytestmark = pytest.mark.slow

GRIND_SCRIPT = Script(
    steps=[
        ToolCallsStep(match="grind one", calls=[spawn("grind-1", "Tick for ever.")]),
        ToolCallsStep(match="grind two", calls=[spawn("grind-2", "Tick for ever.")]),
        ReplyStep(after="tool", match_regex=r"grind-\d started", repeat=True, text="Started."),
        ReplyStep(match="hello", repeat=True, text="Hello."),
        # a core job's requests match only this step: one slow call per step, never a report
        ToolCallsStep(repeat=True, calls=[run("sleep 0.5; echo tick")]),
    ]
)


async def reload_budgets(agent: Agent, **budgets: int) -> None:
    """Edit config.json's budgets, then `config load` and `config apply`, as an operator does."""
    home = agent.daemon.home
    data = read_config(home)
    data.setdefault("budgets", {}).update(budgets)
    write_config(home, data)
    await agent.operator.config_load()
    await agent.operator.config_apply()


async def refuse_the_question(agent: Agent, budget: str, limit: int) -> str:
    """The job ran out and asked to extend `budget` (issue 19): refuse, so it stops as before."""
    from tests.e2e_agent.test_budget_ask import question

    asked = await question(agent, within=30)
    assert (asked.payload["budget"], asked.payload["limit"]) == (budget, limit)
    await agent.operator.approval_reject(asked.approval_id)
    return f"the extension was refused ({asked.approval_id})"


async def intents(agent: Agent, lane: str) -> list[dict[str, Any]]:
    """The calls `lane` ran: their committed intents (exec is not idempotent: durable first)."""
    events = await stored_events(agent.daemon, agent.session_id)
    return [e.payload for e in events if e.lane == lane and e.event_type == "tool_call_committed"]


async def ended_with(agent: Agent, job: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job's `core_stopped` and its last core event (the `error` it ended with)."""
    events = await stored_events(agent.daemon, agent.session_id)
    lane = f"core:{job}"
    [stopped] = [e.payload for e in events if e.lane == lane and e.event_type == "core_stopped"]
    emitted = [e.payload for e in events if e.lane == lane and e.event_type == "core_event_emitted"]
    return stopped, emitted[-1]["event"]


@pytest.mark.serial  # the reload must land within about one 0.5 s tick of the running job
async def test_a_budget_lowered_mid_job_stops_it_and_binds_the_next_job(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(GRIND_SCRIPT)
    sent = await agent.operator.chat_send("agent-1", "grind one")

    async def two_calls_made() -> bool:
        return len(await intents(agent, "core:grind-1")) >= 2

    await poll_until(two_calls_made, within=15)
    await reload_budgets(agent, per_job_max_tool_calls=3)
    refused = await refuse_the_question(agent, "per_job_max_tool_calls", 3)
    replies = await replies_until(agent, sent.after_seq, "core_report", within=30)
    report = f"core job grind-1 exceeded per_job_max_tool_calls (3); {refused}"
    assert replies[-1]["text"] == f"core job grind-1 terminated: {report}"
    await durable(agent, "core_stopped")
    assert len(await intents(agent, "core:grind-1")) == 3
    stopped, error = await ended_with(agent, "grind-1")
    assert (stopped["outcome"], stopped["report"]) == ("terminated", report)
    assert (error["kind"], error["code"]) == ("error", "budget_exceeded")

    status = await agent.operator.agent_status("agent-1")
    assert status.budgets["per_job_max_tool_calls"] == 3

    sent = await agent.operator.chat_send("agent-1", "grind two")
    await refuse_the_question(agent, "per_job_max_tool_calls", 3)
    replies = await replies_until(agent, sent.after_seq, "core_report", within=30)
    assert replies[-1]["text"].startswith("core job grind-2 terminated: ")

    async def three_calls_made() -> bool:
        return len(await intents(agent, "core:grind-2")) == 3

    await poll_until(three_calls_made, within=5)
    # two spawns by edge, three calls by each job: edge's figure follows every one of them
    left = 500 - 2 - 3 - 3

    async def remaining_is_live() -> bool:
        status = await agent.operator.agent_status("agent-1")
        return status.budget_remaining.get("max_tool_calls_per_session") == left

    await poll_until(remaining_is_live, within=5)


async def test_agent_status_shows_the_reloaded_budget_left(launch: Launch) -> None:  # noqa: F811
    agent = await launch(GRIND_SCRIPT)
    await agent.chat("hello")
    status = await agent.operator.agent_status("agent-1")
    assert status.budget_remaining["max_tool_calls_per_session"] == 500
    await reload_budgets(agent, max_tool_calls_per_session=40, max_core_jobs=7)

    async def reloaded() -> bool:
        left = (await agent.operator.agent_status("agent-1")).budget_remaining
        return (left["max_tool_calls_per_session"], left["max_core_jobs"]) == (40, 7)

    await poll_until(reloaded, within=5)
