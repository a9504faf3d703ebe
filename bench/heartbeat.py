"""HEARTBEAT durability: 100 committed events from the agent to Postgres and back as an ack.

choird runs in its own process with its embedded Postgres (`bench.choird_server`); this process
is the agent: it commits 100 events to its `CommitLog`, sends them as one HEARTBEAT over its
Unix socket with `ControlPlane`, and times the call until the ack, which choird sends only
after the batch and the new `ack_rev` are committed in one transaction. Heartbeats follow each
other back to back, each continuing the chain of the last.

    python -m bench.heartbeat [--json] [--quick]
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import psutil

from bench.choird_server import choird_server, hello_agent
from bench.common import parse_args, percentile, report
from choir.agent.kernel.commitlog import CommitLog, now_ts
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.outgoing import OutgoingHeartbeat
from choir.agent.replication.policy import heartbeat_of
from choir.protocol import (
    GENESIS_HASH,
    UserMsg,
)

EVENTS = 100
GOALS = {
    "heartbeat_100ev_durable_p50_ms": "(no goal)",
    "heartbeat_100ev_durable_p99_ms": "goal <= 10",
    "choird_cpu_ms_per_heartbeat": "(no goal)",
}
CONFIG = {"rpc": {"rate_limit_per_s": 1_000_000}}
"""Back-to-back heartbeats would trip the per-session rate limit, which is not measured here."""


def next_heartbeat(log: CommitLog, ack_rev: int) -> OutgoingHeartbeat:
    """`EVENTS` new user messages after `ack_rev`, as the agent replicates them."""
    for _ in range(EVENTS):
        log.commit("edge", UserMsg(text=f"message {log.head_rev + 1}: " + "lorem ipsum " * 8))
    return heartbeat_of(
        log.since(ack_rev),
        base_rev=ack_rev,
        hash_prev=log.entry(ack_rev).hash if ack_rev else GENESIS_HASH,
        config_version=1,
        timestamp=now_ts(),
    )


@dataclass
class Samples:
    latencies_ms: list[float]
    """From send to ack, per measured heartbeat."""
    choird_cpu_ms: float
    """choird's CPU time (user + system) per measured heartbeat."""


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


async def durable_latencies(
    control_plane: ControlPlane, choird: psutil.Process, count: int, warmup: int
) -> Samples:
    """Milliseconds from send to ack of each of `count` heartbeats, after `warmup` more, and
    choird's CPU time per heartbeat over those `count`."""
    log, ack_rev, samples = CommitLog(), 0, []
    cpu_before = 0.0
    for index in range(warmup + count):
        if index == warmup:
            cpu_before = cpu_s(choird)
        request = next_heartbeat(log, ack_rev)
        started = time.perf_counter_ns()
        reply = await control_plane.heartbeat(request)
        elapsed = (time.perf_counter_ns() - started) / 1e6
        if reply.ack_rev != log.head_rev:
            raise RuntimeError(f"choird acknowledged {reply.ack_rev}, not {log.head_rev}")
        ack_rev = reply.ack_rev
        if index >= warmup:
            samples.append(elapsed)
    return Samples(samples, (cpu_s(choird) - cpu_before) / count * 1000)


async def measure(quick: bool) -> dict[str, float]:
    async with choird_server(CONFIG) as server:
        control_plane = await hello_agent(server)
        try:
            samples = await durable_latencies(
                control_plane,
                psutil.Process(server.pid),
                count=200 if quick else 2_000,
                warmup=20 if quick else 100,
            )
        finally:
            await control_plane.close()
    return {
        "heartbeat_100ev_durable_p50_ms": percentile(samples.latencies_ms, 50),
        "heartbeat_100ev_durable_p99_ms": percentile(samples.latencies_ms, 99),
        "choird_cpu_ms_per_heartbeat": samples.choird_cpu_ms,
    }


def main() -> None:
    args = parse_args(__doc__ or "")
    figures = asyncio.run(measure(args.quick))
    report(f"HEARTBEAT of {EVENTS} events, send -> durable -> ack (ms)", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
