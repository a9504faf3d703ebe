"""The disk under `$CHOIR_HOME/logs` fails under a running choird and agent (issue 12, "Fault
suites").

Not a full disk but an I/O error: `$CHOIR_HOME/logs` is an ext4 file system on a loop device
mounted `errors=remount-ro`, and the test has the kernel record an error in it — from then on
it is read-only (EROFS) for every writer, the files choird and the agent hold open included,
exactly as after a failing disk. (A plain `mount -o remount,ro` is refused while files are open
for writing.) choird must report it as what it is: `status` and the operator feed name the logs
directory, a read-only file system and the fix; it must keep the agent running well past its
lease (a short one here, so blaming the agent would show) and go on answering chat. The repair
is the operator's: the broken file system is unmounted and a new one mounted in its place. choird
then logs into the new one by itself — its first line says how many were lost, none is torn — and
clears the problem within seconds. (The agent's own log is its stderr, opened at its start: it
stays on the dead file system until the agent restarts.) choird runs as a process on the test
session's Postgres.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.faults.filesystems import FailingExt4, failing_ext4
from tests.faults.invariants import InvariantChecker
from tests.faults.support import as_json, choirctl, next_health, spawn_choird, teardown
from tests.harness.homes import external_postgres, make_home, read_config, short_root, write_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

SETTINGS: dict[str, Any] = {"heartbeat_interval_ms": 1000, "crash_detection_threshold_ms": 3000}
BROKEN_FOR_S = 6.0
"""Well past the 3 s lease."""
SCRIPT = Script(steps=[ReplyStep(match="hello", repeat=True, text="Hello.")])


async def test_a_failed_logs_disk_is_reported_as_such_and_nobody_is_blamed(
    pg_params: ConnectParams, scratch_dir: Path
) -> None:
    with short_root("lr-") as root:
        async with ScriptedModelServer(SCRIPT) as model:
            home = make_home(root, postgres=external_postgres(pg_params), **SETTINGS)
            data = read_config(home)
            data["models"]["demo"] = {"provider": "scripted", "model": "lr", "endpoint": model.url}
            write_config(home, data)
            with failing_ext4(home.logs, scratch_dir) as disk:
                home.logs.chmod(0o700)
                choird = None
                try:
                    choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
                    await scenario(home, disk, InvariantChecker(pg_params, ["agent-1"]))
                finally:
                    await asyncio.to_thread(teardown, home, choird)
                    await asyncio.to_thread(unmount, home.logs)  # the replacement, if mounted


async def ctl(home: ChoirHome, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(choirctl, home, *args)


async def scenario(home: ChoirHome, disk: FailingExt4, checker: InvariantChecker) -> None:
    logs = disk.mountpoint
    started = as_json(await ctl(home, "agent", "start", "agent-1", "--dm", "console", "--json"))
    assert "Hello." in (await ctl(home, "chat", "agent-1", "hello")).stdout
    await checker.observe()
    async with await ChoirClient.connect(home, call_timeout=30) as client:
        feed = client.stream("subscribe")
        assert (await anext(feed))["kind"] == "subscribed"
        await asyncio.to_thread(disk.fail)
        checker.fault(f"the disk under {logs} failed")
        began = time.monotonic()

        async def reported() -> str | None:
            disk = (await client.status()).disk
            if disk.state != "io_error" or not disk.where.startswith(str(logs)):
                return None
            return str(disk.reason)

        report = await checker.reported(reported)  # named as what it is, with the fix
        assert str(logs) in report.text
        assert "read-only" in report.text
        assert "dmesg" in report.text
        view = await next_health(feed, lambda view: view["disk"] is not None)
        assert view["disk"]["state"] == "io_error"

        chat = await ctl(home, "chat", "agent-1", "hello while the logs disk is broken")
        assert chat.returncode == 0, chat.stderr
        assert "Hello." in chat.stdout
        await asyncio.sleep(max(0.0, BROKEN_FOR_S - (time.monotonic() - began)))
        assert psutil.pid_exists(started["pid"])  # alive, long past its 3 s lease
        status = await client.agent_status("agent-1")
        assert (status.state, status.session_id) == ("running", started["session_id"])
        assert (await client.status()).disk.state == "io_error"  # still, while it lasts

        # The operator's repair: the broken file system out, a good one in its place.
        await asyncio.to_thread(replace_file_system, logs)
        checker.fault(f"a new file system at {logs}")

        async def clean() -> bool:
            return bool((await client.status()).disk.state == "ok")

        await checker.healthy(clean)  # nobody did anything else
        await next_health(feed, lambda view: view["disk"] is None)
        await feed.aclose()

    assert "Hello." in (await ctl(home, "chat", "agent-1", "hello again")).stdout
    verdict = await checker.verify()
    assert verdict.open_intents == []
    status = as_json(await ctl(home, "agent", "status", "agent-1", "--json"))
    assert (status["state"], status["pid"]) == ("running", started["pid"])
    choird_log = parsed(home.choird_log)  # written anew, no line torn
    messages = [line["message"] for line in choird_log]
    # first what became of the records logged while it was broken: lost, or kept (warnings)
    assert "the disk was full or failing" in messages[0], messages[:3]
    assert "disk unhealthy" in messages  # choird's own warning, kept until it could be written
    assert "disk healthy again" in messages


def parsed(path: Path) -> list[dict[str, Any]]:
    """Every line of `path` as JSON: fails on a torn line."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line]


def unmount(mountpoint: Path) -> None:
    subprocess.run(["umount", "-l", str(mountpoint)], check=False, timeout=10)


def replace_file_system(mountpoint: Path) -> None:
    """Unmount the broken file system (lazily: writers hold files in it) and mount a fresh one
    (a tmpfs) in its place."""
    subprocess.run(["umount", "-l", str(mountpoint)], check=True, timeout=10)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=700", "choir-test", str(mountpoint)],
        check=True,
        capture_output=True,
        timeout=10,
    )
