"""Lock manager throughput: `python -m bench.locks [--json] [--quick]`.

- uncontended_pairs_per_s: one owner acquiring and releasing a 1-lock lockset through
  `LockManager.hold` in a loop — the cost every tool call pays when nobody else wants its locks.
- contended_locksets_per_s: edge + 8 cores, each repeatedly taking a lockset of 1-3 resources
  from a small overlapping pool (workspace, four files, choirtmp, browser_tab), holding it across
  one zero-length await, and releasing it; completed locksets per second over all lanes.
- contended_wait_p99_us: the 99th percentile of how long a lane waited for its lockset there.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence

from bench.common import figures_dict, median, parse_args, percentile, report
from choir.agent.kernel.locks import LockManager
from choir.core.locks.lockset import Lockset

POOL = ("workspace", "file:a.py", "file:b.py", "file:c.py", "file:d.py", "choirtmp", "browser_tab")
CORES = 8
GOALS = {
    "uncontended_pairs_per_s": "goal >= 200,000",
    "contended_locksets_per_s": f"(1 edge + {CORES} cores, no goal)",
    "contended_wait_p99_us": "(no goal)",
}


async def uncontended(pairs: int) -> float:
    manager = LockManager()
    lockset = Lockset.of("file:src/main.py:S")
    start = time.perf_counter()
    for _ in range(pairs):
        async with manager.hold("edge", lockset):
            pass
    return pairs / (time.perf_counter() - start)


def lane_locksets(rng: random.Random, edge: bool, count: int = 64) -> list[Lockset]:
    """Edge only reads while cores run (§7.2); cores write about a third of their locks."""
    locksets = []
    for _ in range(count):
        resources = rng.sample(POOL, rng.randint(1, 3))
        locksets.append(
            Lockset(f"{r}:{'S' if edge or rng.random() < 0.67 else 'X'}" for r in resources)
        )
    return locksets


async def lane(
    manager: LockManager, owner: str, locksets: Sequence[Lockset], rounds: int, waits: list[float]
) -> None:
    clock = time.perf_counter
    for i in range(rounds):
        asked = clock()
        async with manager.hold(owner, locksets[i % len(locksets)]):
            waits.append(clock() - asked)
            await asyncio.sleep(0)


async def contended(rounds: int) -> tuple[float, list[float]]:
    manager = LockManager()
    rng = random.Random(9)
    owners = ["edge", *(f"core:job-{n}" for n in range(CORES))]
    waits: list[float] = []
    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for owner in owners:
            locksets = lane_locksets(rng, edge=owner == "edge")
            group.create_task(lane(manager, owner, locksets, rounds, waits))
    elapsed = time.perf_counter() - start
    assert manager.idle
    return len(owners) * rounds / elapsed, waits


def main() -> None:
    args = parse_args(__doc__ or "")
    pairs, rounds, repeats = (50_000, 2_000, 1) if args.quick else (500_000, 20_000, 3)
    rates = [asyncio.run(uncontended(pairs)) for _ in range(repeats)]
    contended_rate, waits = asyncio.run(contended(rounds))
    figures = figures_dict(
        uncontended_pairs_per_s=median(rates),
        contended_locksets_per_s=contended_rate,
        contended_wait_p99_us=percentile(waits, 99) * 1e6,
    )
    report("lock manager (choir.agent.kernel.locks)", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
