"""The "cognition" scenario end to end: parallel core jobs, a responsive edge, a crash mid-call.

A real choird in the test process, the real `choir-agent` in its own process, one scripted model
answering every lane. The user asks for two jobs; edge spawns `refactor-auth` and `write-tests`,
which write different files at the same time through `test.slow_write` (`file:{path}` X locks,
so the arbiter runs them in parallel). While they run, edge answers a read-only question, then
injects an instruction into `refactor-auth` and cancels `write-tests`. `refactor-auth`'s next
call is killed mid-way with SIGKILL; restarted for the same session, the agent gets back every
acknowledged event, the hash chain verifies, no committed call runs again, and once the operator
resumes the held job its completion report reaches the user like the cancelled job's did.

Every lane asks the same model, so the script tells them apart by their last user or tool
message: a core job's first request has neither, so the two unconditioned steps at the end
answer the jobs' first requests in spawn order (edge spawns the second job only after a pause).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.daemon.agents.ingest import committed_of
from choir.home import ChoirHome
from choir.protocol import GENESIS_HASH, chain_break
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.scripted.player import last_turn
from choir.store.events import EventRecord
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.scenario_support import launch, lines, stop_left_tools
from tests.harness.chat import replies_until
from tests.harness.daemons import poll_until, running_daemon, stored_events
from tests.harness.homes import scripted_home

pytestmark = pytest.mark.slow

FIRST_STEP_MS = {"refactor-auth": 4000, "write-tests": 1000}
"""How long each job's first write holds its file: refactor-auth is still in it when edge
injects, so the instruction reaches its next step."""


def spawn(job: str, task: str) -> ScriptedCall:
    return ScriptedCall(name="choir.core.spawn", arguments={"job_name": job, "task_spec": task})


def slow_write(path: str, text: str, sleep_ms: int) -> ScriptedCall:
    arguments = {"path": path, "text": text, "sleep_ms": sleep_ms}
    return ScriptedCall(name="test.slow_write", arguments=arguments)


SCRIPT = Script(
    description="the cognition scenario: two core jobs, a question, inject, cancel, a crash",
    steps=[
        # edge
        ToolCallsStep(
            match="refactor auth and write tests",
            calls=[spawn("refactor-auth", "Refactor auth.py.")],
        ),
        ToolCallsStep(
            after="tool",
            match="core job refactor-auth started",
            delay_ms=500,  # refactor-auth's first request comes first
            calls=[spawn("write-tests", "Write test_login.py.")],
        ),
        ReplyStep(after="tool", match="core job write-tests started", text="Both jobs run."),
        ToolCallsStep(
            match="what does notes.txt say",
            calls=[ScriptedCall(name="choir.fs.read", arguments={"path": "notes.txt"})],
        ),
        ReplyStep(after="tool", match="alpha beta gamma", text="notes.txt says alpha beta gamma."),
        ToolCallsStep(
            match="use bcrypt and drop the tests",
            calls=[
                ScriptedCall(
                    name="choir.core.inject",
                    arguments={"job_name": "refactor-auth", "content": "use bcrypt"},
                ),
                ScriptedCall(name="choir.core.cancel", arguments={"job_name": "write-tests"}),
            ],
        ),
        ReplyStep(after="tool", match="write-tests is being cancelled", text="Done as asked."),
        # the jobs' later steps, told apart by their last tool result
        ToolCallsStep(
            after="tool",
            match="wrote auth.py",
            calls=[slow_write("auth.py", "hash with bcrypt", 60_000)],
        ),
        ToolCallsStep(
            after="tool",
            match="wrote test_login.py",
            calls=[slow_write("test_login.py", "def test_logout", 60_000)],
        ),
        ReplyStep(after="tool", match="crashed while", text="auth.py now uses bcrypt."),
        # the jobs' first requests (no user or tool message), in spawn order
        ToolCallsStep(calls=[slow_write("auth.py", "def login", FIRST_STEP_MS["refactor-auth"])]),
        ToolCallsStep(
            calls=[slow_write("test_login.py", "def test_login", FIRST_STEP_MS["write-tests"])]
        ),
    ],
)


@pytest.fixture
def root(root: Path) -> Iterator[Path]:
    """The harness's `root` (a failed test's logs kept), the tools the agent left stopped."""
    yield root
    stop_left_tools(root)


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def home(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> ChoirHome:
    home = scripted_home(root, pg_params, model.url)
    (root / "ws").mkdir()
    (root / "ws" / "notes.txt").write_text("alpha beta gamma\n")
    return home


def of_kind(events: list[EventRecord], kind: str, lane: str | None = None) -> list[EventRecord]:
    return [e for e in events if e.event_type == kind and (lane is None or e.lane == lane)]


def timing(events: list[EventRecord], lane: str) -> dict[str, float]:
    """`started`/`ended` of the lane's first `test.slow_write` result."""
    [first, *_] = [
        e.payload["result"]["data"]
        for e in of_kind(events, "tool_result_committed", f"core:{lane}")
        if e.payload["result"]["status"] == "success"
    ]
    return {"started": float(first["started"]), "ended": float(first["ended"])}


async def test_parallel_jobs_a_responsive_edge_and_a_crash_lose_and_repeat_nothing(
    home: ChoirHome, root: Path, model: ScriptedModelServer
) -> None:
    ws = root / "ws"
    auth, tests = ws / "auth.py", ws / "test_login.py"
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as operator:
        assert daemon.services is not None
        first = await launch(daemon, root, "first")
        try:
            # 1. two jobs, spawned from one user message, writing different files
            sent = await operator.chat_send("agent-1", "please refactor auth and write tests")
            await replies_until(operator, sent.after_seq, "Both jobs run.")
            await poll_until(lambda: bool(lines(auth) and lines(tests)), within=10)

            # 2. edge answers a question while both jobs are in their writes
            asked = await operator.chat_send("agent-1", "what does notes.txt say?")
            answer = await replies_until(operator, asked.after_seq, "alpha beta gamma")
            assert [r["category"] for r in answer] == ["reply"]

            # 3. inject into one job, cancel the other (once it is in its second write)
            await poll_until(lambda: len(lines(tests)) == 2, within=10)
            told = await operator.chat_send("agent-1", "use bcrypt and drop the tests")
            got = await replies_until(
                operator, told.after_seq, "core job write-tests", "Done as asked."
            )
            assert "Done as asked." in [r["text"] for r in got]
            [report] = [r for r in got if r["category"] == "core_report"]
            assert report["text"].startswith("core job write-tests cancelled")

            # 4. SIGKILL while refactor-auth's second write sleeps (its line already written)
            await poll_until(lambda: len(lines(auth)) == 2, within=15)
        finally:
            first.send_signal(signal.SIGKILL)
            await first.wait()
        session_id = (await daemon.services.sessions.recent("agent-1", 1))[0].session_id
        before = await stored_events(daemon, session_id)
        answered = {e.payload["call_id"] for e in of_kind(before, "tool_result_committed")}
        writes = [
            e
            for e in of_kind(before, "tool_call_committed", "core:refactor-auth")
            if e.payload["tool"] == "test.slow_write"
        ]
        assert len(writes) == 2
        held = writes[-1]
        assert held.payload["call_id"] not in answered
        await daemon.services.sessions.mark_crashed(session_id, "killed by the test")

        second = await launch(daemon, root, "second")
        try:
            # 5. the held call is shown to the operator, not run again; resuming finishes the job
            listed = await operator.session_recover(session_id)
            assert [c.call_id for c in listed.interrupted] == [held.payload["call_id"]]
            await asyncio.sleep(1)
            assert lines(auth) == ["def login", "hash with bcrypt"]
            decided = await operator.session_recover(session_id, choice="resume")
            assert decided.requested is True
            replies = await replies_until(operator, sent.after_seq, "core job refactor-auth")

            async def stopped() -> bool:
                events = await stored_events(daemon, session_id)
                return len(of_kind(events, "core_stopped")) == 2

            await poll_until(stopped, within=10)
            after = await stored_events(daemon, session_id)
        finally:
            second.kill()
            await second.wait()

    check_reports(replies)
    check_parallel_and_responsive(after, answer)
    check_injection_and_cancel(after, model)
    check_log_survived(before, after)
    check_nothing_ran_twice(after, held, ws)
    assert len(lines(root / "tool-pids")) == 4  # four calls, four executions: none re-run


def check_reports(replies: list[dict[str, Any]]) -> None:
    """Both jobs' completion reports reached the user, across the restart."""
    cancelled, completed = [r["text"] for r in replies if r["category"] == "core_report"]
    assert cancelled.startswith("core job write-tests cancelled")
    assert completed == "core job refactor-auth completed: auth.py now uses bcrypt."


def check_parallel_and_responsive(after: list[EventRecord], answer: list[dict[str, Any]]) -> None:
    """The two first writes overlapped in time, and edge's answer came while both ran."""
    a, b = timing(after, "refactor-auth"), timing(after, "write-tests")
    assert a["started"] < b["ended"], (a, b)
    assert b["started"] < a["ended"], (a, b)
    overlap = min(a["ended"], b["ended"]) - max(a["started"], b["started"])
    assert overlap > 0.8 * FIRST_STEP_MS["write-tests"] / 1000, (a, b)
    [replied] = [
        e for e in of_kind(after, "agent_replied", "edge") if e.payload["text"] == answer[0]["text"]
    ]
    at = replied.created_at.timestamp()
    assert max(a["started"], b["started"]) < at < min(a["ended"], b["ended"]), (a, b, at)
    [read] = [
        e
        for e in of_kind(after, "tool_call_committed", "edge")
        if e.payload["tool"] == "choir.fs.read"
    ]
    assert read.payload["side_effect"] == "read"
    assert read.rev < replied.rev
    first_writes = [
        e.payload["locks"]
        for e in of_kind(after, "tool_call_committed")
        if e.lane.startswith("core:") and e.payload["tool"] == "test.slow_write"
    ][:2]
    assert sorted(lock["mode"] for locks in first_writes for lock in locks) == ["X", "X"]
    resources = {lock["resource"] for locks in first_writes for lock in locks}
    assert len(resources) == 2  # each job held its own file, exclusively, at the same time


def check_injection_and_cancel(after: list[EventRecord], model: ScriptedModelServer) -> None:
    """The instruction reached refactor-auth's next step; write-tests' call was cancelled."""
    [injected] = [
        e
        for e in of_kind(after, "injected_instruction", "core:refactor-auth")
        if e.payload["source"] == "edge"
    ]
    assert injected.payload["content"] == "use bcrypt"
    answered_first_write = [
        r.body["messages"]
        for r in model.requests
        if (turn := last_turn(r.body["messages"])) is not None
        and turn.role == "tool"
        and "wrote auth.py" in turn.text
    ]
    [messages] = answered_first_write
    tool_at = max(i for i, m in enumerate(messages) if m["role"] == "tool")
    injected_at = messages.index({"role": "system", "content": "[INJECTED] use bcrypt"})
    assert injected_at > tool_at  # read at the step after the write it was sent during
    cancelled = [
        e.payload["result"]["status"]
        for e in of_kind(after, "tool_result_committed", "core:write-tests")
    ]
    assert cancelled == ["success", "cancelled"]
    outcomes = {e.payload["job_name"]: e.payload["outcome"] for e in of_kind(after, "core_stopped")}
    assert outcomes == {"write-tests": "cancelled", "refactor-auth": "completed"}


def check_log_survived(before: list[EventRecord], after: list[EventRecord]) -> None:
    """Every acknowledged row is unchanged after the restart; the whole chain verifies."""
    assert [astuple(e) for e in after[: len(before)]] == [astuple(e) for e in before]
    records = [committed_of(e) for e in after]
    assert chain_break(records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True) is None


def check_nothing_ran_twice(after: list[EventRecord], held: EventRecord, ws: Path) -> None:
    """One intent per call id, at most one result each, and each write's line exactly once."""
    intents = [e.payload["call_id"] for e in of_kind(after, "tool_call_committed")]
    assert len(intents) == len(set(intents))
    results = [e.payload["call_id"] for e in of_kind(after, "tool_result_committed")]
    assert len(results) == len(set(results))
    writes = [
        e for e in of_kind(after, "tool_call_committed") if e.payload["tool"] == "test.slow_write"
    ]
    assert len(writes) == 4
    [unknown] = [
        e
        for e in of_kind(after, "tool_result_committed")
        if e.payload["call_id"] == held.payload["call_id"]
    ]
    assert unknown.payload["result"]["error_code"] == "outcome_unknown"
    assert lines(ws / "auth.py") == ["def login", "hash with bcrypt"]
    assert lines(ws / "test_login.py") == ["def test_login", "def test_logout"]
    visible = {name for name in os.listdir(ws) if not name.startswith(".")}
    assert visible == {"auth.py", "notes.txt", "test_login.py"}
