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
from tests.faults.support import IN_CONTAINER_PORT, as_json, assert_chain, kill9, serve_model_in
from tests.faults.test_choird_restart import (
    GENEROUS,
    HELLO_HOLD_MS,
    SCRIPT,
    START,
    Scene,
    agent_lines,
    agent_logged,
    gone,
    home_for,
    run,
    start_choird,
)
from tests.harness.agent_logs import agent_log_text
from tests.harness.homes import read_config
from tests.harness.processes import Choird
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RUNTIMES = ("process", "docker")
RETRYING = "choird unreachable while starting; retrying"
HELLO_LOST = "hello.before_answer=exit"
"""choird handles the agent's INIT_HELLO, then dies before its answer goes out."""


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
