"""A starting agent rides out a choird restart at every point of its start, on both runtimes.

choird runs as a real process on the test session's Postgres; agent-1 runs on the process
runtime, and on docker in its hardened container (`test_choird_restart.py` is the same scene
with a serving agent). choird dies at two points of the agent's start:

- INIT_HELLO in flight: choird handled the hello and died before answering it
  (`hello.before_answer=exit`). The agent says hello again to the choird that comes back, which
  adopted it: the same session, lease and process (or container), "session started" logged
  once, and it serves. Before, the agent gave its start up at once, and the choird that came
  back crashed the session ("its agent gave its start up: connection closed …").
- INIT_HELLO answered, not serving yet (the agent held at `agent.after_hello`): the handover's
  rest and the config wait for the choird that comes back.

An agent whose choird stays away past its patience (`START_PATIENCE_S`, a minute: the only slow
part) gives its start up, and the choird that comes back says why on the crashed session.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from choir.agent.start_retry import START_PATIENCE_S
from choir.daemon.runtimes.adopt import recorded_processes
from choir.scripted import Script, ScriptedModelServer
from choir.store.leases import all_leases
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import get_session
from tests.docker_support import require_docker
from tests.faults.invariants import InvariantChecker
from tests.faults.scene import (
    GENEROUS,
    SCRIPT,
    START,
    Scene,
    gone,
    home_for,
    run,
    start_choird,
)
from tests.faults.support import IN_CONTAINER_PORT, as_json, assert_chain, kill9, serve_model_in
from tests.harness.agent_logs import agent_log_text
from tests.harness.homes import read_config
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RUNTIMES = ("process", "docker")
RETRYING = "choird unreachable while starting; retrying"
HELLO_LOST = "hello.before_answer=exit"
"""choird handles the agent's INIT_HELLO, then dies before its answer goes out."""
HELLO_HOLD_MS = 5000
"""How long agent-1 stays between INIT_HELLO and its handover: time for the test to see it
there and kill choird, not long enough to matter."""
HELD_AFTER_HELLO = f"agent.after_hello=sleep({HELLO_HOLD_MS})"


@pytest.fixture
def script() -> Script:
    return SCRIPT


@asynccontextmanager
async def scene_on(
    runtime: str, root: Path, params: ConnectParams, model: ScriptedModelServer
) -> AsyncIterator[Scene]:
    """A home whose lease outlives a choird restart, agent-1 on `runtime` (on docker its model
    is served inside its container, as the container's loopback is its own)."""
    from tests.faults.support import teardown

    url = model.url
    if runtime == "docker":
        require_docker()
        url = f"http://127.0.0.1:{IN_CONTAINER_PORT}/v1"
    home = home_for(root, params, url, **GENEROUS)
    if runtime == "docker":
        workspace = Path(read_config(home)["workspaces"]["default"]["path"])
        (workspace / ".script.json").write_text(SCRIPT.model_dump_json())
    scene = Scene(home, root, params, runtime)
    try:
        yield scene
    finally:
        await asyncio.to_thread(teardown, home, scene.choird)


# -- INIT_HELLO in flight ----------------------------------------------------------------------


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_an_agent_whose_hello_is_lost_in_flight_rides_out_a_choird_kill(
    runtime: str, root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    async with scene_on(runtime, root, pg_params, model) as scene:
        await start_choird(scene, CHOIR_FAILPOINTS=HELLO_LOST)
        # `agent start` may or may not be answered before the hello kills choird
        starting = asyncio.create_task(run(scene, *START))
        died = await choird_died(scene)
        await starting
        assert died == 137, died  # the failpoint, not anything else
        session_id, lease_id = await the_session(scene)
        where = await asyncio.to_thread(agent_place, scene)
        checker = InvariantChecker(scene.params, ["agent-1"])
        await checker.observe()
        checker.fault("choird died with agent-1's INIT_HELLO in flight")
        await asyncio.sleep(1.0)  # the agent finds choird gone meanwhile
        await start_choird(scene)  # no failpoint; the one step the operator takes

        await poll_until(lambda: agent_logged(scene, "choird reachable again"), within=60)
        await serves(scene)

        status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert (status["state"], status["session_id"]) == ("running", session_id)
        assert await asyncio.to_thread(agent_place, scene) == where  # the same, adopted
        if runtime == "docker":
            assert status["container"] == where
        sessions = as_json(await run(scene, "session", "list", "agent-1", "--json"))["sessions"]
        assert [s["session_id"] for s in sessions] == [session_id]  # no second session
        assert await the_session(scene) == (session_id, lease_id)  # nor a second lease
        lines = await agent_lines(scene)
        assert [line["message"] for line in lines].count("session started") == 1
        retried = [line for line in lines if line.get("message") == RETRYING]
        assert retried, lines
        assert retried[0]["step"] == "saying hello", retried
        assert not await agent_logged(scene, "could not start the session")
        verdict = await checker.verify()  # chain, acknowledged events kept, calls once
        assert verdict.open_intents == []
        assert_chain(await asyncio.to_thread(scene.events, session_id))


async def choird_died(scene: Scene, within: float = 120) -> int:
    """choird's exit code, once it has exited (within `within` s)."""
    assert scene.choird is not None
    process = scene.choird.process
    await poll_until(lambda: process.poll() is not None, within=within, every=0.05)
    code = process.returncode
    assert code is not None
    return code


async def the_session(scene: Scene) -> tuple[str, str | None]:
    """agent-1's one active session and its lease id, as Postgres holds them; every lease
    held is that session's."""
    conn = await connect(scene.params)
    try:
        rows = await conn.fetch(
            "SELECT session_id FROM choir_control.sessions WHERE agent_id = $1", "agent-1"
        )
        assert len(rows) == 1, rows
        row = await get_session(conn, rows[0]["session_id"])
        leases = await all_leases(conn)
    finally:
        await conn.close()
    assert row is not None
    assert row.status.value == "active", row
    assert leases
    assert {lease.session_id for lease in leases} == {row.session_id}, leases
    return row.session_id, row.lease_id


def agent_place(scene: Scene) -> tuple[int, int | None] | str:
    """Where agent-1 runs: its live process (pid and start), or its running container's id."""
    if scene.runtime == "process":
        [record] = recorded_processes(scene.home)
        assert record.alive(), record
        return record.pid, record.start_ticks
    import docker

    client = docker.from_env(timeout=30)
    try:
        wanted: dict[str, Any] = {"label": f"choir.home={scene.home.root}"}
        [container] = client.containers.list(filters=wanted)
        return str(container.id)
    finally:
        client.close()


async def serves(scene: Scene) -> None:
    """agent-1 answers a chat (on docker, once its model runs in its container)."""
    if scene.runtime == "docker":
        status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        await asyncio.to_thread(serve_model_in, status["container"])
    hello = await run(scene, "chat", "agent-1", "hello")
    assert hello.returncode == 0, hello.stderr
    assert "hello back" in hello.stdout


# -- INIT_HELLO answered, not serving yet --------------------------------------------------


@pytest.mark.parametrize("runtime", RUNTIMES)
async def test_an_agent_still_starting_rides_out_a_choird_kill(
    runtime: str, root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    """choird killed between the agent's INIT_HELLO and its serving (held there by the
    `agent.after_hello` failpoint): the agent waits for choird instead of giving its start up,
    and the new choird adopts it — same session, same process or container — and it serves."""
    async with scene_on(runtime, root, pg_params, model) as scene:
        await start_choird(scene, CHOIR_FAILPOINTS=HELD_AFTER_HELLO)
        started = as_json(await run(scene, *START))
        session_id = started["session_id"]
        await poll_until(lambda: agent_logged(scene, "session started"), within=30, every=0.05)
        where = await asyncio.to_thread(agent_place, scene)
        checker = InvariantChecker(scene.params, ["agent-1"])
        await checker.observe()
        assert scene.choird is not None
        kill9(scene.choird)  # the agent sleeps in the failpoint: it has not fetched its config
        checker.fault("kill -9 of choird while agent-1 starts")
        await poll_until(lambda: said_meanwhile(scene, where, RETRYING), within=30, every=0.1)
        await start_choird(scene)  # no failpoint: the agent is not started again

        await poll_until(lambda: agent_logged(scene, "choird reachable again"), within=60)
        await serves(scene)

        status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert (status["state"], status["session_id"]) == ("running", session_id)
        assert await asyncio.to_thread(agent_place, scene) == where  # the same, adopted
        sessions = as_json(await run(scene, "session", "list", "agent-1", "--json"))["sessions"]
        assert [s["session_id"] for s in sessions] == [session_id]
        lines = await agent_lines(scene)
        retried = [line for line in lines if line.get("message") == RETRYING]
        assert [line["step"] for line in retried] == ["loading the config"], retried
        # each line once: on docker the adopting choird copies on from where the log stopped
        assert [line["message"] for line in lines].count("session started") == 1
        verdict = await checker.verify()  # chain, acknowledged events kept, calls once
        assert verdict.open_intents == []
        records = await asyncio.to_thread(scene.events, session_id)
        assert_chain(records)
        assert "agent_replied" in [r.event_type for r in records]
        assert not await agent_logged(scene, "could not start the session")


# -- past the patience ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runtime", "failpoint", "step"),
    [
        ("process", HELD_AFTER_HELLO, "loading the config"),
        ("process", HELLO_LOST, "saying hello"),
        ("docker", HELLO_LOST, "saying hello"),
    ],
    ids=["after_hello", "hello_in_flight", "docker-hello_in_flight"],
)
async def test_an_agent_whose_choird_stays_away_gives_its_start_up(
    runtime: str,
    failpoint: str,
    step: str,
    root: Path,
    pg_params: ConnectParams,
    model: ScriptedModelServer,
) -> None:
    """choird gone while the agent starts — killed after INIT_HELLO was answered, or dead
    with the hello in flight — and not back within START_PATIENCE_S (a minute: the only slow
    part): the agent exits with one line saying choird was unreachable; the choird that comes
    back later marks the session crashed with that line — `agent status` shows it, and its next
    step resumes the session, which then serves. On docker nobody copied the container's output
    while choird was away: the choird that comes back copies it into the agent's log before it
    removes the container (before, the session's reason was "its agent no longer runs")."""
    async with scene_on(runtime, root, pg_params, model) as scene:
        await start_choird(scene, CHOIR_FAILPOINTS=failpoint)
        starting = asyncio.create_task(run(scene, *START))
        if failpoint == HELD_AFTER_HELLO:
            await poll_until(lambda: agent_logged(scene, "session started"), within=30)
            assert scene.choird is not None
            kill9(scene.choird)
        assert await choird_died(scene) in (137, -9)
        await starting  # answered or not, as choird died
        session_id, _ = await the_session(scene)
        where = await asyncio.to_thread(agent_place, scene)
        await poll_until(
            lambda: asyncio.to_thread(agent_exited, scene, where),
            within=START_PATIENCE_S + 60,
            every=0.5,
        )

        await start_choird(scene)
        failures = [
            line["error"]
            for line in await agent_lines(scene)
            if line.get("message") == "could not start the session"
        ]
        gave_up = f"choird was unreachable for {START_PATIENCE_S:g} s while agent-1 was starting"
        assert len(failures) == 1, failures
        assert failures[0].startswith(f"{gave_up} ({step}: "), failures
        text = await asyncio.to_thread(agent_log_text, scene.home, "agent-1")
        assert f"error: {failures[0]}" in text.splitlines()  # what it printed as it exited
        status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert (status["state"], status["session_status"]) == ("crashed", "crashed")
        outage = status["interrupted"]
        assert outage["session_id"] == session_id
        assert outage["reason"] == f"its agent gave its start up: {failures[0]}"[:500]
        assert outage["resumes"], outage

        resumed = as_json(await run(scene, *START))  # the next step the operator is given
        assert resumed["session_id"] == session_id
        await serves(scene)


def agent_exited(scene: Scene, where: tuple[int, int | None] | str) -> bool:
    """Whether agent-1's process (or container), found at `where`, has exited."""
    if isinstance(where, tuple):
        return gone(where[0])
    import docker

    client = docker.from_env(timeout=30)
    try:
        return str(client.containers.get(where).status) == "exited"
    finally:
        client.close()


# -- reading the agent ---------------------------------------------------------------------


async def agent_logged(scene: Scene, message: str) -> bool:
    """Whether agent-1 logged `message` yet (as far as choird copied its log)."""
    return any(line.get("message") == message for line in await agent_lines(scene))


async def agent_lines(scene: Scene) -> list[dict[str, Any]]:
    """agent-1's JSON log lines (not what it printed as it exited)."""
    text = await asyncio.to_thread(agent_log_text, scene.home, "agent-1")
    return json_lines(text)


async def said_meanwhile(scene: Scene, where: tuple[int, int | None] | str, message: str) -> bool:
    """Whether agent-1 logged `message` while choird is down: on docker nobody copies the
    container's output into its log file then, so it is read from the engine."""
    if scene.runtime == "process":
        return await agent_logged(scene, message)
    assert isinstance(where, str)
    done = await asyncio.to_thread(
        subprocess.run, ["docker", "logs", where], capture_output=True, text=True, timeout=30
    )
    return any(line.get("message") == message for line in json_lines(done.stdout + done.stderr))


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]
