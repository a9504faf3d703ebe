"""Crash recovery end to end (§13.2, §13.3; DESIGN-NOTES "Durability").

A real choird in the test process, the real `choir-agent` in its own process, a scripted model.
A core job's non-idempotent `choir.exec` appends one line and then sleeps; the agent is killed
with SIGKILL while it sleeps. Restarted for the same session, the agent gets back every event
choird acknowledged with its chain intact, holds the job instead of re-running the call, and
the operator sees the call in `session.recover` and decides — whether the resume replays every
event or starts from a snapshot that already holds the interrupted intent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.protocol import GENESIS_HASH, Snapshot
from choir.protocol.operator.answers import ChatSent
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from choir.store.snapshots import latest_snapshot
from tests.e2e_agent.launch import launch_agent
from tests.e2e_agent.test_agent_process import choir_root
from tests.harness.chat import replies_until
from tests.harness.daemons import poll_until, pool_of, running_daemon, stored_events
from tests.harness.homes import read_config, scripted_home, write_config

pytestmark = pytest.mark.slow

SCRIPT = Script(
    description="a core job interrupted by a crash in the middle of a side effect",
    steps=[
        ToolCallsStep(
            match="start the appender",
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={"job_name": "appender", "task_spec": "Append x to appended.txt."},
                )
            ],
        ),
        ReplyStep(after="tool", match="appender started", text="Started appender."),
        ReplyStep(match="crashed while", text="Checked appended.txt: the line is there."),
        ToolCallsStep(
            calls=[
                ScriptedCall(
                    name="choir.exec", arguments={"command": "echo x >> appended.txt; sleep 60"}
                )
            ]
        ),
    ],
)


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture(params=[None, 1], ids=["no-snapshot", "snapshot-every-event"])
def home(
    request: pytest.FixtureRequest,
    root: Path,
    pg_params: ConnectParams,
    model: ScriptedModelServer,
) -> ChoirHome:
    """With the default cadence no snapshot is taken, and a resume replays every event; with a
    snapshot every event, the interrupted intent reaches the resume through the snapshot."""
    home = scripted_home(root, pg_params, model.url)
    if request.param is not None:
        data = read_config(home)
        data["snapshot_every_events"] = request.param
        write_config(home, data)
    return home


async def launch(daemon: ChoirDaemon, root: Path, name: str) -> asyncio.subprocess.Process:
    """`choir-agent` for agent-1's session (a crashed one is resumed), as choird would start it."""
    tree = root / "choir"
    if not tree.exists():
        choir_root(root)
    launched = await launch_agent(daemon, root, tree=tree, workspace=root / "ws", log_name=name)
    return launched.process


async def killed_mid_append(
    daemon: ChoirDaemon, operator: ChoirClient, root: Path
) -> tuple[ChatSent, str]:
    """agent-1 asked to start the appender, killed -9 once the appender wrote to
    `ws/appended.txt`: the message sent and the session."""
    appended = root / "ws" / "appended.txt"
    first = await launch(daemon, root, "first")
    try:
        sent = await operator.chat_send("agent-1", "please start the appender")
        await replies_until(operator, sent.after_seq, "Started appender.")
        # the line itself, not the file: `>>` creates it before echo writes (a kill between
        # the two left it empty, and the test read that as the job's effect lost)
        await poll_until(lambda: asyncio.to_thread(_appended, appended), within=10)
    finally:
        first.kill()
        await first.wait()
    assert daemon.services is not None
    rows = await daemon.services.sessions.recent("agent-1", 1)
    return sent, rows[0].session_id


def _appended(path: Path) -> bool:
    return path.exists() and path.read_text() == "x\n"


def chain_intact(events: list[Any]) -> bool:
    previous = GENESIS_HASH
    for index, event in enumerate(events, start=1):
        if event.rev != index or event.hash_prev != previous:
            return False
        previous = event.hash
    return True


async def test_a_crash_in_a_side_effect_holds_the_job_until_the_operator_decides(
    home: ChoirHome, root: Path, model: ScriptedModelServer
) -> None:
    (root / "ws").mkdir()
    appended = root / "ws" / "appended.txt"
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as operator:
        assert daemon.services is not None
        sent, session_id = await killed_mid_append(daemon, operator, root)
        before = await stored_events(daemon, session_id)
        assert chain_intact(before)
        [intent] = [
            e
            for e in before
            if e.event_type == "tool_call_committed" and e.payload["tool"] == "choir.exec"
        ]
        assert not any(
            e.event_type == "tool_result_committed"
            and e.payload["call_id"] == intent.payload["call_id"]
            for e in before
        )
        await daemon.services.sessions.mark_crashed(session_id, "killed by the test")
        async with pool_of(daemon).acquire() as conn:
            latest = await latest_snapshot(conn, session_id, before[-1].rev)
        if read_config(home).get("snapshot_every_events") == 1:
            assert latest is not None
            snapshot = Snapshot.model_validate(latest.snapshot)
            assert intent.payload["call_id"] in [i.call_id for i in snapshot.open_intents]
        else:
            assert latest is None

        second = await launch(daemon, root, "second")
        try:
            listed = await operator.session_recover(session_id)
            assert [c.call_id for c in listed.interrupted] == [intent.payload["call_id"]]
            assert listed.interrupted[0].job_name == "appender"

            async def status_seen() -> bool:
                return "edge" in daemon.services.status.lanes(session_id)  # type: ignore[union-attr]

            await poll_until(status_seen, within=10)
            await asyncio.sleep(1)
            assert appended.read_text() == "x\n"  # held: not run again

            decided = await operator.session_recover(session_id, choice="resume")
            assert decided.requested is True
            await replies_until(operator, sent.after_seq, "the line is there")

            async def resolved() -> bool:
                events = await stored_events(daemon, session_id)
                return any(e.event_type == "core_stopped" for e in events)

            await poll_until(resolved, within=10)
            after = await stored_events(daemon, session_id)
            assert chain_intact(after)
            assert [(e.rev, e.hash) for e in after[: len(before)]] == [
                (e.rev, e.hash) for e in before
            ]
            [result] = [
                e
                for e in after
                if e.event_type == "tool_result_committed"
                and e.payload["call_id"] == intent.payload["call_id"]
            ]
            assert result.payload["result"]["error_code"] == "outcome_unknown"
            intents = [
                e
                for e in after
                if e.event_type == "tool_call_committed"
                and e.payload["call_id"] == intent.payload["call_id"]
            ]
            assert len(intents) == 1  # never re-run
            assert appended.read_text() == "x\n"
            assert (await operator.session_recover(session_id)).interrupted == []
        finally:
            second.kill()
            await second.wait()
