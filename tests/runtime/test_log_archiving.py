"""Logs that do not grow forever (§22.2, issue 19): an agent's log is archived when its process
exits, with `choirctl logs --follow` reading every line across the archive; choird's own log
takes a new `log_archive_threshold_lines` at `config apply`.

Real choird (in the test process for the agent case, a `choird` process for its own log), a
real choir-agent on the process runtime, and `choirctl` as an operator runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import signal
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.logs import archived_logs
from tests.ctl.cli import as_foreground
from tests.harness.chat import reply_to as chat
from tests.harness.daemons import poll_until
from tests.harness.homes import read_config, write_config
from tests.harness.processes import (
    BIN,
    environment,
    run_choirctl,
    spawn_choird,
    wait_until_ready,
)
from tests.runtime.conftest import Choird as DockerChoird

pytestmark = pytest.mark.slow


class Follower:
    """`choirctl logs <source>` (following) in a subprocess, its lines collected as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.notes: list[str] = []
        self._tasks = [
            asyncio.create_task(self._read(True)),
            asyncio.create_task(self._read(False)),
        ]

    @classmethod
    async def start(cls, home: ChoirHome, source: str) -> Follower:
        process = await asyncio.create_subprocess_exec(
            str(BIN / "choirctl"),
            "logs",
            source,
            env=environment(CHOIR_HOME=str(home.root)),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=as_foreground,  # SIGINT stops it even in a suite started in the background
        )
        return cls(process)

    async def _read(self, out: bool) -> None:
        stream = self.process.stdout if out else self.process.stderr
        assert stream is not None
        while line := await stream.readline():
            (self.lines if out else self.notes).append(line.decode().rstrip("\n"))

    async def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(self.process.wait(), 20)
        finally:
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
            await asyncio.gather(*self._tasks, return_exceptions=True)


def archive_lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


async def test_an_agent_log_is_archived_at_exit_and_a_follower_misses_no_line(
    process_choird: tuple[ChoirDaemon, ChoirClient],
) -> None:
    """The process runtime: choir-agent writes its log through its own stderr."""
    daemon, client = process_choird
    await archived_and_followed(daemon.home, client)


async def test_a_container_log_is_archived_at_exit_and_a_follower_misses_no_line(
    choird: DockerChoird,
) -> None:
    """The docker runtime: choird copies the container's output into the log."""
    await archived_and_followed(choird.home, choird.client)


async def archived_and_followed(home: ChoirHome, client: ChoirClient) -> None:
    """Two sessions of agent-1, followed throughout: each archived at its exit, every line read
    once and in order, the snapshot between them the last session's log."""
    active = home.agent_log("agent-1")
    await client.agent_start("agent-1", {"dm": "console"})
    await poll_until(lambda: active.is_file() and active.stat().st_size > 0, within=30)
    follower = await Follower.start(home, "agent-1")
    try:
        await poll_until(lambda: len(follower.lines) > 0, within=30)
        await client.agent_stop("agent-1")  # the agent logs its stop until its very exit
        await poll_until(lambda: len(archived_logs(home, "agent-1")) == 1, within=30)
        first = archive_lines(archived_logs(home, "agent-1")[0])
        await poll_until(lambda: len(follower.lines) >= len(first), within=30)
        assert follower.lines == first  # every line, once, in order
        assert not active.exists()
        assert oct(archived_logs(home, "agent-1")[0].stat().st_mode & 0o777) == "0o600"
        snapshot = await asyncio.to_thread(run_choirctl, home, "logs", "agent-1", "--no-follow")
        # no agent writes a log now: the snapshot is the last session's, from its archive
        assert (snapshot.returncode, snapshot.stdout.splitlines()) == (0, first)

        # the next session writes a fresh log; the follower moves on to it
        await client.agent_start("agent-1", {"dm": "console"})
        await poll_until(lambda: len(follower.lines) > len(first), within=30)
        await client.agent_stop("agent-1")
        await poll_until(lambda: len(archived_logs(home, "agent-1")) == 2, within=30)
        second = archive_lines(archived_logs(home, "agent-1")[1])
        await poll_until(lambda: len(follower.lines) >= len(first) + len(second), within=30)
        assert follower.lines == first + second
        assert follower.notes == ["-- the log was archived; following the new file --"]
    finally:
        await follower.stop()


async def test_choird_takes_a_new_archive_threshold_at_config_apply(home: ChoirHome) -> None:
    """Before: the threshold choird started with held until a restart, while `config diff`
    called the change hot-reload."""
    choird = spawn_choird(home, "--quiet")
    try:
        await asyncio.to_thread(wait_until_ready, choird)
        assert archived_logs(home, "choird") == []
        data = read_config(home)
        data["log_archive_threshold_lines"] = 5
        write_config(home, data)
        loaded = await asyncio.to_thread(run_choirctl, home, "config", "load")
        assert "log_archive_threshold_lines  [hot-reload]" in loaded.stdout, loaded.stderr
        follower = await Follower.start(home, "choird")
        try:
            # it has opened the log once it prints: an archive before that would be missed
            await poll_until(lambda: bool(follower.lines), within=30)
            applied = await asyncio.to_thread(run_choirctl, home, "config", "apply")
            assert applied.returncode == 0, applied.stderr
            for _ in range(4):  # each load logs a line or more
                await asyncio.to_thread(run_choirctl, home, "config", "load")
            await poll_until(lambda: len(archived_logs(home, "choird")) >= 1, within=30)
            await poll_until(lambda: bool(follower.notes), within=30)
        finally:
            await follower.stop()
        archived = [line for path in archived_logs(home, "choird") for line in archive_lines(path)]
        active = home.choird_log.read_text().splitlines()
        assert len(active) <= 5
        # the follower started before the first archive: it read everything, in order, up to
        # where it stopped (choird may log on after that)
        everything, seen = archived + active, follower.lines
        assert len(seen) > 5
        assert everything[: len(seen)] == seen
    finally:
        choird.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(choird.process.wait, 30)
        finally:
            if choird.process.poll() is None:
                os.kill(choird.process.pid, signal.SIGKILL)


@pytest.fixture
def small_threshold(home: ChoirHome) -> int:
    """A threshold an agent passes within its first few messages."""
    data = read_config(home)
    data["log_archive_threshold_lines"] = 4
    write_config(home, data)
    return 4


async def test_a_running_agents_log_is_archived_past_the_threshold_with_no_line_lost(
    small_threshold: int, process_choird: tuple[ChoirDaemon, ChoirClient]
) -> None:
    """Before: an agent's log was archived only at its process's exit, however long it ran.
    The process runtime's agent writes the file through its own stderr the whole time."""
    daemon, client = process_choird
    home = daemon.home
    assert daemon.runtime is not None
    follower = await Follower.start(home, "agent-1")  # before the log exists: it reads all
    try:
        await asyncio.sleep(1)  # following (a look every 500 ms at most)
        await client.agent_start("agent-1", {"dm": "console"})
        assert daemon.runtime.running("agent-1") is not None
        lines = await exchanged_until_archived(daemon, client)
        await poll_until(lambda: follower.lines[-1:] == lines[-1:], within=30)
    finally:
        await follower.stop()
    # `choirctl logs` read on across each in-place archive: every line, once, in order
    assert follower.lines == lines
    assert "-- the log was archived; following the new file --" in follower.notes


async def exchanged_until_archived(daemon: ChoirDaemon, client: ChoirClient) -> list[str]:
    """Chat until agent-1's log is archived while it runs, then stop it; every line logged."""
    home, runtime = daemon.home, daemon.runtime
    assert runtime is not None
    running = runtime.running("agent-1")
    for n in range(20):  # each exchange logs lines in the agent
        await chat(client, f"hello {n}")
        if archived_logs(home, "agent-1"):
            break
    await poll_until(lambda: len(archived_logs(home, "agent-1")) >= 1, within=30)
    assert runtime.running("agent-1") == running  # the same process, still running
    await chat(client, "still there?")  # it goes on logging into the emptied file
    while_running = [
        line for path in archived_logs(home, "agent-1") for line in archive_lines(path)
    ]
    await client.agent_stop("agent-1")
    await poll_until(lambda: not runtime.running("agent-1"), within=30)
    await poll_until(lambda: not home.agent_log("agent-1").exists(), within=30)
    archives = archived_logs(home, "agent-1")
    assert len(archives) >= 2  # the live one(s), then the exit's
    lines = [line for path in archives for line in archive_lines(path)]
    assert lines[: len(while_running)] == while_running
    records = [json.loads(line) for line in lines]  # whole JSON lines: none torn
    assert len(set(lines)) == len(lines)  # none doubled across an archive's boundary
    stamps = [record["timestamp"] for record in records]
    assert stamps == sorted(stamps)  # in the order written
    assert records[0]["message"] == "session started"  # the session's first line was kept
    assert records[-1]["message"] == "terminated"  # and its last
    return lines
