"""The scene of the choird-restart fault tests: a home on the test session's Postgres whose
agent-1 reads files for a scripted model, choird as a real process killed and started again.
Shared by the tests of tests/faults and tests/proposals that restart choird under an agent.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.faults.support import (
    as_json,
    choirctl,
    kill9,
    spawn_choird,
    stored_events,
    teardown,
)
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.processes import Choird, environment
from tests.harness.waits import poll_until

READ = ScriptedCall(name="choir.fs.read", arguments={"path": "notes.txt"})
SCRIPT = Script(
    steps=[
        ToolCallsStep(match="work", calls=[READ]),
        ToolCallsStep(after="tool", delay_ms=3000, calls=[READ]),  # choird dies meanwhile
        ReplyStep(after="tool", delay_ms=500, text="done reading"),
        ReplyStep(repeat=True, text="hello back"),
    ]
)


@dataclass
class Scene:
    home: ChoirHome
    root: Path
    params: ConnectParams
    runtime: str
    choird: Choird | None = None

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return choirctl(self.home, *args)

    def events(self, session_id: str) -> list[Any]:
        return stored_events(self.home, session_id, self.params)


def home_for(root: Path, params: ConnectParams, model_url: str, **settings: Any) -> ChoirHome:
    home = make_home(root, postgres=external_postgres(params), **settings)
    data = read_config(home)
    data["models"]["demo"] = {"provider": "scripted", "model": "faults", "endpoint": model_url}
    write_config(home, data)
    workspace = Path(data["workspaces"]["default"]["path"])
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("the notes\n")
    return home


@asynccontextmanager
async def process_scene(root: Path, params: ConnectParams, model_url: str) -> AsyncIterator[Scene]:
    """A home whose lease outlives a choird restart, its scene on the process runtime; choird
    and Postgres' leftovers cleaned up after."""
    home = home_for(root, params, model_url, **GENEROUS)
    scene = Scene(home, root, params, "process")
    try:
        yield scene
    finally:
        await asyncio.to_thread(teardown, home, scene.choird)


@pytest.fixture
def script() -> Script:
    return SCRIPT


async def run(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(scene.ctl, *args)


async def start_choird(scene: Scene, **env: str) -> None:
    scene.choird = await asyncio.to_thread(
        spawn_choird, scene.home, "--runtime", scene.runtime, **env
    )


async def kinds_stored(scene: Scene, session_id: str) -> list[str]:
    return [record.event_type for record in await asyncio.to_thread(scene.events, session_id)]


async def restart_choird(scene: Scene) -> None:
    """kill -9 of choird, a new one, and agent-1 adopted by it."""
    assert scene.choird is not None
    kill9(scene.choird)
    await start_choird(scene)

    async def adopted() -> bool:
        status = await run(scene, "agent", "status", "agent-1", "--json")
        return status.returncode == 0 and as_json(status)["state"] == "running"

    await poll_until(adopted, within=30, every=0.2)


START = ("agent", "start", "agent-1", "--dm", "console", "--json")
GENEROUS = {"heartbeat_interval_ms": 1000, "crash_detection_threshold_ms": 30_000}
"""A lease that outlives a choird restart on a loaded machine (the agent beats every second)."""
SHORT_LEASE = {"crash_detection_threshold_ms": 2000}


def containers_of(home: ChoirHome) -> list[str]:
    """The names of the containers (running or not) choird made for `home`."""
    import docker

    client = docker.from_env(timeout=30)
    try:
        wanted: dict[str, Any] = {"label": f"choir.home={home.root}"}
        return [str(c.name) for c in client.containers.list(all=True, filters=wanted)]
    finally:
        client.close()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def start_work(scene: Scene) -> asyncio.subprocess.Process:
    """`choirctl chat agent-1 work` in the background: the scripted job of two reads, 3 s
    apart (`SCRIPT`), whose choirctl a killed or restarting choird leaves without an answer."""
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "choirctl"),
        "chat",
        "agent-1",
        "work",
        env=environment(CHOIR_HOME=str(scene.home.root)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
