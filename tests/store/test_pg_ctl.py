"""`pg_ctl.run`: a command to its end, or until what it started is up, never longer than asked."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from choir.store.postgres import pg_ctl
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.postmaster import PIDFILE, is_ready, read_pidfile

ENV = {"PATH": os.environ["PATH"]}


def _zombie_children() -> list[psutil.Process]:
    return [
        child for child in psutil.Process().children() if child.status() == psutil.STATUS_ZOMBIE
    ]


def test_a_failing_command_raises_with_what_it_said() -> None:
    with pytest.raises(subprocess.CalledProcessError) as caught:
        pg_ctl.run(["sh", "-c", "echo no such cluster >&2; exit 3"], env=ENV, timeout_s=10)

    assert caught.value.returncode == 3
    assert caught.value.stderr == "no such cluster\n"


def test_it_returns_once_done_when_says_so_and_the_command_is_reaped_later(
    scratch_dir: Path,
) -> None:
    up = scratch_dir / "up"
    command = ["sh", "-c", f"touch {up}; sleep 0.5"]

    began = time.monotonic()
    pg_ctl.run(command, env=ENV, timeout_s=10, done_when=up.exists)
    returned_after = time.monotonic() - began

    assert returned_after < 0.4
    time.sleep(0.8)
    assert _zombie_children() == []


def test_a_command_that_outlives_its_timeout_is_killed(scratch_dir: Path) -> None:
    pidfile = scratch_dir / "pid"

    with pytest.raises(subprocess.TimeoutExpired) as caught:
        pg_ctl.run(
            ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"],
            env=ENV,
            timeout_s=0.3,
            done_when=lambda: False,
        )

    assert caught.value.timeout == 0.3  # what the error says it waited
    assert not psutil.pid_exists(int(pidfile.read_text()))


def test_the_embedded_server_is_ready_once_its_start_returns(scratch_dir: Path) -> None:
    server = EmbeddedPostgres(scratch_dir / "pgdata")
    server.start()  # the first start creates the cluster
    server.stop()
    try:
        server.start()
        recorded = read_pidfile(server.datadir)

        assert recorded is not None
        assert recorded.status == "ready"
        assert is_ready(server.datadir)
    finally:
        server.stop()
    assert not (server.datadir / PIDFILE).exists()
    assert not is_ready(server.datadir)
