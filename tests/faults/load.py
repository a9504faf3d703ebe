"""The load the random-kill scenarios run under: seeded scripts, users and their end.

Both `test_random_kills` (agents killed) and `test_random_daemon_kills` (choird and Postgres
killed) run five agents whose users send message after message, each answer a `test.effect`
call paused a random while; a killer works at random moments meanwhile. What differs is what
they kill and how a user waits; the set-up and the end are these.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Awaitable, Sequence
from typing import Protocol

from choir.scripted import ReplyStep, ToolCallsStep
from tests.faults.invariants import InvariantChecker
from tests.harness.cluster import effect_turn, probe_step

MAX_ROUNDS = 30
"""Messages scripted per agent: the bound on how long a user keeps talking."""
MAX_TOOL_PAUSE_MS = 600


class Answering(Protocol):
    async def answers(self, agent_id: str) -> bool: ...


def seeded(what: str) -> tuple[int, random.Random]:
    """The run's seed (`CHOIR_FAULT_SEED` replays one; printed) and a generator seeded by it."""
    seed = int(os.environ.get("CHOIR_FAULT_SEED") or random.randrange(2**32))
    print(f"{what}: CHOIR_FAULT_SEED={seed}")
    return seed, random.Random(seed)


def load_script(rng: random.Random, agents: Sequence[str]) -> list[ReplyStep | ToolCallsStep]:
    """Probes answered, then `MAX_ROUNDS` effect turns per agent with random tool pauses."""
    steps: list[ReplyStep | ToolCallsStep] = [probe_step()]
    for agent in agents:
        for n in range(MAX_ROUNDS):
            steps += effect_turn(f"{agent}/{n}", rng.randrange(MAX_TOOL_PAUSE_MS))
    return steps


async def all_answer(
    checker: InvariantChecker, cluster: Answering, agents: Sequence[str], fault: str
) -> None:
    """`fault` noted, then every agent answers a probe (within the checker's recovery budget)."""
    checker.fault(fault)
    for agent in agents:

        def answers(agent: str = agent) -> Awaitable[bool]:
            return cluster.answers(agent)

        await checker.healthy(answers)


async def run_load(killing: asyncio.Task[None], users: list[asyncio.Task[None]]) -> None:
    """The killer and the users to their ends; whatever is left is cancelled if one fails."""
    try:
        await killing
        await asyncio.gather(*users)
    finally:
        for task in (killing, *users):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
