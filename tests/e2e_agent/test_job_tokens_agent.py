"""Core job tokens (§7.5(3)) in the real `choir-agent`: a job's host tool calls carry its token,
edge's carry only the lease, and a job cancelled while its host call runs gets nothing run twice.

A real choird in the test process, the real agent binary on the process runtime, a scripted
model. The host tool is the test's own (`test.counting`: a manifest in the agent's tree, a
handler registered with choird the way its services register theirs); it records which job
each call was for, which choird knows only from the call's checked job token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.daemon.agents.host_tools import HostToolCall
from choir.home import ChoirHome
from choir.protocol import ToolResult
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.test_agent_process import Agent, choir_root, running_agent
from tests.harness.chat import replies_through
from tests.harness.daemons import poll_until, stored_events
from tests.harness.homes import external_postgres, make_home, read_config, write_config

pytestmark = pytest.mark.slow

TOOL = "test.counting"
MANIFEST = {
    "llm": {
        "name": TOOL,
        "description": "Count one run.",
        "parameters": {
            "type": "object",
            "properties": {"wait": {"type": "boolean", "default": False}},
            "additionalProperties": False,
        },
    },
    "runtime": {
        "implementation": "host",
        "timeout_ms": 60000,
        "locks": [],
        "network": False,
        "secret_resources": [],
        "side_effect": "external",
        "idempotent": False,
        "version": "1.0",
        "exposure": "both",
        "prompt_mask": False,
        "meta": False,
    },
}


def count(*, wait: bool = False) -> ScriptedCall:
    return ScriptedCall(name=TOOL, arguments={"wait": wait})


def spawn(job: str, task: str) -> ScriptedCall:
    return ScriptedCall(name="choir.core.spawn", arguments={"job_name": job, "task_spec": task})


class Counter:
    """The host tool: each run's (call id, job id); a `wait` run blocks until released."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str | None]] = []
        self.waiting, self.release = asyncio.Event(), asyncio.Event()

    async def __call__(self, call: HostToolCall) -> ToolResult:
        self.runs.append((call.call_id, call.job_id))
        if call.input.get("wait"):
            self.waiting.set()
            await self.release.wait()
        return ToolResult.ok(f"counted run {len(self.runs)}")


@contextlib.asynccontextmanager
async def agent_with_counter(
    root: Path, pg_params: ConnectParams, script: Script
) -> AsyncIterator[tuple[Agent, Counter]]:
    async with ScriptedModelServer(script) as model:
        home: ChoirHome = make_home(root, postgres=external_postgres(pg_params))
        data = read_config(home)
        data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
        write_config(home, data)
        tree = choir_root(root)
        (tree / "tools" / "agent" / f"{TOOL}.json").write_text(json.dumps(MANIFEST))
        workspace = root / "ws"
        workspace.mkdir()
        async with running_agent(home, root, model, workspace, tree=tree) as agent:
            assert agent.daemon.services is not None
            counter = Counter()
            agent.daemon.services.host_tools.register(TOOL, counter)
            yield agent, counter


async def job_ids(agent: Agent) -> dict[str, str]:
    events = await stored_events(agent.daemon, agent.session_id)
    return {
        e.payload["job"]["job_name"]: e.payload["job"]["job_id"]
        for e in events
        if e.event_type == "core_started"
    }


COUNT_SCRIPT = Script(
    steps=[
        ToolCallsStep(after="user", match="count at the edge", calls=[count()]),
        ReplyStep(after="tool", match="counted run 1", text="Edge counted."),
        ToolCallsStep(after="user", match="start the counter", calls=[spawn("counter", "Count.")]),
        ReplyStep(after="tool", match="counter started", text="Started counter."),
        ReplyStep(after="tool", match="counted run 2", text="Counted in the job."),
        ToolCallsStep(calls=[count()]),  # the job's first step (no user message)
    ]
)


async def test_a_jobs_host_call_carries_its_token_and_edges_only_the_lease(
    root: Path, pg_params: ConnectParams
) -> None:
    async with agent_with_counter(root, pg_params, COUNT_SCRIPT) as (agent, counter):
        edge = await agent.chat("please count at the edge")
        assert edge[-1]["text"] == "Edge counted."
        sent = await agent.operator.chat_send("agent-1", "start the counter job")
        replies = await replies_through(
            agent.operator, sent.after_seq, lambda r: r["category"] == "core_report", within=60
        )
        ids = await job_ids(agent)
    assert replies[-1]["text"] == "core job counter completed: Counted in the job."
    [(_, edge_job), (_, core_job)] = counter.runs
    assert edge_job is None  # edge's call: the lease only, as before
    assert core_job == ids["counter"]  # the job's call: its token, checked by choird


CANCEL_SCRIPT = Script(
    steps=[
        ToolCallsStep(after="user", match="start the waiter", calls=[spawn("waiter", "Wait.")]),
        ReplyStep(after="tool", match="waiter started", text="Started waiter."),
        ToolCallsStep(calls=[count(wait=True)]),
    ]
)


async def test_a_job_cancelled_while_its_host_call_runs_runs_it_once(
    root: Path, pg_params: ConnectParams
) -> None:
    async with agent_with_counter(root, pg_params, CANCEL_SCRIPT) as (agent, counter):
        sent = await agent.operator.chat_send("agent-1", "start the waiter")
        await asyncio.wait_for(counter.waiting.wait(), 30)
        agent.daemon.hub.push(agent.session_id, {"kind": "core_cancel", "job_name": "waiter"})
        replies = await replies_through(
            agent.operator, sent.after_seq, lambda r: r["category"] == "core_report", within=60
        )
        assert agent.daemon.services is not None
        ids = await job_ids(agent)
        gate = agent.daemon.services.host_tools.jobs

        async def ended_known() -> bool:
            return gate.ended(agent.session_id, ids["waiter"]) is not None

        await poll_until(ended_known, within=10)  # choird learned the end by replication
        counter.release.set()
        await asyncio.sleep(0.5)  # the released call finishes; nothing calls again
    assert replies[-1]["text"].startswith("core job waiter cancelled")
    assert counter.runs == [(counter.runs[0][0], ids["waiter"])]  # ran once, for its job
