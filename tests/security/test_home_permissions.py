"""Starting choird never widens a permission the operator set (issue 11 point 5).

As root, pgserver's own start-up adds g+rx,o+rx to every parent of the data directory and of
its binaries, so a 0700 HOME and `$CHOIR_HOME` became 0755. choird now starts the embedded
server without touching them (`choir.store.postgres.embedded_root`). The test makes a HOME-like 0700
directory holding a 0700 `$CHOIR_HOME`, runs choird on it with its embedded Postgres, and
compares the mode of every parent before and after — including a restart of the server.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from pgserver._commands import POSTGRES_BIN_PATH

from choir.client import ChoirClient
from tests.harness.daemons import running_daemon
from tests.harness.homes import make_home, short_root

pytestmark = pytest.mark.slow


def modes(paths: list[Path]) -> dict[Path, int]:
    return {path: stat.S_IMODE(path.stat().st_mode) for path in paths}


def parents_of(*paths: Path) -> list[Path]:
    return sorted({parent for path in paths for parent in [path, *path.parents]})


async def test_choird_as_root_leaves_home_and_every_parent_as_the_operator_set_them() -> None:
    if os.geteuid() != 0:
        pytest.skip("the widening happened only when choird runs as root")
    with short_root("hp-") as operator_home:
        operator_home.chmod(0o700)  # like /root
        home = make_home(operator_home)
        home.root.chmod(0o700)  # the operator closed $CHOIR_HOME too
        watched = parents_of(home.pgdata.parent, POSTGRES_BIN_PATH)
        before = modes(watched)

        async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
            assert (await client.status()).postgres.state == "ok"
            assert daemon.database is not None
            server = daemon.database.embedded
            assert server is not None
            await asyncio.to_thread(server.stop)  # a restart starts it again
            await asyncio.to_thread(server.start)
            after = modes(watched)

        assert after == before
        assert stat.S_IMODE(operator_home.stat().st_mode) == 0o700
        assert stat.S_IMODE(home.root.stat().st_mode) == 0o700
        assert stat.S_IMODE(home.pgdata.stat().st_mode) == 0o700
