"""A core job's wall-time watchdog (§7.6): the step in flight is cancelled at the deadline.

`per_job_wall_time_ms` used to be checked only between steps, so a slow `choir.exec` or LLM call
overran it by as long as the call took. Each step now runs inside an `asyncio.timeout` set to the
time the job has left; when it fires, the step's awaits are cancelled the way a job cancel does
it — the arbiter commits a `cancelled` result for the call in flight (the tool is stopped, its
locks released), so the log and the model's transcript stay valid — and the runner takes the
budget's usual way out. The deadline is re-read every `RECHECK_S`, so a budget changed by a
config reload or an extension granted meanwhile moves it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Final

from choir.agent.kernel.lane_policy import LanePolicy

RECHECK_S: Final = 0.5
"""How often a running step's deadline follows a changed budget."""
GRACE_S: Final = 0.25
"""Past the deadline before the step is cut: a wait that ends at the deadline by itself (a
`need_info` question's) ends its own way, with its own result."""
WALL_TIME: Final = "per_job_wall_time_ms"


def left_s(policy: LanePolicy, lane: str) -> float:
    """Seconds the job of `lane` has left of its wall time (0 once it is used up)."""
    try:
        return policy.remaining(lane).get(WALL_TIME, 0) / 1000
    except ValueError:  # the job already ended
        return 0.0


def _deadline(policy: LanePolicy, lane: str) -> float:
    return asyncio.get_running_loop().time() + left_s(policy, lane) + GRACE_S


class WallTimeUp(Exception):
    """The job's wall time ran out while a step was in flight; the step was cancelled."""


@contextlib.asynccontextmanager
async def wall_clock(policy: LanePolicy, lane: str) -> AsyncIterator[None]:
    """Run the body until the job's wall time runs out: WallTimeUp then, the body cancelled.

    A TimeoutError of the body's own (not the deadline's) passes through unchanged.
    """
    loop = asyncio.get_running_loop()
    deadline = asyncio.timeout_at(_deadline(policy, lane))
    try:
        async with deadline:
            follower = loop.create_task(_follow(policy, lane, deadline), name=f"{lane}:watchdog")
            try:
                yield
            finally:
                follower.cancel()
    except TimeoutError:
        if deadline.expired():
            raise WallTimeUp(lane) from None
        raise


async def _follow(policy: LanePolicy, lane: str, deadline: asyncio.Timeout) -> None:
    while True:
        await asyncio.sleep(RECHECK_S)
        if deadline.expired():
            return
        deadline.reschedule(_deadline(policy, lane))


__all__ = ["GRACE_S", "RECHECK_S", "WallTimeUp", "left_s", "wall_clock"]
