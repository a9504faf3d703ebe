"""kill -9 at random points under load: 5 agents chatting with tool calls (§13, issue 12).

Five agents choird started on the process runtime, each with a user sending message after
message; every answer runs `test.effect` (a non-idempotent append, paused a random while after
writing) and then replies. Meanwhile a killer picks an agent and an instant at random, sends it
SIGKILL — wherever it is: in a model call, in the tool, between the intent and its ack, in a
heartbeat — and does what the crash report says (`agent start`, which resumes the session). Each
crash must be reported within 5 s and the agent answer again within 10 s; at the end every
session is held to the invariants (chain, acknowledged events and replies, messages, side
effects) and no intent is left open. Snapshots are taken every few events, so resumes go through
snapshots as well as full replays.

The randomness is seeded: the seed is printed, and `CHOIR_FAULT_SEED=<seed>` replays the same
choices (the instants still depend on timing).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest

from choir.errors import ChoirError
from tests.faults.conftest import ClusterOf
from tests.faults.invariants import InvariantChecker, checker_for, crash_report
from tests.faults.load import MAX_ROUNDS, all_answer, load_script, run_load, seeded
from tests.harness.cluster import Cluster

pytestmark = pytest.mark.slow

AGENTS = 5
KILLS = 4
MIN_ROUNDS = 4
"""Messages each agent's user sends at least; more while the killer is still at work."""
KILL_GAP_S = (0.3, 2.0)
"""The killer waits this long (uniformly at random) before each kill."""


@dataclass
class Life:
    """Whether an agent is up, and the event its user waits on while it is down."""

    up: asyncio.Event = field(default_factory=asyncio.Event)
    killed: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.mark.timeout(150)
async def test_random_kills_under_load_lose_nothing_acknowledged_and_run_nothing_twice(
    cluster_of: ClusterOf,
) -> None:
    seed, rng = seeded("random kills")
    agents = [f"agent-{n}" for n in range(1, AGENTS + 1)]
    cluster = await cluster_of(load_script(rng, agents), agents=AGENTS, snapshot_every_events=7)
    checker = checker_for(cluster, context=f"CHOIR_FAULT_SEED={seed}", require_answers=True)
    lives = {agent: Life() for agent in agents}
    for agent in agents:
        await cluster.start(agent)
        lives[agent].up.set()
    # the load starts once all of them serve
    await all_answer(checker, cluster, agents, "5 agents started")

    killing = asyncio.create_task(killer(cluster, checker, lives, rng))
    users = [asyncio.create_task(user(cluster, agent, lives[agent], killing)) for agent in agents]
    await run_load(killing, users)

    for agent in agents:
        await all_answer(checker, cluster, [agent], f"the end: {agent} still answers")
    verdict = await checker.verify(cluster.conversations.values())
    print(f"timings: {verdict.timings}")
    print(f"unacknowledged messages lost: {[m.text for m in verdict.lost_messages]}")
    assert verdict.open_intents == []  # every interrupted call was answered at resume
    assert sum(verdict.effects.values()) >= AGENTS * MIN_ROUNDS // 2
    assert len([what for what, _ in verdict.timings if what.startswith("reported")]) == KILLS


async def killer(
    cluster: Cluster, checker: InvariantChecker, lives: dict[str, Life], rng: random.Random
) -> None:
    for kill in range(KILLS):
        await asyncio.sleep(rng.uniform(*KILL_GAP_S))
        victim = rng.choice(sorted(lives))
        life = lives[victim]
        await checker.observe()
        life.up.clear()
        life.killed.set()
        checker.fault(f"kill -9 #{kill + 1} of {victim}")
        await cluster.kill(victim)
        await checker.reported(crash_report(cluster.client, victim))
        resumed = await cluster.start(victim)
        assert resumed["resumed"] is True
        life.killed = asyncio.Event()
        life.up.set()
        await checker.healthy(lambda victim=victim: cluster.answers(victim))  # type: ignore[misc]


async def user(cluster: Cluster, agent: str, life: Life, killing: asyncio.Task[None]) -> None:
    """Send message after message; one the crash interrupted is not sent again."""
    conversation = cluster.conversation(agent)
    for n in range(MAX_ROUNDS):
        if n >= MIN_ROUNDS and killing.done():
            return
        await life.up.wait()
        killed = life.killed
        try:
            sent = await conversation.send(f"work [{agent}/{n}]")
        except ChoirError:  # killed since: the message was refused, not accepted
            continue
        replied = asyncio.ensure_future(conversation.reply_to(sent, within=30))
        crashed = asyncio.ensure_future(killed.wait())
        try:
            await asyncio.wait({replied, crashed}, return_when=asyncio.FIRST_COMPLETED)
            if replied.done():
                replied.result()  # raises when no reply came in time
        finally:
            replied.cancel()
            crashed.cancel()
