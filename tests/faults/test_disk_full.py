"""A full disk under `$CHOIR_HOME` (issue 12 point 6 and point 9's torn log line).

Each scenario mounts a small tmpfs, fills it to the last byte, and checks what choir does: a log
record is written whole or not at all, the failure is reported as a full disk, and everything
comes back when space is freed. Bounded: the file systems are a few hundred KiB.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

from choir.client import ChoirClient
from choir.errors import UnavailableError
from choir.home import ChoirHome
from choir.logs import get_logger, setup_logging, shutdown_logging
from choir.scripted import ReplyStep, Script, ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.faults.filesystems import fill, small_tmpfs
from tests.faults.invariants import InvariantChecker
from tests.faults.support import (
    as_json,
    assert_chain,
    choirctl,
    embedded_params,
    next_health,
    spawn_choird,
    stored_events,
    teardown,
)
from tests.harness.chat import answer_to
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import external_postgres, make_home, read_config, short_root, write_config


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "full", 256) as mountpoint:
        yield mountpoint


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    shutdown_logging()
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


def parsed_lines(path: Path) -> list[dict[str, object]]:
    """Every line of `path` as JSON: fails on a torn line."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line]


def test_a_log_record_is_written_whole_or_not_at_all_on_a_full_disk(tmpfs: Path) -> None:
    home = ChoirHome(tmpfs / "home")
    handler = setup_logging(home, "choird")
    errors: list[OSError | None] = []
    handler.on_write_error = lambda _path, error: errors.append(error)
    log = get_logger("choird.test")
    log.info("before the disk fills")
    filler = fill(tmpfs)

    log.info("a long record", fields={"blob": "x" * 6000})  # larger than the page left
    log.info("another one", fields={"blob": "y" * 6000})

    lines = parsed_lines(home.choird_log)  # no torn line: every line parses
    assert [line["message"] for line in lines] == ["before the disk fills"]
    assert handler.dropped == 2
    assert [e.errno for e in errors if e is not None] == [errno.ENOSPC, errno.ENOSPC]

    filler.unlink()
    log.info("after space was freed")
    messages = [line["message"] for line in parsed_lines(home.choird_log)]
    assert messages == [
        "before the disk fills",
        "2 log record(s) were lost: the disk was full or failing",
        "after space was freed",
    ]
    assert errors[-1] is None  # told that writing works again
    assert handler.lines == 3


def test_a_warning_logged_while_the_disk_is_full_is_written_once_there_is_room(
    tmpfs: Path,
) -> None:
    """choird's "disk unhealthy" is logged exactly while its log cannot be written: the
    operator must still find it in the log afterwards, at the time it was logged."""
    home = ChoirHome(tmpfs / "home")
    handler = setup_logging(home, "choird")
    log = get_logger("choird.test")
    log.info("before the disk fills")
    filler = fill(tmpfs)
    padding = 0
    while not handler.dropped:  # the page the log ends in may hold a few short lines: use it up
        log.info("p")
        padding += 1
    log.warning("disk unhealthy", fields={"state": "full", "reason": "no space left"})
    log.info("an info record while full", fields={"blob": "y" * 6000})
    messages = [line["message"] for line in parsed_lines(home.choird_log)]
    assert messages == ["before the disk fills"] + ["p"] * (padding - 1)  # nor the warning

    filler.unlink()
    log.info("after space was freed")
    lines = parsed_lines(home.choird_log)[padding:]
    assert [line["message"] for line in lines] == [
        "2 log record(s) were lost: the disk was full or failing",
        "1 warning(s) could not be written when logged, the disk was full or failing: they "
        "follow, each with the time it was logged",
        "disk unhealthy",
        "after space was freed",
    ]
    warning = lines[2]
    assert (warning["level"], warning["state"]) == ("WARNING", "full")
    assert str(warning["timestamp"]) <= str(lines[3]["timestamp"])  # its own time, not later
    assert handler.lines == padding + 4


# -- a full disk under a running choird and agent --------------------------------------------

SETTINGS: dict[str, Any] = {"heartbeat_interval_ms": 1000, "crash_detection_threshold_ms": 3000}
"""A short lease, so the old blame (a "crashed" agent) would come within seconds."""
FULL_FOR_S = 8.0
"""How long the disk stays full: well past the lease."""


SLOW_REPLY = secrets.token_urlsafe(22_000)
"""Incompressible 30 kB: storing it needs new pages, which a full disk lacks."""
SCRIPT = Script(
    description="a reply that comes once the disk is full; quick answers otherwise",
    steps=[
        ReplyStep(match="the slow one", delay_ms=3_000, text=SLOW_REPLY),
        ReplyStep(match="hello", repeat=True, text="Hello."),
    ],
)


async def test_a_full_disk_is_reported_as_such_and_the_agent_survives_it() -> None:
    with short_root("df-") as root, small_tmpfs(root / "disk", 160 * 1024) as disk:
        async with ScriptedModelServer(SCRIPT) as model:
            home = make_home(disk, **SETTINGS)
            data = read_config(home)
            data["models"]["demo"] = {"provider": "scripted", "model": "df", "endpoint": model.url}
            write_config(home, data)
            choird = None
            try:
                choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
                await full_disk_scenario(home, model)
            finally:
                await asyncio.to_thread(teardown, home, choird)


async def ctl(home: ChoirHome, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(choirctl, home, *args)


async def full_disk_scenario(home: ChoirHome, model: ScriptedModelServer) -> None:
    started = as_json(await ctl(home, "agent", "start", "agent-1", "--dm", "console", "--json"))
    session_id, pid = started["session_id"], started["pid"]
    assert (await ctl(home, "chat", "agent-1", "hello")).returncode == 0
    checker = InvariantChecker(await asyncio.to_thread(embedded_params, home), ["agent-1"])
    await checker.observe()
    async with await ChoirClient.connect(home, call_timeout=30) as client:
        feed = client.stream("subscribe")
        assert (await anext(feed))["kind"] == "subscribed"
        # accepted while there is room; its reply comes (and must be stored) once the disk is full
        slow = await client.chat_send("agent-1", "the slow one")
        await poll_until(lambda: asked(model, "the slow one"), within=15)
        filler = await asyncio.to_thread(fill, home.root.parent)
        checker.fault(f"the disk under {home.root} is full")
        filled_at = time.monotonic()
        # Incompressible 30 kB messages. A message is durable before it is accepted: one that
        # cannot be stored is refused, saying why; one that found room is answered later.
        sent, refusals = [], []
        for n in range(3):
            try:
                text = f"hello {n} {secrets.token_urlsafe(22_000)}"
                sent.append(await client.chat_send("agent-1", text))
            except UnavailableError as refused:
                refusals.append(refused.message)
        assert all("disk is full" in message for message in refusals)

        view = await next_health(feed, lambda view: view["disk"] is not None, within=45)
        assert view["disk"]["state"] == "full"

        async def disk_report() -> str | None:
            status = as_json(await ctl(home, "status", "--json"))
            return str(status["disk"]["reason"]) if status["disk"]["state"] == "full" else None

        await checker.reported(disk_report)  # within 5 s, naming the fix (free space)
        status = as_json(await ctl(home, "status", "--json"))
        assert str(home.root.parent) in status["disk"]["reason"] + str(status["disk"]["where"])
        await asyncio.sleep(max(0.0, FULL_FOR_S - (time.monotonic() - filled_at)))
        assert psutil.pid_exists(pid)  # alive, long past its 3 s lease
        row = as_json(await ctl(home, "agent", "status", "agent-1", "--json"))
        assert (row["state"], row["session_id"]) == ("running", session_id)

        await asyncio.to_thread(filler.unlink)
        checker.fault(f"space freed under {home.root}")

        async def disk_ok() -> bool:
            return bool(as_json(await ctl(home, "status", "--json"))["disk"]["state"] == "ok")

        await checker.healthy(disk_ok)  # within 10 s, nobody doing anything
        await next_health(feed, lambda view: view["disk"] is None, within=45)
        assert (await answer_to(client, slow, within=45))["text"] == SLOW_REPLY  # kept, then stored
        for message in sent:
            await answer_to(client, message, within=45)  # every buffered reply reaches the user
        await feed.aclose()

    verdict = await checker.verify()
    assert verdict.open_intents == []
    records = await asyncio.to_thread(stored_events, home, session_id)
    assert_chain(records)
    assert sum(r.event_type == "user_msg" for r in records) == 2 + len(sent)  # and no other
    status = as_json(await ctl(home, "status", "--json"))
    assert status["disk"]["state"] == "ok"
    row = as_json(await ctl(home, "agent", "status", "agent-1", "--json"))
    assert (row["state"], row["session_id"], row["pid"]) == ("running", session_id, pid)
    for log in (home.choird_log, home.agent_log("agent-1")):
        parsed_lines(log)  # no line was torn
    choird_log = home.choird_log.read_text()
    assert "disk unhealthy" in choird_log
    assert "could not extend file" in choird_log  # Postgres refused the heartbeats' writes
    # ...and the agent heard "unavailable, retry", kept its events and sent them again.
    assert "disk is full or failing; nothing was stored" in home.agent_log("agent-1").read_text()


async def asked(model: ScriptedModelServer, text: str) -> bool:
    return any(text in str(request.body) for request in model.requests)


async def test_an_agent_socket_that_cannot_be_created_is_a_disk_problem(
    pg_params: ConnectParams,
) -> None:
    with short_root("ds-") as root:
        home = make_home(root, postgres=external_postgres(pg_params))
        async with running_daemon(home) as daemon:
            with small_tmpfs(home.agent_socks, 64, inodes=8):  # no inode left for a socket
                await asyncio.to_thread(fill_inodes, home.agent_socks)
                with pytest.raises(UnavailableError) as refused:
                    await daemon.open_agent_socket("agent-1")
                problem = daemon.health.problem("disk")
            assert "agent-1's socket" in refused.value.message
            assert "full or failing" in refused.value.message
            assert problem is not None
            assert problem.state == "full"
            assert problem.where == str(home.agent_socket("agent-1"))
            assert await daemon.open_agent_socket("agent-1")  # room again: it works


def fill_inodes(directory: Path) -> None:
    for n in range(1000):
        try:
            (directory / f"f{n}").touch()
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
            return
    raise AssertionError("the file system never ran out of inodes")
