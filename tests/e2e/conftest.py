"""End-to-end fixtures: a real choird per test over the test session's Postgres.

The daemon's config points at the session's embedded server as an *external* Postgres (one
fresh database per test), so a test pays for creating a database rather than for starting a
second server. Tests about choird's own embedded server make their own home.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import TRANSPORTS, Transport, running_daemon
from tests.harness.homes import external_postgres, make_home, short_root


@pytest.fixture
def home(pg_params: ConnectParams) -> Iterator[ChoirHome]:
    """`choirctl init`'s home (plus agent-2) using the test's database."""
    with short_root() as root:
        yield make_home(root, postgres=external_postgres(pg_params))


@pytest.fixture
async def daemon(home: ChoirHome) -> AsyncIterator[ChoirDaemon]:
    async with running_daemon(home) as daemon:
        yield daemon


@pytest.fixture
async def operator(daemon: ChoirDaemon) -> AsyncIterator[ChoirClient]:
    """choirctl's client, connected to the daemon's operator socket."""
    async with await ChoirClient.connect(daemon.home) as client:
        yield client


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> Transport:
    """Each agent test runs over the agent's Unix socket and over HTTPS."""
    value: Transport = request.param
    return value
