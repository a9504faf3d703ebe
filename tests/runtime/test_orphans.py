"""choird start removes what a previous choird on the same home left running (§6.2 step 6)
when its lease expired meanwhile (a live lease is adopted: tests/faults/test_choird_restart.py).

A real `choird` process on the docker runtime starts agent-1 and is then SIGKILLed, so its
container (and, as root, its nosuid bind of the workspace) outlives it; the next choird starts
after the agent's lease (2 s here) ran out. It removes the container, releases the mount and
crashes the session (its leases released), and leaves alone a `choir.managed` container of
another home.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from choir.client import ChoirClient
from choir.config import load_home
from choir.core.security.mountinfo import Mount, mount_at, parse_mountinfo
from choir.daemon.images.build import ensure_agent_image
from choir.home import ChoirHome
from choir.store.postgres.pool import connect_plain
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import SessionStatus, get_session
from tests.docker_support import BASE_IMAGE
from tests.harness.homes import read_config, write_config
from tests.harness.processes import Choird, spawn_choird, wait_until_ready
from tests.runtime.conftest import BUILD_TIMEOUT_S, containers_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT_S)]


@pytest.fixture
def decoy(engine: docker.DockerClient, root: Path) -> Iterator[Any]:
    """A running choir.managed container of another home: not this choird's to remove."""
    labels = {"choir.managed": "true", "choir.home": f"{root}/another-home"}
    container = engine.containers.run(
        BASE_IMAGE, ["sleep", "300"], labels=labels, detach=True, network_mode="none"
    )
    try:
        yield container
    finally:
        container.remove(force=True)


@pytest.fixture
def swept(engine: docker.DockerClient, home: ChoirHome) -> Iterator[None]:
    """Whatever happens in the test, no container of its home outlives it."""
    yield
    for container in containers_of(engine, home):
        container.remove(force=True)


def workspace_mount(path: str) -> Mount | None:
    return mount_at(parse_mountinfo(Path("/proc/self/mountinfo").read_text()), path)


def stop(choird: Choird) -> None:
    choird.process.send_signal(signal.SIGTERM)
    choird.process.wait(timeout=60)


async def session_status(params: ConnectParams, session_id: str) -> SessionStatus:
    conn = await connect_plain(params)
    try:
        row = await get_session(conn, session_id)
    finally:
        await conn.close()
    assert row is not None
    return row.status


def step_6(home: ChoirHome) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in home.choird_log.read_text().splitlines()]
    return [line for line in lines if line["message"].startswith("step 6")]


@pytest.mark.usefixtures("swept")
async def test_a_killed_choirds_container_is_removed_by_the_next_one(
    home: ChoirHome, engine: docker.DockerClient, decoy: Any, pg_params: ConnectParams
) -> None:
    data = read_config(home)
    data.update(heartbeat_interval_ms=500, crash_detection_threshold_ms=2000)
    write_config(home, data)
    await ensure_agent_image(home, load_home(home).config, "agent-1")  # the start is quick
    first = spawn_choird(home, "--runtime", "docker")
    try:
        await asyncio.to_thread(wait_until_ready, first)
        async with await ChoirClient.connect(home) as client:
            started = await client.agent_start("agent-1", {"dm": "console"})
        assert started.runtime == "docker"
    finally:
        first.process.kill()
        first.process.wait(timeout=30)
    (orphan,) = containers_of(engine, home)
    assert orphan.status == "running"
    assert orphan.labels["choir.session"] == started.session_id
    workspace = str((home.workspaces / "default").resolve())
    root_choird = os.geteuid() == 0
    assert (workspace_mount(workspace) is not None) == root_choird  # its nosuid bind, left
    await asyncio.sleep(3.0)  # its lease (2 s without a heartbeat) expires

    home.choird_log.unlink()  # "choird ready" must be the second one's
    second = spawn_choird(home, "--runtime", "docker")
    try:
        await asyncio.to_thread(wait_until_ready, second)
        assert containers_of(engine, home) == []
        decoy.reload()
        assert decoy.status == "running"
        status = await session_status(pg_params, started.session_id)
        assert status == SessionStatus.CRASHED
        (removed,) = step_6(home)
        assert removed["removed"] == [orphan.name]
        assert removed["runtime"] == "docker"
        assert workspace_mount(workspace) is None  # released by the next choird
    finally:
        await asyncio.to_thread(stop, second)


def test_a_dead_docker_host_refuses_docker_naming_the_process_runtime(
    home: ChoirHome, root: Path
) -> None:
    import subprocess

    from tests.harness.processes import BIN, environment

    dead = f"unix://{root}/no-engine/docker.sock"  # not a parent of the workspaces
    began = time.monotonic()
    done = subprocess.run(
        [str(BIN / "choird"), "--runtime", "docker"],
        env=environment(CHOIR_HOME=str(home.root), DOCKER_HOST=dead),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 6, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("choird: error:")]
    assert len(errors) == 1, done.stderr
    assert f"no Docker engine answers at {dead}" in errors[0]
    assert "choird --runtime process" in errors[0]
    assert "Traceback" not in done.stderr
    assert time.monotonic() - began < 30
