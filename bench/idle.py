"""choird at rest: CPU and memory with one idle agent session.

choird runs in its own process (`bench.choird_server`: the daemon `choird` runs, with its
embedded Postgres) with agent-1's session started; this process plays the idle agent, sending
an empty HEARTBEAT every `heartbeat_interval_ms` (5 s, the default) as choir-agent does while
nothing happens. Over the measuring window:

- choird_idle_cpu_pct: choird's CPU time (user + system) / wall time, in percent of one core.
- choird_rss_mb: choird's resident memory at the end, MiB.
- postgres_idle_cpu_pct: the same for the embedded Postgres (postmaster and its children).

    python -m bench.idle [--json] [--quick]     # 60 s window, 30 s with --quick
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import psutil

from bench.choird_server import choird_server, hello_agent
from bench.common import parse_args, report
from choir.agent.kernel.commitlog import now_ts
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.policy import heartbeat_of
from choir.protocol import GENESIS_HASH

HEARTBEAT_S = 5.0
GOALS = {
    "choird_idle_cpu_pct": "goal <= 1",
    "choird_rss_mb": "goal <= 150",
    "postgres_idle_cpu_pct": "(no goal)",
}


async def idle_agent(control_plane: ControlPlane) -> None:
    """Empty heartbeats every HEARTBEAT_S: the agent is alive and has committed nothing."""
    while True:
        await control_plane.heartbeat(
            heartbeat_of(
                [], base_rev=0, hash_prev=GENESIS_HASH, config_version=1, timestamp=now_ts()
            )
        )
        await asyncio.sleep(HEARTBEAT_S)


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def postgres_processes(pid_file_text: str) -> list[psutil.Process]:
    postmaster = psutil.Process(int(pid_file_text.splitlines()[0]))
    return [postmaster, *postmaster.children(recursive=True)]


def cpu_by_pid(processes: list[psutil.Process]) -> dict[int, float]:
    seconds = {}
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            seconds[process.pid] = times.user + times.system
    return seconds


def cpu_since(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU the processes alive at the end used since `before` (a backend started meanwhile
    counts whole): Postgres's short-lived backends come and go, and subtracting the CPU of one
    that exited from a later total read as negative time."""
    return sum(used - before.get(pid, 0.0) for pid, used in after.items())


async def measure(quick: bool) -> dict[str, float]:
    window = 30.0 if quick else 60.0
    async with choird_server() as server:
        choird = psutil.Process(server.pid)
        pid_file = server.home / "pgdata" / "postmaster.pid"
        control_plane = await hello_agent(server)
        agent = asyncio.create_task(idle_agent(control_plane))
        try:
            await asyncio.sleep(2.0)  # let start-up work (pool warm-up, first beats) settle
            began, choird_cpu = time.monotonic(), cpu_seconds([choird])
            pg_before = cpu_by_pid(postgres_processes(pid_file.read_text()))
            await asyncio.sleep(window)
            wall = time.monotonic() - began
            choird_cpu = cpu_seconds([choird]) - choird_cpu
            pg_cpu = cpu_since(pg_before, cpu_by_pid(postgres_processes(pid_file.read_text())))
            rss = choird.memory_info().rss / 2**20
        finally:
            agent.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await agent
            await control_plane.close()
    return {
        "choird_idle_cpu_pct": 100 * choird_cpu / wall,
        "choird_rss_mb": rss,
        "postgres_idle_cpu_pct": 100 * pg_cpu / wall,
    }


def main() -> None:
    args = parse_args(__doc__ or "")
    report(
        "choird idle, one agent session heartbeating every 5 s",
        asyncio.run(measure(args.quick)),
        GOALS,
        args.json,
    )


if __name__ == "__main__":
    main()
