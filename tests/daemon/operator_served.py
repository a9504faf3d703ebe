"""choird's operator socket for tests: a real `UdsServer` serving `OperatorApi` in a short home.

Unix socket paths are limited to 107 bytes, so the home lives in a short directory under /tmp
instead of pytest's tmp_path. Pushes to agents are recorded as the JSON the hub would carry.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.config import load_home
from choir.daemon.agents.services import AgentServices
from choir.daemon.operator.api import OperatorApi
from choir.daemon.staging.stage import ConfigStage
from choir.home import ChoirHome
from choir.protocol import WireModel
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Pool, open_pool
from choir.store.postgres.target import ConnectParams
from choir.transport import UdsServer

from .conftest import Clock, daemon_home


@contextmanager
def short_home() -> Iterator[ChoirHome]:
    """The daemon tests' home (agent-1, agent-2, every resource kind) under a short /tmp path."""
    root = Path(tempfile.mkdtemp(prefix="co-", dir="/tmp"))
    try:
        home = daemon_home(root, "h")
        yield home
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Pushes:
    """The push callable handed to OperatorApi: records (session id, push JSON)."""

    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, session_id: str, push: WireModel) -> None:
        self.sent.append((session_id, push.model_dump(mode="json")))

    def kinds(self, session_id: str) -> list[str]:
        return [push["kind"] for sid, push in self.sent if sid == session_id]


@asynccontextmanager
async def serve_operator(
    home: ChoirHome, services: AgentServices, pool: Pool, pushes: Pushes, clock: Clock
) -> AsyncIterator[OperatorApi]:
    """OperatorApi listening on `home.operator_socket` until the block ends."""
    api = OperatorApi(services, pool, push=pushes, clock=clock)
    try:
        async with UdsServer(home.operator_socket, api, owner="choird"):
            yield api
    finally:
        api.close()


@pytest.fixture(name="home")
def served_home() -> Iterator[ChoirHome]:
    """Replaces the daemon conftest's home with one whose socket path is short enough."""
    with short_home() as home:
        yield home


@pytest.fixture(name="pushes")
def served_pushes() -> Pushes:
    return Pushes()


@pytest.fixture(name="api")
async def served_api(
    home: ChoirHome, services: AgentServices, pool: Pool, pushes: Pushes, clock: Clock
) -> AsyncIterator[OperatorApi]:
    async with serve_operator(home, services, pool, pushes, clock) as api:
        yield api


@pytest.fixture(name="choird")
async def served_choird(api: OperatorApi, home: ChoirHome) -> AsyncIterator[ChoirClient]:
    """A client connected to the served operator socket."""
    async with await ChoirClient.connect(home) as client:
        yield client


@dataclass(frozen=True)
class Operator:
    """Everything behind a served operator socket, for tests outside tests/daemon."""

    home: ChoirHome
    services: AgentServices
    pool: Pool
    pushes: Pushes
    clock: Clock
    api: OperatorApi


@pytest.fixture(name="operator")
async def served_operator(pg_params: ConnectParams) -> AsyncIterator[Operator]:
    """A served operator socket over a fresh database, built without tests/daemon's conftest."""
    clock, pushes = Clock(), Pushes()
    with short_home() as home:
        async with open_pool(pg_params, min_size=1, max_size=4) as pool:
            async with pool.acquire() as conn:
                await apply_control_schema(conn)
            services = AgentServices.build(pool, ConfigStage(load_home(home)), clock=clock)
            async with serve_operator(home, services, pool, pushes, clock) as api:
                yield Operator(home, services, pool, pushes, clock, api)
