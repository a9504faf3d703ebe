"""Large model replies end to end (issue 12, point 1): nothing crashes, nothing becomes unreadable.

A real choird in the test process on the process runtime, the real `choir-agent` it spawns, the
scripted model answering with 2 MB and ~600 KB texts. Before the fix a 2 MB reply crashed the
agent (its heartbeat exceeded the 1 MiB frame limit), and two 600 KB replies made every later
resume die on a too-large INIT_HELLO answer while `agent start` said "resumed" with exit 0.

Now an event too large to travel whole is committed as a preview plus an artifact holding all of
it (chained by its sha256); every recovery path reads back in pages bounded by bytes; and a resume
that cannot work makes `agent start` / `agent restart` fail with one line and a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedModelServer
from choir.store.sessions import SessionStatus
from choir.store.target import ConnectParams
from tests.e2e.daemons import poll_until, pool_of, running_daemon, session_row, stored_events
from tests.e2e.homes import short_root
from tests.e2e_agent.launch import scripted_home
from tests.lifecycle.support import chat, choirctl, one_error_line

pytestmark = pytest.mark.slow


def text_of(size: int, tag: str) -> str:
    """About `size` bytes of numbered lines, so a cut is visible and nothing compresses away."""
    lines, total, n = [], 0, 0
    while total < size:
        line = f"{tag} line {n:07d}: the quick brown fox jumps over the lazy dog\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines).strip()  # edge strips a reply's text


BIG = text_of(2_000_000, "big")
MEDIUM_A = text_of(600_000, "alpha")
MEDIUM_B = text_of(600_000, "beta")

SCRIPT = Script(
    description="replies far above one transport frame, then short ones",
    steps=[
        ReplyStep(match="big reply", repeat=True, text=BIG),
        ReplyStep(match="first medium", text=MEDIUM_A),
        ReplyStep(match="second medium", text=MEDIUM_B),
        ReplyStep(match="still there", repeat=True, text="Still here."),
    ],
)


@pytest.fixture
def root() -> Iterator[Path]:
    with short_root("lg-") as root:
        yield root


@pytest.fixture
async def model() -> AsyncIterator[ScriptedModelServer]:
    async with ScriptedModelServer(SCRIPT) as server:
        yield server


@pytest.fixture
def home(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> ChoirHome:
    return scripted_home(root, pg_params, model.url)


@pytest.fixture
async def choird(home: ChoirHome) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    async with (
        running_daemon(home) as daemon,
        await ChoirClient.connect(home, call_timeout=None) as client,
    ):
        try:
            yield daemon, client
        finally:
            with _quietly():
                await client.agent_stop("agent-1")


class _quietly:
    """Suppress the cleanup's refusal when the agent is not running any more."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], Exception)  # type: ignore[arg-type]


async def full_event(client: ChoirClient, session_id: str, rev: int) -> dict[str, Any]:
    """The complete event at `rev`, its artifact read back in pages and checked."""
    return await client.session_event(session_id, rev)


async def kill_agent(daemon: ChoirDaemon, pid: int, session_id: str) -> None:
    os.killpg(pid, signal.SIGKILL)

    async def crashed() -> bool:
        return (await session_row(daemon, session_id)).status == SessionStatus.CRASHED

    await poll_until(crashed, within=15)


async def test_a_2mb_reply_reaches_the_user_and_the_agent_keeps_running(
    choird: tuple[ChoirDaemon, ChoirClient],
) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    session_id = started["session_id"]

    reply = await chat(client, "send me a big reply")

    assert reply["artifact"] is not None
    assert reply["artifact"]["size"] > len(BIG)
    assert BIG.startswith(reply["text"].split("\n[")[0])  # the preview is the reply's start
    assert (await full_event(client, session_id, reply["rev"]))["text"] == BIG
    assert (await chat(client, "are you still there?"))["text"] == "Still here."
    row = await session_row(daemon, session_id)
    assert row.status == SessionStatus.ACTIVE
    stored = await stored_events(daemon, session_id)
    assert max(len(json.dumps(e.payload)) for e in stored) < 256 * 1024
    shown = await choirctl(daemon.home, "chat", "agent-1", "one more big reply please")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == BIG + "\n"


async def test_two_600kb_replies_then_kill_9_resume_and_read_back(
    choird: tuple[ChoirDaemon, ChoirClient], model: ScriptedModelServer
) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    session_id = started["session_id"]
    first = await chat(client, "first medium reply please")
    second = await chat(client, "second medium reply please")
    await kill_agent(daemon, started["pid"], session_id)

    resumed = await choirctl(daemon.home, "agent", "start", "agent-1", "--dm", "console")

    assert resumed.returncode == 0, resumed.stderr
    assert f"session {session_id} (resumed)" in resumed.stdout
    assert (await chat(client, "are you still there?"))["text"] == "Still here."
    last_prompt = json.dumps(model.requests[-1].body["messages"])
    assert "alpha line 0000000" in last_prompt
    assert "beta line 0000000" in last_prompt
    listed = await choirctl(daemon.home, "session", "events", session_id, "--limit", "1000")
    assert listed.returncode == 0, listed.stderr
    hint = f"choirctl session events {session_id} --from-rev {second['rev']} -n 1 --full"
    assert hint in listed.stdout
    as_json = await choirctl(daemon.home, "session", "events", session_id, "--json")
    assert as_json.returncode == 0, as_json.stderr
    views = {e["rev"]: e for e in json.loads(as_json.stdout)["events"]}
    assert views[first["rev"]]["artifact"]["size"] > len(MEDIUM_A)
    whole = await choirctl(
        daemon.home,
        "session",
        "events",
        session_id,
        "--from-rev",
        str(first["rev"]),
        "-n",
        "1",
        "--full",
        "--json",
    )
    assert whole.returncode == 0, whole.stderr
    assert json.loads(whole.stdout)["events"][0]["payload"]["text"] == MEDIUM_A
    assert (await full_event(client, session_id, second["rev"]))["text"] == MEDIUM_B


async def test_a_resume_that_cannot_work_fails_with_one_line_and_a_non_zero_exit(
    choird: tuple[ChoirDaemon, ChoirClient],
) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    session_id = started["session_id"]
    await chat(client, "first medium reply please")
    await kill_agent(daemon, started["pid"], session_id)
    async with pool_of(daemon).acquire() as conn:  # the stored history no longer chains
        await conn.execute(
            "UPDATE choir_control.session_events SET payload = jsonb_set(payload, '{text}', "
            "'\"tampered\"') WHERE session_id = $1 AND event_type = 'user_msg'",
            session_id,
        )

    done = await choirctl(daemon.home, "agent", "start", "agent-1", "--dm", "console")

    line = one_error_line(done, 1)
    assert line.startswith(f"error: agent-1 could not resume session {session_id}: ")
    assert "hash does not match" in line
    assert "--new-session" in line
    row = await session_row(daemon, session_id)
    assert row.status != SessionStatus.ACTIVE
    fresh = await choirctl(
        daemon.home, "agent", "start", "agent-1", "--dm", "console", "--new-session"
    )
    assert fresh.returncode == 0, fresh.stderr
    assert (await chat(client, "are you still there?"))["text"] == "Still here."


async def test_a_restart_whose_resume_fails_exits_non_zero(
    choird: tuple[ChoirDaemon, ChoirClient],
) -> None:
    daemon, client = choird
    started = await client.agent_start("agent-1", {"dm": "console"})
    session_id = started["session_id"]
    await chat(client, "are you still there?")
    async with pool_of(daemon).acquire() as conn:
        await conn.execute(
            "UPDATE choir_control.session_events SET payload = jsonb_set(payload, '{text}', "
            "'\"tampered\"') WHERE session_id = $1 AND event_type = 'user_msg'",
            session_id,
        )

    done = await choirctl(daemon.home, "agent", "restart", "agent-1")

    line = one_error_line(done, 1)
    assert f"could not resume session {session_id}" in line
    await asyncio.sleep(0)
