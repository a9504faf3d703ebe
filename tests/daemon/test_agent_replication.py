"""The agent's replication against real choird services over the real agent socket (§13, §16.3).

Each test runs choird's agent handler on agent-2's Unix socket (Postgres-backed sessions,
replication, config stage, push hub) and the agent's side as it runs in a container: a
`CommitLog`, a `ControlPlane` over a `ReconnectingClient`, a `ConfigSync` and a `Replicator`.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from choir import failpoints
from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.agent.kernel.intents import IntentNotDurable
from choir.agent.replication.config_sync import ConfigSync
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.link import ReconnectingClient
from choir.agent.replication.live_config import DynamicState
from choir.agent.replication.replicator import (
    ReplicationFatal,
    ReplicationSettings,
    Replicator,
)
from choir.config import SecretStore
from choir.daemon.agents.handler import AgentHandler
from choir.daemon.agents.pushes import wire_pushes
from choir.daemon.agents.services import AgentServices
from choir.daemon.sessions.bindings import allowed_secrets
from choir.daemon.staging.stage import ConfigStage
from choir.home import ChoirHome
from choir.protocol import (
    AgentReplied,
    ReferenceSummary,
    ResourceBindings,
    SecretsRefreshedPush,
    Snapshot,
    UserMsg,
)
from choir.store.events import read_events
from choir.store.postgres.pool import Pool
from choir.store.sessions import SessionStatus
from choir.store.snapshots import latest_snapshot
from choir.transport import PushHub, UdsServer
from tests.harness.waits import poll_until

from .conftest import Clock, read_config, write_config

AGENT = "agent-2"


@dataclass
class Choird:
    """choird's side: agent-2's socket served by the real handler, stoppable mid-test."""

    services: AgentServices
    hub: PushHub
    socket: Path
    session_id: str
    lease_token: str
    server: UdsServer | None = None

    async def start(self) -> None:
        handler = AgentHandler(self.services.rpc, self.services.sessions, bound_agent=AGENT)
        self.server = UdsServer(self.socket, handler, hub=self.hub)
        await self.server.start()

    async def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await server.close()


@dataclass
class Agent:
    """The agent's side, as choir-agent wires it."""

    log: CommitLog
    control_plane: ControlPlane
    state: DynamicState
    sync: ConfigSync
    replicator: Replicator
    fatal: list[ReplicationFatal] = field(default_factory=list)

    def commit(self, count: int, text: str = "hello") -> list[LogEntry]:
        return [self.log.commit("edge", UserMsg(text=f"{text} {i}")) for i in range(count)]


AgentFactory = Callable[..., Awaitable[Agent]]


@pytest.fixture
async def choird(home: ChoirHome, services: AgentServices) -> AsyncIterator[Choird]:
    started = await services.sessions.start(AGENT, {})
    hub = PushHub()
    disconnect = wire_pushes(services, hub)
    socket = home.agent_socket(AGENT)
    socket.parent.mkdir(parents=True, exist_ok=True)
    choird = Choird(services, hub, socket, started.session_id, started.lease_token)
    await choird.start()
    try:
        yield choird
    finally:
        await choird.stop()
        disconnect()


@pytest.fixture
async def make_agent(choird: Choird) -> AsyncIterator[AgentFactory]:
    """Builds agents on choird's socket; each is stopped (with a flush) at the end."""
    async with AsyncExitStack() as stack:

        async def make(
            log: CommitLog | None = None,
            *,
            acked_rev: int | None = None,
            snapshot: Callable[[CommitLog], Snapshot] | None = None,
            **settings: Any,
        ) -> Agent:
            log = log if log is not None else CommitLog()
            client = ReconnectingClient(
                choird.socket, session_id=choird.session_id, lease_token=choird.lease_token
            )
            control_plane = ControlPlane(client)
            stack.push_async_callback(control_plane.close)
            state = DynamicState()
            sync = await stack.enter_async_context(ConfigSync(control_plane, state))
            fatal: list[ReplicationFatal] = []
            provider = (lambda: snapshot(log)) if snapshot is not None else None
            replicator = Replicator(
                log,
                control_plane,
                sync,
                settings=ReplicationSettings(**settings),
                snapshot_provider=provider,
                on_fatal=fatal.append,
                acked_rev=acked_rev,
            )
            await stack.enter_async_context(replicator)
            return Agent(log, control_plane, state, sync, replicator, fatal)

        yield make


until = functools.partial(poll_until, every=0.001)  # the replication path is sub-ms


async def stored(pool: Pool, session_id: str) -> list[tuple[int, str, str]]:
    async with pool.acquire() as conn:
        return [(r.rev, r.hash_prev, r.hash) for r in await read_events(conn, session_id)]


def chain_of(log: CommitLog) -> list[tuple[int, str, str]]:
    return [(e.rev, e.hash_prev, e.hash) for e in log]


# -- replication -----------------------------------------------------------------------------


@pytest.mark.serial  # a 100 ms budget: alone, it measures replication, not the other workers
async def test_commits_reach_postgres_within_100ms_with_the_chain_intact(
    make_agent: AgentFactory, choird: Choird, pool: Pool
) -> None:
    agent = await make_agent()
    agent.commit(5)

    elapsed = await until(lambda: agent.replicator.acked_rev == 5)

    assert elapsed < 0.1
    assert await stored(pool, choird.session_id) == chain_of(agent.log)
    row = await choird.services.sessions.get(choird.session_id)
    assert (row.ack_rev, row.head_hash) == (5, agent.log.head_hash)


async def test_a_burst_of_commits_is_coalesced_into_few_heartbeats(
    make_agent: AgentFactory, choird: Choird, pool: Pool
) -> None:
    agent = await make_agent(coalesce_ms=50)
    for i in range(40):
        agent.commit(1, text=f"burst {i}")
        await asyncio.sleep(0.0005)

    await agent.replicator.flush(5)

    assert agent.replicator.stats.heartbeats <= 3
    assert agent.replicator.stats.events == 40
    assert await stored(pool, choird.session_id) == chain_of(agent.log)


async def test_a_backlog_ships_in_heartbeats_of_at_most_256_events(
    make_agent: AgentFactory, choird: Choird, pool: Pool
) -> None:
    log = CommitLog()
    for i in range(700):
        log.commit("edge", UserMsg(text=f"offline {i}"))
    agent = await make_agent(log, acked_rev=0)

    await agent.replicator.flush(10)

    assert agent.replicator.stats.heartbeats == 3  # 256 + 256 + 188
    assert await stored(pool, choird.session_id) == chain_of(log)


async def test_an_idle_agent_sends_signs_of_life_and_persists_nothing(
    make_agent: AgentFactory, choird: Choird, pool: Pool, clock: Clock
) -> None:
    agent = await make_agent(heartbeat_interval_ms=30)
    clock.advance(60_000)

    await until(lambda: agent.replicator.stats.heartbeats >= 3)

    row = await choird.services.sessions.get(choird.session_id)
    assert row.last_heartbeat_at == clock.now
    assert row.ack_rev == 0
    assert await stored(pool, choird.session_id) == []
    assert agent.replicator.stats.events == 0


async def test_an_intent_is_durable_when_make_durable_returns(
    make_agent: AgentFactory, choird: Choird, pool: Pool
) -> None:
    agent = await make_agent(coalesce_ms=10_000)  # only urgency can ship it in time
    agent.commit(2)
    [intent] = agent.commit(1, text="intent")

    started = time.monotonic()
    await agent.replicator.make_durable(intent)

    assert time.monotonic() - started < 0.5
    assert agent.replicator.acked_rev >= intent.rev
    assert [rev for rev, _, _ in await stored(pool, choird.session_id)] == [1, 2, 3]


async def test_a_reply_ships_at_once_rather_than_after_the_coalescing_window(
    make_agent: AgentFactory, choird: Choird, pool: Pool
) -> None:
    """Issue 13 point 7: choird delivers a reply to the DM once it is durable, and the reply
    used to wait `coalesce_ms` (25 ms) like any commit — on every answer the user waits for."""
    agent = await make_agent(coalesce_ms=10_000)  # only urgency can ship it in time
    agent.commit(2)
    reply = agent.log.commit("edge", AgentReplied(text="done", in_reply_to="m-1"))

    elapsed = await until(lambda: agent.replicator.acked_rev >= reply.rev)

    assert elapsed < 0.5
    assert [rev for rev, _, _ in await stored(pool, choird.session_id)] == [1, 2, 3]


async def test_an_intent_that_cannot_be_made_durable_fails_the_call(
    make_agent: AgentFactory, choird: Choird
) -> None:
    agent = await make_agent(intent_timeout_s=0.3)
    await choird.stop()
    [intent] = agent.commit(1, text="rm -rf build/")

    with pytest.raises(IntentNotDurable, match=r"rev 1\) was not acknowledged by choird within"):
        await agent.replicator.make_durable(intent)

    await choird.start()
    await agent.replicator.flush(5)


async def test_the_agent_keeps_working_while_choird_is_away_and_catches_up(
    make_agent: AgentFactory, choird: Choird, pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    agent = await make_agent()
    agent.commit(3)
    await until(lambda: agent.replicator.acked_rev == 3)
    await choird.stop()

    for i in range(10):
        agent.commit(1, text=f"offline {i}")
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)  # several failed retries
    assert (agent.log.head_rev, agent.replicator.acked_rev) == (13, 3)

    await choird.start()
    await until(lambda: agent.replicator.acked_rev == 13)

    assert await stored(pool, choird.session_id) == chain_of(agent.log)
    outages = [r for r in caplog.records if r.getMessage().startswith("choird unreachable")]
    assert len(outages) == 1
    assert agent.replicator.stats.failures >= 2
    assert agent.fatal == []


async def test_a_refused_base_rev_resyncs_to_choirds_ack(
    make_agent: AgentFactory, choird: Choird, pool: Pool
) -> None:
    log = CommitLog()
    for i in range(8):
        log.commit("edge", UserMsg(text=f"local {i}"))
    agent = await make_agent(log, acked_rev=5)  # believes choird holds 1..5; it holds nothing

    await agent.replicator.flush(5)

    assert await stored(pool, choird.session_id) == chain_of(log)
    assert agent.replicator.stats.failures == 1
    assert agent.fatal == []


async def test_a_fork_stops_replication_and_tells_the_runtime(
    make_agent: AgentFactory, choird: Choird
) -> None:
    first = await make_agent()
    first.commit(3, text="history A")
    await first.replicator.flush(5)
    other = CommitLog()
    for i in range(3):
        other.commit("edge", UserMsg(text=f"history B {i}"))

    forked = await make_agent(other, acked_rev=0)
    await until(lambda: bool(forked.fatal))

    assert "fork detected at rev 1" in forked.fatal[0].message
    assert forked.replicator.fatal is forked.fatal[0]
    with pytest.raises(IntentNotDurable, match="fork detected"):
        await forked.replicator.make_durable(other.commit("edge", UserMsg(text="more")))
    row = await choird.services.sessions.get(choird.session_id)
    assert row.status != SessionStatus.ACTIVE


async def test_a_payload_over_the_frame_limit_is_shipped_in_smaller_heartbeats(
    make_agent: AgentFactory, choird: Choird, pool: Pool
) -> None:
    agent = await make_agent(coalesce_ms=100)
    for i in range(30):
        agent.commit(1, text=f"{i} " + "x" * 60_000)  # 1.8 MB: over the 1 MiB frame

    await agent.replicator.flush(10)

    assert await stored(pool, choird.session_id) == chain_of(agent.log)
    assert agent.replicator.stats.heartbeats >= 2


async def test_snapshots_ride_heartbeats_every_k_events(
    make_agent: AgentFactory, choird: Choird, pool: Pool
) -> None:
    def snapshot(log: CommitLog) -> Snapshot:
        return Snapshot(rev=log.head_rev, hash=log.head_hash).sealed()

    agent = await make_agent(snapshot=snapshot, snapshot_every_events=10)
    agent.commit(4)
    await agent.replicator.flush(5)
    assert agent.replicator.stats.snapshots == 0

    agent.commit(8)
    await agent.replicator.flush(5)

    assert agent.replicator.stats.snapshots == 1
    async with pool.acquire() as conn:
        saved = await latest_snapshot(conn, choird.session_id, 1000)
    assert saved is not None
    assert saved.rev == 12
    assert saved.snapshot["hash"] == agent.log.head_hash


async def test_a_snapshot_too_large_for_a_heartbeat_is_skipped_and_the_events_still_ship(
    make_agent: AgentFactory, choird: Choird, pool: Pool
) -> None:
    huge = ReferenceSummary(summary="x" * 1_200_000)

    def snapshot(log: CommitLog) -> Snapshot:
        summaries = {"edge": huge}
        return Snapshot(
            rev=log.head_rev, hash=log.head_hash, reference_summaries=summaries
        ).sealed()

    agent = await make_agent(snapshot=snapshot, snapshot_every_events=2)
    agent.commit(3)
    await agent.replicator.flush(5)

    assert agent.replicator.acked_rev == 3
    assert agent.replicator.stats.snapshots == 0
    assert agent.fatal == []
    async with pool.acquire() as conn:
        assert await latest_snapshot(conn, choird.session_id, 1000) is None


async def test_stopping_flushes_what_was_committed(choird: Choird, pool: Pool) -> None:
    log = CommitLog()
    client = ReconnectingClient(
        choird.socket, session_id=choird.session_id, lease_token=choird.lease_token
    )
    control_plane = ControlPlane(client)
    sync = ConfigSync(control_plane, DynamicState())
    settings = ReplicationSettings(coalesce_ms=60_000)
    async with Replicator(log, control_plane, sync, settings=settings):
        log.commit("edge", UserMsg(text="goodbye"))
        log.commit("edge", UserMsg(text="for now"))
    await control_plane.close()

    assert await stored(pool, choird.session_id) == chain_of(log)


# -- config and secrets ----------------------------------------------------------------------


async def test_load_fetches_the_config_and_every_bound_secret(
    make_agent: AgentFactory, stage: ConfigStage
) -> None:
    agent = await make_agent()

    config = await agent.sync.load()

    assert config.version == stage.running.version == 1
    bindings = config.bindings
    assert bindings is not None
    assert config.secret_names() == set(allowed_secrets(stage.running.config, bindings))
    assert agent.state.secrets().names() == config.secret_names()
    assert agent.state.secrets().reveal("openrouter-key") == "sk-or-1"
    assert "sk-or-1" not in repr(agent.state.secrets())


async def test_a_config_version_bump_is_fetched_and_swapped_whole(
    make_agent: AgentFactory, choird: Choird, stage: ConfigStage, home: ChoirHome
) -> None:
    agent = await make_agent(heartbeat_interval_ms=20)
    await agent.sync.load()
    in_flight = agent.state.current()  # what a running tool call holds
    data = read_config(home)
    data["event_window_size"] = 77
    write_config(home, data)
    await stage.load()
    stage.apply()

    await until(lambda: agent.state.current().version == 2)

    assert agent.state.current().data["event_window_size"] == 77
    assert (in_flight.version, in_flight.data["event_window_size"]) == (1, 50)
    with pytest.raises(TypeError):
        in_flight.data["event_window_size"] = 1  # type: ignore[index]
    agent.commit(1)
    await agent.replicator.flush(5)
    row = await choird.services.sessions.get(choird.session_id)
    assert row.config_version == 2  # the agent reports what it runs


async def test_a_secrets_refreshed_push_swaps_in_the_new_values(
    make_agent: AgentFactory, choird: Choird, stage: ConfigStage, home: ChoirHome
) -> None:
    agent = await make_agent()
    await agent.sync.load()
    before = agent.state.secrets()
    SecretStore.load(home.secrets_file).with_secret("openrouter-key", "sk-or-2").save(
        home.secrets_file
    )
    await stage.reload_secrets()

    async def follow() -> None:
        async for envelope in agent.control_plane.pushes():
            agent.sync.notice(envelope.push)

    follower = asyncio.create_task(follow())
    try:
        await asyncio.sleep(0.05)  # subscribed
        push = SecretsRefreshedPush(secrets=["openrouter-key"])
        choird.hub.push(choird.session_id, push.model_dump(mode="json"))
        await until(lambda: agent.state.secrets().reveal("openrouter-key") == "sk-or-2")
    finally:
        follower.cancel()
        with pytest.raises(asyncio.CancelledError):
            await follower

    assert agent.state.secrets().reveal("openrouter-key") == "sk-or-2"
    assert before.reveal("openrouter-key") == "sk-or-1"  # the old snapshot never changes
    assert agent.state.secrets().names() == before.names()


def test_secret_names_follow_the_bindings(stage: ConfigStage) -> None:
    from choir.agent.replication.live_config import DynamicConfig
    from choir.daemon.agents.config_fetch import dynamic_config

    for agent_id in ("agent-1", AGENT):
        defaults = stage.running.config.agents[agent_id].defaults.model_dump()
        bindings = ResourceBindings.model_validate(
            {key: value or None for key, value in defaults.items()}
        )
        config = DynamicConfig.of(1, dynamic_config(stage.running.config, bindings))
        assert config.secret_names() == set(allowed_secrets(stage.running.config, bindings))


# -- failpoints ------------------------------------------------------------------------------


async def test_a_panic_before_a_heartbeat_is_fatal_and_propagates(
    choird: Choird, armed: Callable[[str], None]
) -> None:
    armed("heartbeat.before_send=panic")
    client = ReconnectingClient(
        choird.socket, session_id=choird.session_id, lease_token=choird.lease_token
    )
    control_plane = ControlPlane(client)
    fatal: list[ReplicationFatal] = []
    log = CommitLog()
    replicator = Replicator(
        log, control_plane, ConfigSync(control_plane, DynamicState()), on_fatal=fatal.append
    )
    await replicator.start()
    log.commit("edge", UserMsg(text="boom"))
    await until(lambda: bool(fatal))

    with pytest.raises(failpoints.FailpointPanic):
        await replicator.stop()
    await control_plane.close()
    assert "failpoint heartbeat.before_send: panic" in fatal[0].message


async def test_a_slow_ack_delays_durability(
    make_agent: AgentFactory, armed: Callable[[str], None]
) -> None:
    armed("heartbeat.after_send_before_ack=sleep(400)")
    agent = await make_agent(intent_timeout_s=0.1)
    [intent] = agent.commit(1)

    with pytest.raises(IntentNotDurable):
        await agent.replicator.make_durable(intent)
    await until(lambda: agent.replicator.acked_rev == 1)


_CRASHING_AGENT = """
import asyncio, sys
from choir.agent.kernel.commitlog import CommitLog
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.live_config import DynamicState
from choir.agent.replication.replicator import Replicator
from choir.agent.replication.link import ReconnectingClient
from choir.agent.replication.config_sync import ConfigSync
from choir.protocol import UserMsg

async def main():
    socket, session_id, lease = sys.argv[1:4]
    cp = ControlPlane(ReconnectingClient(socket, session_id=session_id, lease_token=lease))
    log = CommitLog()
    replicator = Replicator(log, cp, ConfigSync(cp, DynamicState()))
    await replicator.start()
    for i in range(4):
        log.commit("edge", UserMsg(text=f"last words {i}"))
    try:
        await replicator.flush(5)
        print("acked", replicator.acked_rev, flush=True)
    finally:
        print("cleanup", flush=True)

asyncio.run(main())
"""


async def test_a_crash_between_send_and_ack_leaves_the_events_durable(
    choird: Choird, pool: Pool
) -> None:
    env = {**os.environ, failpoints.ENV_VAR: "heartbeat.after_send_before_ack=exit"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CRASHING_AGENT,
        str(choird.socket),
        choird.session_id,
        choird.lease_token,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == failpoints.EXIT_CODE, stderr.decode()
    assert stdout == b""  # neither the ack nor any cleanup ran
    assert b"failpoint heartbeat.after_send_before_ack: exit" in stderr
    assert [rev for rev, _, _ in await stored(pool, choird.session_id)] == [1, 2, 3, 4]
