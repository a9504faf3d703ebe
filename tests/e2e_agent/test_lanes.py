"""The lanes' behaviour in the real `choir-agent` process: compaction, session summary, core
injection and cancel, edge's read-only gate, rate limits, malformed model output, idling.

Same set-up as `test_agent_process.py` (a real choird in the test process, the real agent
binary, a `ScriptedModelServer` recording every request), but each test brings its own script
and config keys, through the `launch` factory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.home import ChoirHome
from choir.scripted import (
    RateLimitStep,
    RawStep,
    ReplyStep,
    Script,
    ScriptedCall,
    ScriptedModelServer,
    ToolCallsStep,
)
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import SessionStatus
from tests.e2e_agent.test_agent_process import Agent, choir_root, running_agent
from tests.harness.chat import replies_through
from tests.harness.daemons import poll_until, session_row, stored_events
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.processes import gone

pytestmark = pytest.mark.slow

Launch = Callable[..., Awaitable[Agent]]

FOLD_MARK = "Events to fold"
"""Only the compaction call's last user message says this."""
DELTA = json.dumps(
    {"memory_delta": {"mode": "append", "summary_update": "The user greeted (folded-mark)."}}
)
SUMMARY = json.dumps(
    {
        "summary": "The user said hello; the agent answered.",
        "topics": ["greetings"],
        "decisions": [],
        "open_items": ["nothing"],
    }
)


@pytest.fixture
async def launch(root: Path, pg_params: ConnectParams) -> AsyncIterator[Launch]:
    """Start choird and the agent with `script` as its model and `config` keys applied."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            script: Script, *, demo: bool = False, zero_latency: bool = False, **config: Any
        ) -> Agent:
            model = await stack.enter_async_context(
                ScriptedModelServer(script, zero_latency=zero_latency)
            )
            home = make_home(root, postgres=external_postgres(pg_params), **config)
            data = read_config(home)
            endpoint = None if demo else model.url
            data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": endpoint}
            write_config(home, data)
            return await stack.enter_async_context(_agent(home, root, model))

        yield start


@contextlib.asynccontextmanager
async def _agent(home: ChoirHome, root: Path, model: ScriptedModelServer) -> AsyncIterator[Agent]:
    workspace = root / "ws"
    workspace.mkdir()
    async with running_agent(home, root, model, workspace, tree=choir_root(root)) as agent:
        yield agent


async def kinds_of(agent: Agent, lane: str | None = None) -> list[str]:
    events = await stored_events(agent.daemon, agent.session_id)
    return [e.event_type for e in events if lane is None or e.lane == lane]


async def durable(agent: Agent, kind: str, within: float = 10) -> None:
    async def present() -> bool:
        return kind in await kinds_of(agent)

    await poll_until(present, within=within)


async def replies_until(
    agent: Agent, after_seq: int, category: str, within: float = 20
) -> list[dict[str, Any]]:
    """The replies after `after_seq` up to the first of `category`."""
    return await replies_through(
        agent.operator, after_seq, lambda r: r["category"] == category, within=within
    )


def system_texts(body: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")


# -- compaction and the session summary ----------------------------------------------------------

MEMORY_SCRIPT = Script(
    steps=[
        ReplyStep(match=FOLD_MARK, repeat=True, text=DELTA),
        ReplyStep(match=SUMMARY_MARKER, repeat=True, text=SUMMARY),
        ReplyStep(match="hello", repeat=True, text="Hello from the script."),
    ]
)


async def test_compaction_commits_a_memory_write_and_later_prompts_carry_the_summary(
    launch: Launch,
) -> None:
    agent = await launch(MEMORY_SCRIPT, event_window_size=4)
    for n in range(3):
        await agent.chat(f"hello {n}")
    await durable(agent, "memory_write_committed")
    await agent.chat("hello again")
    folds = [r for r in agent.model.requests if FOLD_MARK in json.dumps(r.body["messages"])]
    assert folds
    last = agent.model.requests[-1].body
    if FOLD_MARK in json.dumps(last["messages"]):  # a fold after the last cycle; take the answer
        last = [r.body for r in agent.model.requests if r.body.get("tools")][-1]
    assert "folded-mark" in system_texts(last)
    events = await stored_events(agent.daemon, agent.session_id)
    [write, *_] = [e for e in events if e.event_type == "memory_write_committed"]
    assert write.payload["summary_lane"] == "edge"
    assert write.payload["window_start_rev"] > 1


async def test_graceful_stop_commits_the_session_summary(launch: Launch) -> None:
    agent = await launch(MEMORY_SCRIPT)
    await agent.chat("hello")
    agent.daemon.hub.push(agent.session_id, {"kind": "shutdown", "reason": "stop"})
    assert await asyncio.wait_for(agent.process.wait(), 15) == 0
    events = await stored_events(agent.daemon, agent.session_id)
    assert events[-1].event_type == "session_summary"
    assert events[-1].payload["topics"] == ["greetings"]
    assert events[-1].payload["open_items"] == ["nothing"]
    row = await session_row(agent.daemon, agent.session_id)
    assert row.status == SessionStatus.STOPPED


async def test_a_slow_summary_is_skipped_at_its_timeout(launch: Launch) -> None:
    slow = Script(
        steps=[
            ReplyStep(match=SUMMARY_MARKER, delay_ms=20_000, text=SUMMARY),
            ReplyStep(match="hello", repeat=True, text="Hello from the script."),
        ]
    )
    agent = await launch(slow)
    await agent.chat("hello")
    push = {"kind": "shutdown", "reason": "stop", "summary_timeout_ms": 300}
    agent.daemon.hub.push(agent.session_id, push)
    assert await asyncio.wait_for(agent.process.wait(), 10) == 0
    kinds = await kinds_of(agent)
    assert "session_summary" not in kinds
    assert kinds[-1] == "agent_replied"
    assert any(SUMMARY_MARKER in json.dumps(r.body["messages"]) for r in agent.model.requests)


# -- core jobs -----------------------------------------------------------------------------------


def spawn(job: str, task: str) -> ScriptedCall:
    return ScriptedCall(name="choir.core.spawn", arguments={"job_name": job, "task_spec": task})


def run(command: str) -> ScriptedCall:
    return ScriptedCall(name="choir.exec", arguments={"command": command})


INJECT_SCRIPT = Script(
    steps=[
        ToolCallsStep(match="start the slow job", calls=[spawn("slow", "Sleep, then report.")]),
        ReplyStep(after="tool", match="slow started", text="Started slow."),
        ToolCallsStep(
            match="tell it blue",
            calls=[
                ScriptedCall(
                    name="choir.core.inject", arguments={"job_name": "slow", "content": "use blue"}
                )
            ],
        ),
        ReplyStep(after="tool", match="instruction queued", text="Told slow."),
        ReplyStep(after="tool", match="slow-done", text="Done, in blue."),
        ToolCallsStep(calls=[run("sleep 2; echo slow-done")]),
    ]
)


async def test_an_injected_instruction_reaches_the_core_at_its_next_step(launch: Launch) -> None:
    agent = await launch(INJECT_SCRIPT)
    await agent.chat("please start the slow job")
    sent = await agent.operator.chat_send("agent-1", "tell it blue")
    replies = await replies_until(agent, sent.after_seq, "core_report")
    texts = [r["text"] for r in replies]
    assert "Told slow." in texts
    assert texts[-1] == "core job slow completed: Done, in blue."
    final = [r.body for r in agent.model.requests if "slow-done" in json.dumps(r.body)][-1]
    assert "[INJECTED] use blue" in system_texts(final)
    await durable(agent, "core_stopped")
    core = await kinds_of(agent, "core:slow")
    assert "injected_instruction" in core
    events = await stored_events(agent.daemon, agent.session_id)
    stream = [e.payload["event"]["kind"] for e in events if e.event_type == "core_event_emitted"]
    assert stream.count("progress") == 2
    assert stream[-1] == "final_result"


CANCEL_SCRIPT = Script(
    steps=[
        ToolCallsStep(match="start the sleeper", calls=[spawn("sleeper", "Sleep a long time.")]),
        ReplyStep(after="tool", match="sleeper started", text="Started sleeper."),
        ToolCallsStep(
            match="write a note",
            calls=[
                ScriptedCall(
                    name="choir.fs.write",
                    arguments={"path": "note.txt", "op": "overwrite", "content": "x"},
                )
            ],
        ),
        ReplyStep(after="tool", match="edge_read_only", text="I may not write now."),
        ToolCallsStep(calls=[run("echo $$ > pid.txt; exec sleep 30")]),
    ]
)


async def test_edge_is_read_only_while_a_core_runs_and_a_cancel_kills_the_tool(
    launch: Launch,
) -> None:
    agent = await launch(CANCEL_SCRIPT)
    await agent.chat("start the sleeper")
    pid_file = agent.workspace / "pid.txt"
    await poll_until(lambda: pid_file.is_file() and pid_file.read_text().strip() != "", within=10)
    pid = int(pid_file.read_text())

    sent = await agent.operator.chat_send("agent-1", "write a note")
    stream = agent.operator.stream("chat.replies", agent_id="agent-1", after_seq=sent.after_seq)
    try:
        async with asyncio.timeout(20):
            refused = await anext(stream)
            assert refused["text"] == "I may not write now."
            assert not (agent.workspace / "note.txt").exists()
            push = {"kind": "core_cancel", "job_name": "sleeper"}
            agent.daemon.hub.push(agent.session_id, push)
            report = await anext(stream)
    finally:
        await stream.aclose()
    assert report["category"] == "core_report"
    assert report["text"].startswith("core job sleeper cancelled")

    await poll_until(lambda: gone(pid), within=10)
    await durable(agent, "core_stopped")
    events = await stored_events(agent.daemon, agent.session_id)
    [result] = [
        e for e in events if e.lane == "core:sleeper" and e.event_type == "tool_result_committed"
    ]
    assert result.payload["result"]["status"] == "cancelled"
    [stopped] = [e for e in events if e.event_type == "core_stopped"]
    assert stopped.payload["outcome"] == "cancelled"


# -- model trouble -------------------------------------------------------------------------------

TROUBLE_SCRIPT = Script(
    steps=[
        RateLimitStep(match="busy", retry_after="0"),
        ReplyStep(match="busy", text="Done after the wait."),
        RawStep(match="no choices", body='{"id": "x", "object": "chat.completion", "choices": []}'),
        ToolCallsStep(
            match="bad json",
            calls=[ScriptedCall(name="choir.fs.read", raw_arguments="{not json")],
        ),
        ReplyStep(after="tool", match="invalid_arguments", text="I will fix my arguments."),
        ToolCallsStep(
            match="unknown tool",
            calls=[ScriptedCall(name="choir.fs.read", raw_name="no_such_tool")],
        ),
        ReplyStep(after="tool", match="unknown_tool", text="That tool does not exist."),
        ReplyStep(match="hello", repeat=True, text="Hello from the script."),
    ]
)


async def test_a_rate_limit_sends_one_notice_then_the_retried_answer(launch: Launch) -> None:
    agent = await launch(TROUBLE_SCRIPT, rate_limit_retry_ms=50)
    replies = await agent.chat("are you busy?")
    assert [r["category"] for r in replies] == ["notice", "reply"]
    assert replies[-1]["text"] == "Done after the wait."


@pytest.mark.parametrize(
    ("message", "category", "expected"),
    [
        ("no choices please", "error", None),
        ("bad json call", "reply", "I will fix my arguments."),
        ("an unknown tool", "reply", "That tool does not exist."),
    ],
)
async def test_malformed_model_output_never_crashes_the_agent(
    launch: Launch, message: str, category: str, expected: str | None
) -> None:
    agent = await launch(TROUBLE_SCRIPT)
    replies = await agent.chat(message, until=category)
    if expected is not None:
        assert replies[-1]["text"] == expected
    assert (await agent.chat("hello"))[-1]["text"] == "Hello from the script."
    assert agent.process.returncode is None


async def test_the_demo_model_answers_a_greeting(launch: Launch) -> None:
    agent = await launch(MEMORY_SCRIPT, demo=True)
    replies = await agent.chat("hello")
    assert replies[-1]["text"].startswith("Hello!")
    assert agent.model.requests == []


async def test_an_idle_agent_makes_no_calls_and_no_commits(launch: Launch) -> None:
    # A generous threshold: the agent must get through its start-up before the first beat.
    agent = await launch(
        MEMORY_SCRIPT, heartbeat_interval_ms=200, crash_detection_threshold_ms=5000
    )
    await agent.chat("hello")
    await durable(agent, "agent_replied")
    before = (len(agent.model.requests), await kinds_of(agent))
    await asyncio.sleep(1.2)  # six heartbeat intervals
    after = (len(agent.model.requests), await kinds_of(agent))
    assert after == before
