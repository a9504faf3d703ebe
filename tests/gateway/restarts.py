"""choird as a real process for the gateway's restart tests: started, killed, stopped."""

from __future__ import annotations

import asyncio

from choir.home import ChoirHome
from tests.faults.support import as_json, choirctl, kill9, spawn_choird
from tests.harness.homes import read_config, write_config
from tests.harness.processes import Choird

LEASE = {"heartbeat_interval_ms": 1000, "crash_detection_threshold_ms": 30_000}
"""A lease that outlives a choird restart on a loaded machine: the agent is adopted."""


def leased(home: ChoirHome, **sections: object) -> ChoirHome:
    """`home` with `LEASE` (and `sections`) in its config.json."""
    data = read_config(home)
    data.update(LEASE, **sections)
    write_config(home, data)
    return home


class Daemon:
    """choird for `home` as a process, started and killed by the test."""

    def __init__(self, home: ChoirHome) -> None:
        self.home = home
        self.process: Choird | None = None

    async def start(self, **env: str) -> None:
        """Start choird (ready), with `env` added (e.g. CHOIR_FAILPOINTS)."""
        self.process = await asyncio.to_thread(
            spawn_choird, self.home, "--runtime", "process", **env
        )

    def kill(self) -> None:
        assert self.process is not None
        kill9(self.process)

    async def stop(self) -> None:
        """A graceful stop (SIGTERM): choird drains and stops its agents."""
        assert self.process is not None
        self.process.process.terminate()
        assert await asyncio.to_thread(self.process.process.wait, 60) == 0

    async def ctl(self, *args: str) -> dict[str, object]:
        done = await asyncio.to_thread(choirctl, self.home, *args, "--json")
        result: dict[str, object] = as_json(done)
        return result
