"""A real choird on the docker runtime, the real agent image, and the engine to look at it with.

choird runs in the test process (`running_daemon(home, runtime="docker")`) on a home `choirctl
init` made, with the test session's Postgres. The agent image is what `choirctl agent build`
makes (`ensure_agent_image`: base image cached by its inputs, agent image per home). The test
inspects containers through its own docker SDK client, never through choird's code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.daemon.runtimes.bwrap import BWRAP_ENV
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.docker_support import require_docker
from tests.harness.chat import reply_to as chat  # noqa: F401  (the runtime tests' chat)
from tests.harness.daemons import running_daemon
from tests.harness.homes import external_postgres, make_home

BUILD_TIMEOUT_S = 600
"""The first build on a machine makes the base image (apt inside a container)."""


@dataclass(frozen=True)
class Choird:
    daemon: ChoirDaemon
    client: ChoirClient
    home: ChoirHome

    async def start(self, agent_id: str = "agent-1", **overrides: Any) -> dict[str, Any]:
        started = await self.client.agent_start(agent_id, {"dm": "console", **overrides})
        return started.model_dump(mode="json")


@pytest.fixture
def engine() -> Iterator[docker.DockerClient]:
    require_docker()
    client = docker.from_env()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params))


@pytest.fixture
async def choird(home: ChoirHome, engine: docker.DockerClient) -> AsyncIterator[Choird]:
    async with (
        running_daemon(home, runtime="docker") as daemon,
        await ChoirClient.connect(home, call_timeout=BUILD_TIMEOUT_S) as client,
    ):
        yield Choird(daemon, client, home)
    leftovers = containers_of(engine, home)
    for container in leftovers:
        container.remove(force=True)
    assert not leftovers, f"containers left behind: {[c.name for c in leftovers]}"


@pytest.fixture
async def daemon(home: ChoirHome, engine: docker.DockerClient) -> AsyncIterator[ChoirDaemon]:
    """choird in the test process on the process runtime, for a test that makes its own docker
    runtime on it (`tests.docker_support.runtime_on`); the containers made for the home are
    removed after."""
    async with running_daemon(home, runtime="process") as daemon:
        yield daemon
    for container in containers_of(engine, home):
        container.remove(force=True)


@pytest.fixture
async def process_choird(
    home: ChoirHome, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    """choird in the test process on the process runtime, unsandboxed (no bwrap needed)."""
    monkeypatch.setenv(BWRAP_ENV, "")
    async with (
        running_daemon(home, runtime="process") as daemon,
        await ChoirClient.connect(home) as client,
    ):
        yield daemon, client


def containers_of(engine: docker.DockerClient, home: ChoirHome) -> list[Any]:
    """Every container (running or not) choird made for `home`."""
    wanted: dict[str, str | list[str] | bool] = {"label": f"choir.home={home.root}"}
    return list(engine.containers.list(all=True, filters=wanted, ignore_removed=True))
