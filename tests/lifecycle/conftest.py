"""Fixtures of the lifecycle tests: a short home on the test's database and choird serving it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.harness.cluster import serving
from tests.harness.homes import external_postgres, make_home, read_config, write_config

Choird = tuple[ChoirDaemon, ChoirClient]


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    """`choirctl init`'s home with agent-2 (its own workspace and DM), and a second demo model
    for `model set`."""
    home = make_home(root, postgres=external_postgres(pg_params))
    data = read_config(home)
    data["models"]["demo-2"] = {**data["models"]["demo"], "model": "choir-demo-2"}
    write_config(home, data)
    (root / "ws-other").mkdir(exist_ok=True)
    return home


@pytest.fixture
async def choird(home: ChoirHome) -> AsyncIterator[Choird]:
    """choird on the process runtime, and a client of its operator socket (no call timeout:
    a graceful stop takes a moment)."""
    async with serving(home) as (daemon, client):
        yield daemon, client
