"""Snapshots end to end (§13.1, §13.4): taken at the configured cadence, and a resume from one.

A real choird in the test process, the real `choir-agent` in its own process, a scripted model.
The user chats until edge's working memory folds into its summary, then starts a core job that
writes one note per step. While the job's sixth model call is out, the agent is killed with
SIGKILL. Before it is restarted, every event up to the latest snapshot is deleted from Postgres:
the resume can only work from the snapshot and the tail — and it does, with the job's budgets,
its working memory (the very same prompt) and edge's summary as they were before the crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.daemon.agents.status_board import LaneReport
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.protocol import ReportStatusRequest, Snapshot
from choir.scripted import (
    RecordedRequest,
    ReplyStep,
    Script,
    ScriptedCall,
    ScriptedModelServer,
    ToolCallsStep,
)
from choir.store.events import EventRecord
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.launch import launch_agent
from tests.e2e_agent.test_agent_process import choir_root
from tests.harness.chat import answer_to
from tests.harness.daemons import poll_until, pool_of, running_daemon, stored_events
from tests.harness.homes import external_postgres, make_home, read_config, write_config

pytestmark = pytest.mark.slow

EVERY = 10
"""`snapshot_every_events` of these tests."""
FOLD_MARK = "Events to fold"
"""Only a compaction call's last user message says this."""
DELTA = json.dumps(
    {"memory_delta": {"mode": "append", "summary_update": "The user greeted (folded-mark)."}}
)
JOB = "scribe"
CORE = f"core:{JOB}"


def _write(n: int) -> ScriptedCall:
    # append, not overwrite: an append's intent is durable before it runs (an overwrite's is
    # not: it may run again), so each note's heartbeat leaves the snapshot a tail to replay
    arguments = {"path": f"note-{n}.txt", "op": "append", "content": f"note {n}\n"}
    return ScriptedCall(name="choir.fs.write", arguments=arguments)


SPAWN = ScriptedCall(
    name="choir.core.spawn",
    arguments={"job_name": JOB, "task_spec": "Write the notes, one per step."},
)

SCRIPT = Script(
    description="edge folds its memory; a core job writes six notes and is killed at the sixth",
    steps=[
        ReplyStep(match=FOLD_MARK, repeat=True, text=DELTA),
        ReplyStep(match="hello", repeat=True, text="Hello from the script."),
        ToolCallsStep(match="start the scribe", calls=[SPAWN]),
        ReplyStep(after="tool", match=f"{JOB} started", text="Started the scribe."),
        ToolCallsStep(calls=[_write(1)]),  # the job's first call: its prompt has no user message
        *[
            ToolCallsStep(after="tool", match=f"note-{n - 1}.txt", calls=[_write(n)])
            for n in range(2, 6)
        ],
        # the agent is killed while this answer is delayed…
        ToolCallsStep(after="tool", match="note-5.txt", delay_ms=30_000, calls=[_write(6)]),
        # …and the resumed job asks again
        ToolCallsStep(after="tool", match="note-5.txt", calls=[_write(6)]),
        ReplyStep(after="tool", match="note-6.txt", text="Six notes written."),
    ],
)


@dataclass
class Session:
    daemon: ChoirDaemon
    operator: ChoirClient
    model: ScriptedModelServer
    root: Path
    workspace: Path
    reports: list[ReportStatusRequest] = field(default_factory=list)
    """Every REPORT_STATUS choird received, in order."""
    process: asyncio.subprocess.Process | None = None
    session_id: str = ""

    async def launch(self, name: str) -> None:
        tree = self.root / "choir"
        if not tree.exists():
            choir_root(self.root)
        launched = await launch_agent(
            self.daemon, self.root, tree=tree, workspace=self.workspace, log_name=name
        )
        self.process, self.session_id = launched.process, launched.session_id

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        await self.process.wait()
        assert self.daemon.services is not None
        await self.daemon.services.sessions.mark_crashed(self.session_id, "killed by the test")

    async def chat(self, text: str) -> None:
        sent = await self.operator.chat_send("agent-1", text)
        await answer_to(self.operator, sent, within=20)

    async def events(self) -> list[EventRecord]:
        return await stored_events(self.daemon, self.session_id)

    async def snapshots(self) -> list[tuple[int, dict[str, Any]]]:
        async with pool_of(self.daemon).acquire() as conn:
            rows = await conn.fetch(
                "SELECT rev, snapshot FROM choir_control.session_snapshots "
                "WHERE session_id = $1 ORDER BY rev",
                self.session_id,
            )
        return [(row["rev"], row["snapshot"]) for row in rows]

    async def execute(self, sql: str, *args: Any) -> None:
        async with pool_of(self.daemon).acquire() as conn:
            await conn.execute(sql, *args)

    def requests_after(self, note: str) -> list[RecordedRequest]:
        """The model requests answering the tool result naming `note` (the script's rule: the
        last user or tool message; a core prompt ends with its briefing)."""
        return [r for r in self.model.requests if r.body.get("tools") and note in _last(r)]


def messages(request: RecordedRequest) -> list[dict[str, Any]]:
    """A request's messages, tool-call arguments and tool results parsed: Postgres' jsonb keeps
    keys in its own order, so restored events may serialize in another (equal) order."""
    parsed = json.loads(json.dumps(request.body["messages"]))
    for message in parsed:
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        if message["role"] == "tool":
            message["content"] = json.loads(message["content"])
    return list(parsed)


def _last(request: RecordedRequest) -> str:
    said = [m for m in request.body["messages"] if m["role"] in ("user", "tool")]
    return str(said[-1]["content"]) if said else ""


@pytest.fixture
async def session(root: Path, pg_params: ConnectParams) -> AsyncIterator[Session]:
    async with contextlib.AsyncExitStack() as stack:
        model = await stack.enter_async_context(ScriptedModelServer(SCRIPT))
        home = _home(root, pg_params, model.url)
        daemon = await stack.enter_async_context(running_daemon(home))
        operator = await stack.enter_async_context(await ChoirClient.connect(home))
        workspace = root / "ws"
        workspace.mkdir()
        session = Session(daemon, operator, model, root, workspace)
        assert daemon.services is not None

        def record(_session_id: str, lane: LaneReport) -> None:
            session.reports.append(lane.report)

        stack.callback(daemon.services.status.subscribe(record))
        try:
            yield session
        finally:
            if session.process is not None and session.process.returncode is None:
                session.process.kill()
                await session.process.wait()


def _home(root: Path, pg_params: ConnectParams, model_url: str) -> ChoirHome:
    home = make_home(
        root,
        postgres=external_postgres(pg_params),
        snapshot_every_events=EVERY,
        snapshot_every_s=3600,
        event_window_size=12,
    )
    data = read_config(home)
    data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model_url}
    write_config(home, data)
    return home


def restored_line(log_file: Path) -> dict[str, Any]:
    """The resumed agent's "session restored" log line."""
    for line in log_file.read_text().splitlines():
        record: dict[str, Any] = json.loads(line)
        if record.get("message") == "session restored":
            return record
    raise AssertionError(f"no 'session restored' line in {log_file}")


def core_budgets(report: ReportStatusRequest) -> dict[str, int]:
    """What a core lane's report says is left, but its wall time (the clock moved on)."""
    return {k: v for k, v in report.budget_remaining.items() if k != "per_job_wall_time_ms"}


async def run_until_the_sixth_step(session: Session) -> None:
    """Chats (edge folds), the job's first five notes, its sixth model call out."""
    for n in range(6):
        await session.chat(f"hello {n}")
    await session.chat("please start the scribe")

    async def sixth_step_out() -> bool:
        return bool(session.requests_after("note-5.txt"))

    await poll_until(sixth_step_out, within=30)

    async def progress_durable() -> bool:
        events = await session.events()
        return any(
            e.event_type == "core_event_emitted" and e.payload["event"].get("phase") == "step 6"
            for e in events
        )

    await poll_until(progress_durable, within=10)
    await asyncio.sleep(0.3)  # nothing else is committed while the model call is out


async def test_snapshots_ride_heartbeats_every_k_events(session: Session) -> None:
    await session.launch("agent")
    await run_until_the_sixth_step(session)

    events = await session.events()
    snapshots = await session.snapshots()
    assert len(snapshots) >= 3, "a snapshot at least every ten events"
    hashes = {e.rev: e.hash for e in events}
    revs = [rev for rev, _ in snapshots]
    assert revs[0] >= EVERY
    assert all(b - a >= EVERY for a, b in itertools.pairwise(revs))
    assert len(events) - revs[-1] < EVERY + 10  # none overdue (a heartbeat may carry several)
    for rev, stored in snapshots:
        snapshot = Snapshot.model_validate(stored)
        assert snapshot.content_problem() is None
        assert (snapshot.rev, snapshot.hash) == (rev, hashes[rev])
    latest = Snapshot.model_validate(snapshots[-1][1])
    assert [job.job_name for job in latest.open_jobs] == [JOB]
    assert latest.budgets.jobs[JOB].steps >= 1
    assert "folded-mark" in latest.reference_summaries["edge"].summary


async def test_a_resume_replays_only_the_tail_after_the_latest_snapshot(session: Session) -> None:
    await session.launch("first")
    await run_until_the_sixth_step(session)
    [before_crash] = session.requests_after("note-5.txt")
    last_core_report = [r for r in session.reports if r.lane == CORE][-1]
    await session.kill()

    events = await session.events()
    ack_rev = events[-1].rev
    snap_rev, stored = (await session.snapshots())[-1]
    snapshot = Snapshot.model_validate(stored)
    assert snap_rev < ack_rev  # a snapshot, then a tail (the job's last result and progress)
    # Recovery must not need these: they are gone.
    await session.execute(
        "DELETE FROM choir_control.session_events WHERE session_id = $1 AND rev <= $2",
        session.session_id,
        snap_rev,
    )
    reports_before = len(session.reports)

    await session.launch("second")

    async def resumed() -> bool:
        return len(session.requests_after("note-5.txt")) == 2

    await poll_until(resumed, within=20)
    line = restored_line(session.root / "second.log")
    assert (line["snapshot_rev"], line["tail_events"]) == (snap_rev, ack_rev - snap_rev)
    assert line["head_rev"] == ack_rev

    # The job's working memory: the very prompt it sent before the crash.
    after_resume = session.requests_after("note-5.txt")[1]
    assert messages(after_resume) == messages(before_crash)

    # Its budgets and the session's, as they were.
    [first_core_report, *_] = [r for r in session.reports[reports_before:] if r.lane == CORE]
    assert core_budgets(first_core_report) == core_budgets(last_core_report)

    # It finishes, writing note 6 once; no earlier call runs again.
    async def finished() -> bool:
        return any(e.event_type == "core_stopped" for e in await session.events())

    await poll_until(finished, within=20)
    after = await session.events()
    [stopped] = [e for e in after if e.event_type == "core_stopped"]
    assert (stopped.payload["outcome"], stopped.payload["report"]) == (
        "completed",
        "Six notes written.",
    )
    writes = [
        e.payload["call_id"]
        for e in after
        if e.event_type == "tool_call_committed" and e.payload["tool"] == "choir.fs.write"
    ]
    assert len(writes) == len(set(writes))
    assert sorted(p.name for p in session.workspace.glob("note-*.txt")) == [
        f"note-{n}.txt" for n in range(1, 7)
    ]
    # The chain continues the snapshot's hash across the boundary.
    previous = snapshot.hash
    for event in after:
        assert event.hash_prev == previous
        previous = event.hash

    # Edge's summary came through the snapshot too: its next prompt carries it.
    await session.chat("hello again")
    last = [r for r in session.model.requests if r.body.get("tools")][-1].body
    system = "\n".join(str(m["content"]) for m in last["messages"] if m["role"] == "system")
    assert "folded-mark" in system


async def test_a_corrupt_snapshot_is_passed_over_for_an_older_one(session: Session) -> None:
    await session.launch("first")
    await run_until_the_sixth_step(session)
    await session.kill()
    snapshots = await session.snapshots()
    (older, _), (newest, _) = snapshots[-2], snapshots[-1]
    ack_rev = (await session.events())[-1].rev
    await session.execute(
        "UPDATE choir_control.session_snapshots "
        "SET snapshot = jsonb_set(snapshot, '{budgets,tokens}', '1') "
        "WHERE session_id = $1 AND rev = $2",
        session.session_id,
        newest,
    )

    await session.launch("second")

    async def resumed() -> bool:
        return len(session.requests_after("note-5.txt")) == 2

    await poll_until(resumed, within=20)
    line = restored_line(session.root / "second.log")
    assert (line["snapshot_rev"], line["tail_events"]) == (older, ack_rev - older)


async def test_with_no_usable_snapshot_every_event_is_replayed(session: Session) -> None:
    await session.launch("first")
    await run_until_the_sixth_step(session)
    last_core_report = [r for r in session.reports if r.lane == CORE][-1]
    await session.kill()
    ack_rev = (await session.events())[-1].rev
    # A snapshot whose chain hash is not the one its tail continues from: re-sealed, so only
    # the link gives it away.
    for rev, stored in await session.snapshots():
        forged = Snapshot.model_validate(stored).model_copy(update={"hash": "f" * 64}).sealed()
        await session.execute(
            "UPDATE choir_control.session_snapshots SET snapshot = $3 "
            "WHERE session_id = $1 AND rev = $2",
            session.session_id,
            rev,
            forged.model_dump(mode="json"),
        )
    reports_before = len(session.reports)

    await session.launch("second")

    async def resumed() -> bool:
        return len(session.requests_after("note-5.txt")) == 2

    await poll_until(resumed, within=20)
    line = restored_line(session.root / "second.log")
    assert (line["snapshot_rev"], line["tail_events"]) == (None, ack_rev)
    [first_core_report, *_] = [r for r in session.reports[reports_before:] if r.lane == CORE]
    assert core_budgets(first_core_report) == core_budgets(last_core_report)
