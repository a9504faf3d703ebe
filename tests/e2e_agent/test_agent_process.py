"""The real `choir-agent` process against a real choird, talking through the console DM.

choird runs in the test process over the test session's Postgres; its agent-1 is bound to a
`scripted` model served by a `ScriptedModelServer` the test owns, so every request the agent's
lanes made is recorded. The agent is `.venv/bin/choir-agent` in its own process, given a
`/choir`-like tree (the seed tools, skills and identity files) and a scratch workspace, its
session and lease in its environment as choird would start it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.protocol import GENESIS_HASH
from choir.scripted import (
    HttpErrorStep,
    ReplyStep,
    Script,
    ScriptedCall,
    ScriptedModelServer,
    ToolCallsStep,
)
from choir.store.sessions import SessionStatus
from tests.e2e_agent.launch import launch_agent
from tests.harness.chat import answers, replies_through
from tests.harness.daemons import poll_until, running_daemon, session_row, stored_events

pytestmark = pytest.mark.slow

SEEDS = Path(__file__).resolve().parents[2] / "seeds" / "global"


SCRIPT = Script(
    description="edge and core lanes of the e2e agent tests",
    steps=[
        ReplyStep(match="hello", repeat=True, text="Hello from the script."),
        HttpErrorStep(match="break", status=500, message="the model fell over"),
        ToolCallsStep(
            match="what is in notes",
            calls=[ScriptedCall(name="choir.fs.read", arguments={"path": "notes.txt"})],
        ),
        ReplyStep(after="tool", match="alpha beta gamma", text="notes.txt says alpha beta gamma."),
        ToolCallsStep(
            match="start a job",
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={
                        "job_name": "write-file",
                        "task_spec": "Write the word finished into done.txt.",
                    },
                )
            ],
        ),
        ReplyStep(after="tool", match="write-file started", text="I started write-file."),
        ReplyStep(after="tool", match="done.txt", text="Wrote done.txt."),
        # a core job's first request has no user or tool message: only this step matches it
        ToolCallsStep(
            calls=[
                ScriptedCall(
                    name="choir.fs.write",
                    arguments={"path": "done.txt", "op": "overwrite", "content": "finished\n"},
                )
            ]
        ),
    ],
)


@dataclass
class Agent:
    daemon: ChoirDaemon
    operator: ChoirClient
    model: ScriptedModelServer
    session_id: str
    process: asyncio.subprocess.Process
    workspace: Path

    async def chat(self, text: str, *, until: str = "reply") -> list[dict[str, Any]]:
        """Send `text`; the replies up to the first of category `until` answering it."""
        sent = await self.operator.chat_send("agent-1", text)
        # A deadline against hangs, not a budget: a first reply includes the agent's start,
        # which takes several times longer while the suite runs on parallel workers.
        last = answers(sent) if until == "reply" else lambda r: r["category"] == until
        return await replies_through(self.operator, sent.after_seq, last, within=60)


@asynccontextmanager
async def running_agent(
    home: ChoirHome, root: Path, model: ScriptedModelServer, workspace: Path, *, tree: Path
) -> AsyncIterator[Agent]:
    """choird serving `home` in this process and agent-1's choir-agent launched on `tree` and
    `workspace`; the agent is killed at the end if it still runs."""
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as operator:
        assert daemon.services is not None
        launched = await launch_agent(daemon, root, tree=tree, workspace=workspace)
        process = launched.process
        try:
            yield Agent(daemon, operator, model, launched.session_id, process, workspace)
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()


def choir_root(root: Path) -> Path:
    """A `/choir`-like tree: the seed tools and skills, identity files at the root."""
    tree = root / "choir"
    shutil.copytree(SEEDS / "tools", tree / "tools" / "global")
    (tree / "tools" / "agent").mkdir()
    shutil.copytree(SEEDS / "skills", tree / "skills")
    for name in ("USER.md", "SOUL.md", "SOUL-CORE.md"):
        shutil.copy(SEEDS / "identity" / name, tree / name)
    return tree


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
async def agent(home: ChoirHome, root: Path, model: ScriptedModelServer) -> AsyncIterator[Agent]:
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("alpha beta gamma\n")
    async with running_agent(home, root, model, workspace, tree=choir_root(root)) as agent:
        yield agent


async def test_a_message_gets_the_scripted_reply_and_the_events_are_durable(agent: Agent) -> None:
    replies = await agent.chat("hello there")
    assert [r["text"] for r in replies] == ["Hello from the script."]

    async def replied_durably() -> bool:
        kinds = [e.event_type for e in await stored_events(agent.daemon, agent.session_id)]
        return "agent_replied" in kinds

    await poll_until(replied_durably, within=5)
    events = await stored_events(agent.daemon, agent.session_id)
    kinds = ["user_msg", "llm_call", "model_output", "agent_replied"]
    # a message sent the instant the agent is up may beat choird's memory loading: its recall
    # then misses the deadline, a `memory_recalled` event saying so (nothing is recalled)
    assert [e.event_type for e in events if e.event_type != "memory_recalled"] == kinds
    assert [e.rev for e in events] == list(range(1, len(events) + 1))
    previous = GENESIS_HASH
    for event in events:
        assert event.hash_prev == previous
        previous = event.hash
    assert events[0].payload["text"] == "hello there"
    request = agent.model.requests[0].body
    assert request["messages"][-1] == {"role": "user", "content": "hello there"}
    assert any(tool["function"]["name"] == "choir__fs__read" for tool in request["tools"])


async def test_a_tool_result_reaches_the_models_next_request(agent: Agent) -> None:
    replies = await agent.chat("what is in notes.txt?")
    assert replies[-1]["text"] == "notes.txt says alpha beta gamma."
    first, second = (r.body for r in agent.model.requests)
    [call] = second["messages"][-2]["tool_calls"]
    assert call["function"]["name"] == "choir__fs__read"
    answer = second["messages"][-1]
    assert answer["role"] == "tool"
    assert answer["tool_call_id"] == call["id"]
    result = json.loads(answer["content"])
    assert result["status"] == "success"
    assert "alpha beta gamma" in answer["content"]
    assert first["messages"][-1]["role"] == "user"


async def test_a_core_job_writes_a_file_and_its_report_reaches_the_user(agent: Agent) -> None:
    replies = await agent.chat("please start a job", until="core_report")
    texts = {r["category"]: r["text"] for r in replies}
    assert texts["reply"] == "I started write-file."
    assert texts["core_report"] == "core job write-file completed: Wrote done.txt."
    assert (agent.workspace / "done.txt").read_text() == "finished\n"

    async def stopped_durably() -> bool:
        events = await stored_events(agent.daemon, agent.session_id)
        return any(e.event_type == "core_stopped" for e in events)

    await poll_until(stopped_durably, within=5)
    events = await stored_events(agent.daemon, agent.session_id)
    core = [e.event_type for e in events if e.lane == "core:write-file"]
    assert core[0] == "core_started"
    assert "tool_result_committed" in core
    assert core[-1] == "core_stopped"
    core_requests = [
        r.body for r in agent.model.requests if r.body["messages"][-1]["role"] == "system"
    ]
    assert "Write the word finished into done.txt." in json.dumps(core_requests[0]["messages"])


async def test_a_failed_model_call_answers_with_an_error_and_edge_serves_on(agent: Agent) -> None:
    [error] = await agent.chat("break it", until="error")
    assert "500" in error["text"] or "fell over" in error["text"]
    replies = await agent.chat("hello again")
    assert replies[-1]["text"] == "Hello from the script."


async def test_sigterm_stops_gracefully_and_ends_the_session(agent: Agent) -> None:
    await agent.chat("hello")
    agent.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(agent.process.wait(), 15) == 0
    row = await session_row(agent.daemon, agent.session_id)
    assert row.status == SessionStatus.STOPPED
    kinds = [e.event_type for e in await stored_events(agent.daemon, agent.session_id)]
    # everything up to the reply was flushed; a session summary may follow it (§11.8), and the
    # summary call is recorded (`llm_call`) whether or not its answer made a summary
    assert [k for k in kinds if k != "llm_call"][-1] in ("agent_replied", "session_summary")
    assert "agent_replied" in kinds


async def test_a_shutdown_push_stops_the_agent(agent: Agent) -> None:
    await agent.chat("hello")
    agent.daemon.hub.push(agent.session_id, {"kind": "shutdown", "reason": "stop"})
    assert await asyncio.wait_for(agent.process.wait(), 15) == 0
    row = await session_row(agent.daemon, agent.session_id)
    assert row.status == SessionStatus.STOPPED
