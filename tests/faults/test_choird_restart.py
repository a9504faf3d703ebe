"""kill -9 of choird under a working agent, then a new choird (issue 12 point 5).

choird runs as a real process (the test session's Postgres); agent-1 runs on the process
runtime, and on docker in its hardened container. The agent works on a job with tool calls
(two `choir.fs.read`s, the model taking 3 s between them) when choird is SIGKILLed. The agent
keeps working and buffering; a new choird adopts it: same session, same process or container,
its socket back, and the events committed meanwhile replicated — a gap-free, hash-verified
chain with no unknown outcome — then `choirctl chat` answers again and `agent status` shows it
running. An agent whose lease expires while choird is down is stopped and its session crashed.
An agent still starting when choird dies is `test_start_rides_out_restart.py`.
`choir down` still stops everything. Before the fix the new choird removed the agent and
crashed its session; the work done meanwhile was lost.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psutil
import pytest

from choir.scripted import ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.docker_support import require_docker
from tests.faults.invariants import InvariantChecker
from tests.faults.scene import (
    GENEROUS,
    SCRIPT,
    SHORT_LEASE,
    START,
    Scene,
    containers_of,
    gone,
    home_for,
    kinds_stored,
    process_scene,
    restart_choird,
    run,
    script,  # noqa: F401 — the fixture
    start_choird,
    start_work,
)
from tests.faults.support import (
    IN_CONTAINER_PORT,
    agent_processes,
    as_json,
    assert_chain,
    kill9,
    serve_model_in,
    teardown,
)
from tests.harness.homes import read_config
from tests.harness.processes import run_choir
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# -- the scenarios ---------------------------------------------------------------------------


async def test_a_process_agent_rides_out_a_choird_kill(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    async with process_scene(root, pg_params, model.url) as scene:
        await rides_out_a_kill(scene)


async def test_a_docker_agent_rides_out_a_choird_kill(root: Path, pg_params: ConnectParams) -> None:
    require_docker()
    url = f"http://127.0.0.1:{IN_CONTAINER_PORT}/v1"  # the container's loopback
    home = home_for(root, pg_params, url, **GENEROUS)
    (Path(read_config(home)["workspaces"]["default"]["path"]) / ".script.json").write_text(
        SCRIPT.model_dump_json()
    )
    scene = Scene(home, root, pg_params, "docker")
    try:
        await rides_out_a_kill(scene)
    finally:
        await asyncio.to_thread(teardown, home, scene.choird)


async def test_an_agent_whose_lease_expired_while_choird_was_down_is_stopped(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    home = home_for(root, pg_params, model.url, heartbeat_interval_ms=500, **SHORT_LEASE)
    scene = Scene(home, root, pg_params, "process")
    try:
        await start_choird(scene)
        started = as_json(await run(scene, *START))
        assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0  # up and beating
        assert scene.choird is not None
        kill9(scene.choird)
        await asyncio.sleep(SHORT_LEASE["crash_detection_threshold_ms"] / 1000 + 1.5)
        assert psutil.pid_exists(started["pid"])  # alive, but its lease ran out
        await start_choird(scene)

        await poll_until(lambda: asyncio.to_thread(gone, started["pid"]), within=10, every=0.2)
        status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert (status["state"], status["session_status"]) == ("crashed", "crashed")
        assert status["session_id"] == started["session_id"]
        assert "lease expired while choird was down" in home.choird_log.read_text()
    finally:
        await asyncio.to_thread(teardown, home, scene.choird)


async def test_an_adopted_agent_stops_and_restarts_with_its_exit_code_unknown(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    """An adopted agent is not the new choird's child: nothing tells it the exit code, so its
    stop says so (it said -1, which reads as killed by SIGHUP). A restart resumes it and leaves
    it running: the stop is not taken for one of an agent choird never ran, whose session would
    be pushed a second shutdown (that the resumed agent would get)."""
    async with process_scene(root, pg_params, model.url) as scene:
        await start_choird(scene)
        started = as_json(await run(scene, *START))
        assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0

        await restart_choird(scene)
        restarted = as_json(await run(scene, "agent", "restart", "agent-1", "--json"))
        assert restarted["stopped"]["exit_code"] is None
        assert restarted["session_id"] == started["session_id"]  # resumed
        assert gone(started["pid"])
        hello = await run(scene, "chat", "agent-1", "hello")
        assert hello.returncode == 0, hello.stderr
        status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
        assert (status["state"], status["pid"]) == ("running", restarted["pid"])

        await restart_choird(scene)
        stopped = as_json(await run(scene, "agent", "stop", "agent-1", "--json"))
        assert (stopped["session_id"], stopped["status"]) == (started["session_id"], "stopped")
        assert stopped["exit_code"] is None
        assert gone(restarted["pid"])


async def test_choir_down_says_an_adopted_agents_exit_code_is_unknown(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    """`choir down` stops an adopted agent like `agent stop` does, and says the same of it."""
    async with process_scene(root, pg_params, model.url) as scene:
        await start_choird(scene)
        started = as_json(await run(scene, *START))
        # serving before choird dies (one still starting is test_an_agent_still_starting_…)
        assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0
        await restart_choird(scene)

        down = await asyncio.to_thread(run_choir, scene.home, "down")

        assert down.returncode == 0, down.stderr
        line = f"agent-1   stopped: session {started['session_id']} stopped (exit code unknown)"
        assert line in down.stdout.splitlines()
        assert gone(started["pid"])


async def rides_out_a_kill(scene: Scene) -> None:
    await start_choird(scene)
    started = as_json(await run(scene, *START))
    session_id = started["session_id"]
    container = as_json(await run(scene, "agent", "status", "agent-1", "--json"))["container"]
    if scene.runtime == "docker":
        await asyncio.to_thread(serve_model_in, container)
    assert (await run(scene, "chat", "agent-1", "hello")).returncode == 0
    work = await start_work(scene)  # the job; this choirctl dies with choird

    async def first_read_stored() -> bool:
        return "tool_result_committed" in await kinds_stored(scene, session_id)

    await poll_until(first_read_stored, within=30, every=0.2)
    checker = InvariantChecker(scene.params, ["agent-1"])
    await checker.observe()
    assert scene.choird is not None
    kill9(scene.choird)
    checker.fault("kill -9 of choird")
    killed_at = time.time()
    await asyncio.wait_for(work.wait(), 30)
    agent_pid = started["pid"] if scene.runtime == "process" else None
    await asyncio.sleep(1.0)  # the agent goes on meanwhile
    await start_choird(scene)  # the one step the operator takes

    async def adopted() -> bool:
        status = await run(scene, "agent", "status", "agent-1", "--json")
        return status.returncode == 0 and as_json(status)["state"] == "running"

    await checker.healthy(adopted)  # within 10 s of the kill

    async def replied() -> bool:
        return "agent_replied" in [
            r.event_type
            for r in await asyncio.to_thread(scene.events, session_id)
            if r.created_at.timestamp() > killed_at
        ]

    await poll_until(replied, within=60, every=0.2)
    verdict = await checker.verify()  # chain, acknowledged events kept, calls once
    assert verdict.open_intents == []
    records = await asyncio.to_thread(scene.events, session_id)
    assert_chain(records)
    since_kill = [r for r in records if r.created_at.timestamp() > killed_at]
    kinds = [r.event_type for r in since_kill]
    assert "tool_result_committed" in kinds, kinds  # the second read, done while choird was away
    results = [r.payload for r in records if r.event_type == "tool_result_committed"]
    assert all(result["result"]["status"] == "success" for result in results), results
    replies = [r.payload["text"] for r in since_kill if r.event_type == "agent_replied"]
    assert "done reading" in replies

    status = as_json(await run(scene, "agent", "status", "agent-1", "--json"))
    assert (status["state"], status["session_id"]) == ("running", session_id)
    if agent_pid is not None:
        assert status["pid"] == agent_pid  # the same process, adopted
    else:
        assert status["container"] == container
    sessions = as_json(await run(scene, "session", "list", "agent-1", "--json"))["sessions"]
    assert [s["session_id"] for s in sessions] == [session_id]  # no new session
    log = scene.home.choird_log.read_text()
    assert '"adopted": ["agent-1"]' in log or "agent adopted" in log

    hello = await run(scene, "chat", "agent-1", "hello")
    assert hello.returncode == 0, hello.stderr
    assert "hello back" in hello.stdout

    down = await asyncio.to_thread(run_choir, scene.home, "down", "--json", timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert scene.choird is not None
    assert scene.choird.process.wait(timeout=30) == 0
    assert agent_processes(scene.home) == []
    if agent_pid is not None:
        assert gone(agent_pid)
    else:
        assert await asyncio.to_thread(containers_of, scene.home) == []
    status_after = await asyncio.to_thread(scene.ctl, "status")
    assert status_after.returncode == 6  # choird is gone too
