"""Agent start: `agent.start` to INIT_HELLO acknowledged, on both runtimes; orphan containers.

    python -m bench.agent_start [--json] [--quick]

choird runs in this process on a fresh home (`choirctl init`: embedded Postgres, the local
global repo, agent-1 on the demo model) and is driven over its operator socket as choirctl
drives it. Each sample starts agent-1, stops the clock when choird has answered the agent's
INIT_HELLO, then stops the agent gracefully (not timed).

- `process_start_s`: median of 5 on the process runtime (choir-agent as a host subprocess).
- `docker_start_s`: median of 5 on the docker runtime — the image is built once beforehand
  (that is `bench.build`'s figure), so this is the up-to-date check, a hardened container's
  create and start, choir-agent's start-up inside it and the handshake.
- `orphans_after_100`: containers of this home left after 100 docker start/stop cycles (10
  with --quick); anything but 0 is a leak.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import compile_bytecode, median, parse_args, report

GOALS = {
    "process_start_s": "goal ≤ 0.25",
    "docker_start_s": "goal ≤ 0.35",
    "orphans_after_100": "goal 0",
}
SAMPLES = 5


@dataclass
class Bench:
    """A running choird, its operator client, and an event set when INIT_HELLO is answered."""

    client: Any
    hello: asyncio.Event

    async def start(self) -> float:
        """Seconds from asking choird to start agent-1 to its INIT_HELLO answered."""
        self.hello.clear()
        began = time.perf_counter()
        await self.client.agent_start("agent-1", {"dm": "console"})
        await asyncio.wait_for(self.hello.wait(), 60)
        return time.perf_counter() - began

    async def stop(self) -> None:
        await self.client.agent_stop("agent-1")


@asynccontextmanager
async def running(home: Any, runtime: str) -> AsyncIterator[Bench]:
    from choir.client import ChoirClient
    from choir.daemon.app import ChoirDaemon, DaemonOptions
    from choir.daemon.operator.api import operator_handler

    options = DaemonOptions(home, runtime=runtime)  # type: ignore[arg-type]
    async with ChoirDaemon(options, operator=operator_handler) as daemon:
        assert daemon.services is not None
        hello = asyncio.Event()
        greeter = daemon.services.verbs._greeter  # instrumentation: note each answered hello
        answer = greeter.init_hello

        async def noted(ctx: Any, request: Any) -> Any:
            response = await answer(ctx, request)
            hello.set()
            return response

        greeter.init_hello = noted  # type: ignore[method-assign]
        async with await ChoirClient.connect(home, call_timeout=900) as client:
            yield Bench(client, hello)


async def start_times(home: Any, runtime: str, count: int) -> list[float]:
    async with running(home, runtime) as bench:
        await bench.start()  # warm-up: the docker runtime builds the image here
        await bench.stop()
        samples = []
        for _ in range(count):
            samples.append(await bench.start())
            await bench.stop()
        return samples


async def orphans_after(home: Any, cycles: int) -> int:
    """Containers of `home` left after `cycles` docker start/stop cycles."""
    import docker

    async with running(home, "docker") as bench:
        for _ in range(cycles):
            await bench.start()
            await bench.stop()
    engine = docker.from_env()
    try:
        left = engine.containers.list(all=True, filters={"label": f"choir.home={home.root}"})
        for container in left:
            container.remove(force=True)
        return len(left)
    finally:
        engine.close()


async def measure(quick: bool) -> dict[str, float]:
    from choir.config import init_home
    from choir.home import ChoirHome

    with tempfile.TemporaryDirectory(prefix="bs-", dir="/tmp") as tmp:
        home = ChoirHome(Path(tmp) / "h")
        init_home(home)
        process = await start_times(home, "process", SAMPLES)
        docker = await start_times(home, "docker", SAMPLES)
        orphans = await orphans_after(home, 10 if quick else 100)
    return {
        "process_start_s": median(process),
        "docker_start_s": median(docker),
        "orphans_after_100": float(orphans),
    }


def main() -> None:
    args = parse_args(__doc__ or "")
    compile_bytecode()
    figures = asyncio.run(measure(args.quick))
    report("agent start", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
