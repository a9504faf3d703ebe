"""kill -9 of choird and of Postgres at random moments under load (issue 12, "Fault suites").

Five agents on the process runtime, each with a user sending message after message; every
answer runs `test.effect` (a non-idempotent append, paused a random while after writing) and
then replies. choird is a real process on a home with its embedded Postgres
(`tests.faults.daemon_cluster`). Meanwhile a killer works through a seeded, shuffled plan of
faults, each at a random moment:

- **kill -9 of choird** — wherever it is: mid-heartbeat, storing a message, pushing one. The
  operator's next command is refused naming the step (`start it with choir up`) and the test
  takes that step at once, as a supervisor (systemd's `Restart=`) would: that restart is the
  one repair allowed. The new choird must adopt every agent — same process, same session —
  deliver what the old one had accepted and never pushed, and take the events the agents
  committed meanwhile.
- **kill -9 of the embedded postmaster** — choird notices and restarts it by itself: nobody
  does anything. Meanwhile `status` says degraded and commands are refused with exit 6 naming
  what to do; agents keep their events and resend them.

Each fault must be reported within 5 s with a next step, and every agent must answer again
within 10 s. At the end every session is held to the invariants (`tests.faults.invariants`):
gap-free hash chains, nothing acknowledged lost, every accepted message stored and answered
exactly once, no side effect twice, no intent left open; no agent crashed or got a new session,
and no reply reached the user twice. Snapshots are taken every few events, so adoption and
replication run past snapshots too. (A reply stored by a choird in its last moments can miss the
chat's live stream — the console DM keeps its stream in memory — although it is stored and
answers its message once: the run prints such messages, it does not fail on them.)

The randomness is seeded: the seed is printed, and `CHOIR_FAULT_SEED=<seed>` replays the same
plan, gaps and tool pauses (the instants still depend on timing).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pytest

from choir.client import ChoirClient
from choir.errors import ChoirError, UnavailableError
from choir.transport import TransportError
from tests.faults.daemon_cluster import DaemonCluster, daemon_cluster
from tests.faults.invariants import InvariantChecker, Probe, Verdict
from tests.faults.load import MAX_ROUNDS, all_answer, load_script, run_load, seeded

pytestmark = pytest.mark.slow

AGENTS = 5
FAULTS: tuple[Literal["choird", "postgres"], ...] = ("choird", "choird", "postgres", "postgres")
"""The plan, shuffled by the seed."""
MIN_ROUNDS = 3
"""Messages each agent's user sends at least; more while the killer is still at work."""
FAULT_GAP_S = (0.3, 2.5)
"""The killer waits this long (uniformly at random) before each fault."""
ANSWER_WITHIN_S = 45.0
"""How long a user waits for an answer, across an outage and the recovery after it."""
SETTINGS: dict[str, Any] = {"heartbeat_interval_ms": 1000, "snapshot_every_events": 7}
"""Idle agents beat every second (the lease threshold stays the default 10 s)."""


@pytest.mark.timeout(300)
async def test_random_choird_and_postgres_kills_under_load_lose_nothing_and_run_nothing_twice(
    fault_root: Path,
) -> None:
    seed, rng = seeded("random daemon kills")
    agents = [f"agent-{n}" for n in range(1, AGENTS + 1)]
    plan = list(FAULTS)
    rng.shuffle(plan)
    async with daemon_cluster(
        fault_root, load_script(rng, agents), agents=AGENTS, **SETTINGS
    ) as cluster:
        checker = InvariantChecker(
            cluster.pg,
            cluster.agents,
            effects=[cluster.effects(agent) for agent in agents],
            context=f"CHOIR_FAULT_SEED={seed} plan={plan}",
            require_answers=True,
        )
        started = {agent: await cluster.start(agent) for agent in agents}
        # the load starts once all of them serve
        await all_answer(checker, cluster, agents, "5 agents started")

        up = asyncio.Event()
        up.set()
        answered: Counter[str] = Counter()
        killing = asyncio.create_task(killer(cluster, checker, up, plan, rng))
        users = [
            asyncio.create_task(user(cluster, agent, up, killing, answered)) for agent in agents
        ]
        await run_load(killing, users)

        for agent in agents:
            await all_answer(checker, cluster, [agent], f"the end: {agent} still answers")
        verdict = await checker.verify(cluster.conversations.values())
        print(f"plan: {plan}; timings: {verdict.timings}")
        print(f"answers seen on the chat stream / only in the store: {dict(answered)}")
        print(f"unacknowledged messages lost: {[m.text for m in verdict.lost_messages]}")
        print(f"answers the chat never showed: {never_shown(cluster, verdict)}")
        assert verdict.open_intents == []
        assert sum(verdict.effects.values()) >= AGENTS * MIN_ROUNDS
        assert len([what for what, _ in verdict.timings if what.startswith("reported")]) == len(
            plan
        )
        for agent in agents:  # adopted every time: the same process, the same one session
            status = await cluster.status(agent)
            before = started[agent]
            assert (status["state"], status["session_id"], status["pid"]) == (
                "running",
                before["session_id"],
                before["pid"],
            ), status
            assert not twice_delivered(cluster, agent)
        assert len(verdict.agent_of) == AGENTS  # sessions: one each
        health = await cluster.client.status()
        assert (health.postgres.state, health.disk.state) == ("ok", "ok"), health


async def killer(
    cluster: DaemonCluster,
    checker: InvariantChecker,
    up: asyncio.Event,
    plan: list[Literal["choird", "postgres"]],
    rng: random.Random,
) -> None:
    for n, kind in enumerate(plan, 1):
        await asyncio.sleep(rng.uniform(*FAULT_GAP_S))
        await checker.observe()
        up.clear()
        print(f"kill -9 #{n} of {kind} at {datetime.now(UTC).isoformat(timespec='milliseconds')}")
        if kind == "choird":
            checker.fault(f"kill -9 #{n} of choird")
            await asyncio.to_thread(cluster.kill_choird)
            await checker.reported(choird_gone(cluster))
            await cluster.restart_choird()  # the supervisor's step, and the only one
        else:
            checker.fault(f"kill -9 #{n} of the postmaster")
            cluster.kill_postmaster()
            await checker.reported(database_away(cluster.client))
        for agent in cluster.agents:
            await checker.healthy(lambda agent=agent: serving(cluster, agent))  # type: ignore[misc]
        up.set()


async def user(
    cluster: DaemonCluster,
    agent: str,
    up: asyncio.Event,
    killing: asyncio.Task[None],
    answered: Counter[str],
) -> None:
    """Send message after message, each once its predecessor was answered. One that choird
    refused (down, or its database away) is not sent again."""
    conversation = cluster.conversation(agent)
    for n in range(MAX_ROUNDS):
        if n >= MIN_ROUNDS and killing.done():
            return
        await up.wait()
        try:
            sent = await conversation.send(f"work [{agent}/{n}]")
        except (ChoirError, TransportError, OSError):  # refused: not accepted
            continue
        answered[await cluster.reply_or_stored(sent, within=ANSWER_WITHIN_S)] += 1


async def serving(cluster: DaemonCluster, agent: str) -> bool:
    """Healthy: choird sees no problem, and the agent answers."""
    try:
        status = await cluster.client.status()
    except (ChoirError, TransportError, OSError):
        return False
    if status.postgres.state != "ok" or status.disk.state != "ok":
        return False
    return await cluster.answers(agent)


def choird_gone(cluster: DaemonCluster) -> Probe:
    """What the operator's next command says while no choird runs (choirctl prints it)."""

    async def probe() -> str | None:
        try:
            client = await ChoirClient.connect(cluster.home, call_timeout=5)
        except UnavailableError as refused:
            return refused.message
        await client.close()
        return None

    return probe


def database_away(client: ChoirClient) -> Probe:
    """`status` says the database is degraded and why, and a command that needs it is refused
    (exit 6) saying what to do. (`status` itself is refused the same way when the database dies
    between its probe and its queries, before choird's health knows.)"""

    async def probe() -> str | None:
        try:
            postgres = (await client.status()).postgres
            if postgres.state != "degraded":
                return None
            await client.agent_status("agent-1")
        except UnavailableError as refused:
            return refused.message
        return None

    return probe


def never_shown(cluster: DaemonCluster, verdict: Verdict) -> list[str]:
    """Messages whose answer is stored but never reached the user's chat stream, each with when
    its answer was stored."""
    stored = {
        event.payload["in_reply_to"]: event.created_at.isoformat(timespec="milliseconds")
        for event in verdict.events("agent_replied")
    }
    return [
        f"{sent.text} (answer stored at {stored.get(sent.message_id)})"
        for conversation in cluster.conversations.values()
        for sent in conversation.sent
        if not any(reply["in_reply_to"] == sent.message_id for reply in conversation.replies)
    ]


def twice_delivered(cluster: DaemonCluster, agent: str) -> list[tuple[str, int]]:
    """Replies the user's chat showed more than once (the same stored event)."""
    seen = Counter(
        (reply["session_id"], reply["rev"])
        for reply in cluster.conversation(agent).replies
        if reply["rev"] is not None
    )
    return [key for key, count in seen.items() if count > 1]
