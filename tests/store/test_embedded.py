from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import psutil
import pytest

from choir.errors import UnavailableError
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import connect_plain
from choir.store.postgres.postmaster import PIDFILE, clear_stale_pidfile, postmaster_pid
from choir.store.postgres.settings import SETTINGS


async def _write_marker(server: EmbeddedPostgres, value: str) -> None:
    conn = await connect_plain(server.params)
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS marker (value text)")
        await conn.execute("INSERT INTO marker VALUES ($1)", value)
    finally:
        await conn.close()


async def _markers(server: EmbeddedPostgres) -> list[str]:
    conn = await connect_plain(server.params)
    try:
        return [row["value"] for row in await conn.fetch("SELECT value FROM marker")]
    finally:
        await conn.close()


async def _until_dead(pid: int) -> None:
    """Wait (bounded) until `pid` has exited; a zombie nobody reaps counts as exited."""
    for _ in range(100):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"pid {pid} still running")


async def test_data_survives_a_stop_and_start(scratch_dir: Path) -> None:
    async with EmbeddedPostgres(scratch_dir / "pgdata") as server:
        await _write_marker(server, "before restart")
    assert not (scratch_dir / "pgdata" / PIDFILE).exists()

    async with EmbeddedPostgres(scratch_dir / "pgdata") as server:
        assert await _markers(server) == ["before restart"]


async def test_a_pidfile_naming_an_unrelated_live_process_is_cleared(scratch_dir: Path) -> None:
    datadir = scratch_dir / "pgdata"
    async with EmbeddedPostgres(datadir) as server:
        await _write_marker(server, "kept")
        pidfile_lines = (datadir / PIDFILE).read_text().splitlines()
    # As after a reboot: the old pid now belongs to some other process (this one).
    (datadir / PIDFILE).write_text("\n".join([str(os.getpid()), *pidfile_lines[1:]]) + "\n")

    async with EmbeddedPostgres(datadir) as server:
        assert await _markers(server) == ["kept"]
        assert postmaster_pid(datadir) != os.getpid()


async def test_a_killed_server_is_replaced_on_the_next_start(scratch_dir: Path) -> None:
    datadir = scratch_dir / "pgdata"
    async with EmbeddedPostgres(datadir, stop_on_exit=False) as server:
        await _write_marker(server, "committed")
        killed = postmaster_pid(datadir)
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    await _until_dead(killed)

    async with EmbeddedPostgres(datadir) as server:
        assert await _markers(server) == ["committed"]
        assert postmaster_pid(datadir) != killed


async def test_a_running_server_is_adopted_not_restarted(scratch_dir: Path) -> None:
    datadir = scratch_dir / "pgdata"
    async with EmbeddedPostgres(datadir, stop_on_exit=False):
        first = postmaster_pid(datadir)
    async with EmbeddedPostgres(datadir):
        assert postmaster_pid(datadir) == first


def test_the_pidfile_of_a_live_postmaster_is_kept(pg_server: EmbeddedPostgres) -> None:
    assert clear_stale_pidfile(pg_server.datadir) is False
    assert (pg_server.datadir / PIDFILE).exists()


def test_no_pidfile_means_nothing_to_clear(scratch_dir: Path) -> None:
    assert clear_stale_pidfile(scratch_dir) is False


async def test_an_unusable_data_directory_is_a_one_line_error(scratch_dir: Path) -> None:
    datadir = scratch_dir / "pgdata"
    datadir.mkdir(mode=0o700)
    (datadir / "PG_VERSION").write_text("9.9\n")

    with pytest.raises(UnavailableError) as caught:
        async with EmbeddedPostgres(datadir):
            pass

    message = str(caught.value)
    assert message.startswith(f"cannot start embedded Postgres in {datadir}: ")
    assert message.endswith(f"; see {datadir / 'log'}")
    assert "\n" not in message


def test_params_before_start_say_the_server_is_not_started(scratch_dir: Path) -> None:
    with pytest.raises(RuntimeError, match="is not started"):
        _ = EmbeddedPostgres(scratch_dir).params


@pytest.mark.parametrize("start", ["first", "restart"])
async def test_the_server_runs_with_choirs_small_host_settings(
    scratch_dir: Path, start: str
) -> None:
    """From the first start of a new cluster on: a new home's quickstart is as small as later
    runs (before, `initdb`'s cluster ran its first start on PostgreSQL's 128 MB defaults)."""
    datadir = scratch_dir / "pgdata"
    if start == "restart":
        async with EmbeddedPostgres(datadir):
            pass

    async with EmbeddedPostgres(datadir) as server:
        conn = await connect_plain(server.params)
        try:
            shown = {name: await conn.fetchval(f"SHOW {name}") for name in SETTINGS}
            launcher = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE backend_type = 'logical replication launcher'"
            )
        finally:
            await conn.close()
        assert shown == SETTINGS
        assert launcher == 0


async def test_concurrent_starts_of_one_server_launch_one_postmaster(scratch_dir: Path) -> None:
    """choird's supervisor restarting a stopped server races whoever else starts it (an
    operator's restart, a test): the second start adopts the first's postmaster instead of
    launching a rival that dies on the lock file."""
    datadir = scratch_dir / "pgdata"
    async with EmbeddedPostgres(datadir):
        pass  # the cluster exists, the server stopped
    server = EmbeddedPostgres(datadir)
    try:
        first, second = await asyncio.gather(
            asyncio.to_thread(server.start), asyncio.to_thread(server.start)
        )
        assert first == second
        assert server.alive()
        postmasters = [
            p.pid
            for p in psutil.process_iter(["name", "cmdline", "status"])
            if p.info["name"] == "postgres"
            and p.info["status"] != psutil.STATUS_ZOMBIE
            and any(str(datadir) in part for part in p.info["cmdline"] or [])
        ]
        assert postmasters == [server.pid]
    finally:
        server.stop()
