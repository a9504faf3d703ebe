"""What an operator chose survives choird restarts (issue 19): the config_version, an agent's start
overrides and a `model set`; a restart-only change is pending until the restart applies it.

choird is a real `choird --quiet` process on the test session's Postgres, agent-1 a real
choir-agent on the process runtime; everything goes through `choirctl --json` as an operator
types it. choird is killed with SIGKILL right after `model set` answers (nothing more can be
written), then restarted gracefully (SIGTERM) for the pending change.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from choir.daemon.runtimes.bwrap import BWRAP_ENV
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.faults.support import as_json, choirctl, kill9, spawn_choird, teardown
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.processes import Choird
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    """`choirctl init`'s home with two more demo models to choose between."""
    home = make_home(root, postgres=external_postgres(pg_params))
    data = read_config(home)
    for name in ("demo-2", "demo-3"):
        data["models"][name] = {**data["models"]["demo"], "model": f"choir-{name}"}
    write_config(home, data)
    return home


class Daemon:
    """The current choird process of `home`, started and stopped as the test goes."""

    def __init__(self, home: ChoirHome) -> None:
        self.home = home
        self.choird: Choird | None = None

    async def start(self) -> None:
        self.choird = await asyncio.to_thread(
            spawn_choird, self.home, "--runtime", "process", **{BWRAP_ENV: ""}
        )

    def kill(self) -> None:
        assert self.choird is not None
        kill9(self.choird)

    async def stop(self) -> None:
        assert self.choird is not None
        self.choird.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(self.choird.process.wait, 60) == 0

    async def heartbeat_seen(self, agent_id: str) -> bool:
        status = await self.ctl("agent", "status", agent_id)
        return status["last_heartbeat_at"] is not None

    async def ctl(self, *args: str) -> Any:
        return as_json(await asyncio.to_thread(choirctl, self.home, *args, "--json"))


@pytest.fixture
def daemon(home: ChoirHome) -> Iterator[Daemon]:
    daemon = Daemon(home)
    try:
        yield daemon
    finally:
        teardown(home, daemon.choird)


async def test_kill_9_after_model_set_keeps_every_choice(daemon: Daemon) -> None:
    """Before: the new choird served config v1, and `agent restart` reverted the agent to its
    default model instead of the `--llm` it was started with."""
    await daemon.start()
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "console", "--llm", "demo-2")
    assert started["bindings"]["llm"] == "demo-2"
    # a heartbeat recorded: the lease a new choird adopts the agent by (runtimes/adopt)
    await poll_until(lambda: daemon.heartbeat_seen("agent-1"), within=30, every=0.5)
    switched = await daemon.ctl("model", "set", "agent-1", "--llm", "demo-3")
    daemon.kill()  # right after the answer: whatever it acknowledged must be durable

    await daemon.start()
    status = await daemon.ctl("status")
    model = await daemon.ctl("model", "get", "agent-1")
    assert status["config_version"] == switched["config_version"] == 2
    assert (model["llm"], model["llm_overridden"]) == ("demo-3", True)  # adopted, still switched

    restarted = await daemon.ctl("agent", "restart", "agent-1")
    assert restarted["session_id"] == started["session_id"]
    assert restarted["bindings"]["llm"] == "demo-2"  # the transient choice reverts to the start's
    assert (await daemon.ctl("status"))["config_version"] == 2


async def test_a_restart_only_change_is_pending_until_choird_restarts(daemon: Daemon) -> None:
    """Before: `config show` showed the new value as running and nothing said it was not."""
    await daemon.start()
    data = read_config(daemon.home)
    data["rpc"]["read_timeout_ms"] = 20_000
    data["heartbeat_interval_ms"] = 3000  # hot, and within crash_detection_threshold_ms / 2
    write_config(daemon.home, data)
    await daemon.ctl("config", "load")
    applied = await asyncio.to_thread(choirctl, daemon.home, "config", "apply")
    shown = await daemon.ctl("config", "show")
    status = await daemon.ctl("status")
    human = await asyncio.to_thread(choirctl, daemon.home, "config", "show")

    line = "~ config.json: rpc.read_timeout_ms  [restart-required] → use: choir restart"
    assert applied.returncode == 0, applied.stderr
    assert f"pending until choird restarts (1):\n{line}\n" in applied.stdout
    assert [change["path"] for change in shown["pending"]] == ["rpc.read_timeout_ms"]
    assert shown["pending_lines"] == [line]
    assert shown["config"]["rpc"]["read_timeout_ms"] == 30_000  # what choird's sockets use
    hot = data["heartbeat_interval_ms"]
    assert shown["config"]["heartbeat_interval_ms"] == hot  # a hot change runs at once
    assert status["config_pending"] == [line]
    assert "# pending until choird restarts (1; below as they run now):" in human.stdout
    assert f"# {line}" in human.stdout
    human_status = await asyncio.to_thread(choirctl, daemon.home, "status")
    assert "1 change(s) pending until choird restarts:" in human_status.stdout
    assert line in human_status.stdout
    version = shown["config_version"]

    await daemon.stop()
    await daemon.start()
    after = await daemon.ctl("config", "show")
    assert (after["pending"], after["config"]["rpc"]["read_timeout_ms"]) == ([], 20_000)
    assert after["config_version"] == version  # the same config: the same version
    assert (await daemon.ctl("status"))["config_pending"] == []
