"""choird's early start (`choir.daemon.prestart`): the home locked and its embedded Postgres
starting before choird imports the rest of itself. The daemon serves on that server and lets
both go when it stops; a start that fails after it (a config failing its check) leaves no
server running."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from choir.daemon.app import ChoirDaemon, DaemonOptions
from choir.daemon.prestart import start_early, wants_embedded
from choir.errors import ChoirError, ConflictError
from choir.store.postgres.embedded import EmbeddedPostgres
from tests.harness.homes import make_home, read_config, write_config
from tests.harness.waits import poll_until


@pytest.mark.parametrize(
    ("config", "wanted"),
    [
        ({}, True),
        ({"postgres": {"embedded": True}}, True),
        ({"postgres": {}}, True),
        ({"postgres": {"host": "db.example"}}, False),
        ({"postgres": {"embedded": False, "host": "db.example"}}, False),
        ({"postgres": {"embedded": False}}, False),
        ({"postgres": {"embedded": "yes"}}, False),
        ({"postgres": "embedded"}, False),
    ],
)
def test_config_json_says_whether_the_embedded_server_starts_early(
    config: dict[str, Any], wanted: bool
) -> None:
    """The check's own rule (no `host` means embedded); anything it would reject starts
    nothing early — the check then says what is wrong."""
    assert wants_embedded(config) is wanted


@pytest.mark.slow
async def test_the_daemon_serves_on_the_server_started_early_and_stops_it(root: Path) -> None:
    home = make_home(root)
    early = start_early(home, read_config(home))
    try:
        assert early.postgres is not None
        with pytest.raises(ConflictError, match="choird is already running"):
            start_early(home, {})  # the home is locked from the start
        async with ChoirDaemon(DaemonOptions(home, runtime="process"), early=early) as daemon:
            assert daemon.database is not None
            assert daemon.database.embedded is early.postgres
            assert early.postgres.alive()
        assert not early.postgres.alive()
        assert not (home.pgdata / "postmaster.pid").exists()
    finally:
        early.close()
    start_early(home, {"postgres": {"host": "db.example"}}).close()  # the lock was let go


@pytest.mark.slow
async def test_a_config_failing_its_check_stops_the_server_started_early(root: Path) -> None:
    home = make_home(root)
    async with EmbeddedPostgres(home.pgdata):
        pass  # the cluster exists: the early start is a start, not a seconds-long initdb
    data = read_config(home)
    data["bogus"] = True
    write_config(home, data)
    early = start_early(home, data)
    try:
        assert early.postgres is not None
        with pytest.raises(ChoirError, match="bogus"):
            async with ChoirDaemon(DaemonOptions(home, runtime="process"), early=early):
                pass
        # the check may fail before the server is up: it must be down once its start is over
        await poll_until(lambda: not _starting(), within=30)
        assert not early.postgres.alive()
        assert not (home.pgdata / "postmaster.pid").exists()
    finally:
        early.close()


def _starting() -> bool:
    return any(thread.name == "postgres-start" for thread in threading.enumerate())
