"""Sessions and leases against real Postgres: start, resume, singleton, conflicts, end, reap."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from choir.daemon.agents.refusals import RpcFault
from choir.daemon.agents.services import AgentServices
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import SessionEnded
from choir.errors import ConflictError, NotFoundError, UsageError
from choir.logs import REDACTED, replace_secrets
from choir.protocol import ErrorCode
from choir.store.leases import Resource, all_leases
from choir.store.postgres.pool import Pool
from choir.store.sessions import SessionStatus

from .conftest import Clock


async def leased(pool: Pool) -> dict[Resource, str]:
    """Every lease: resource -> holding session."""
    async with pool.acquire() as conn:
        return {lease.resource: lease.session_id for lease in await all_leases(conn)}


@pytest.fixture
def sessions(services: AgentServices) -> SessionService:
    return services.sessions


async def test_a_start_leases_the_defaults_and_stores_only_the_token_hash(sessions, pool):
    started = await sessions.start("agent-1", {})

    assert not started.resumed
    assert started.session_id.startswith("s-")
    assert started.bindings.model_dump() == {
        "workspace": "default",
        "llm": "demo",
        "voice_profile": None,
        "git_identity": "agent-1",
        "notion": None,
        "email": None,
        "dm": "console",
    }
    assert await leased(pool) == {
        Resource("agent", "agent-1"): started.session_id,
        Resource("workspace", "default"): started.session_id,
        Resource("git_identity", "agent-1"): started.session_id,
        Resource("dm", "console"): started.session_id,
    }
    row = await sessions.get(started.session_id)
    assert row.status == SessionStatus.ACTIVE
    assert row.lease_id == hashlib.sha256(started.lease_token.encode()).hexdigest()
    assert started.lease_token not in repr(started)


async def test_overrides_replace_defaults_and_shared_email_is_not_leased(sessions, pool):
    started = await sessions.start(
        "agent-1", {"workspace": "other", "llm": "sonnet", "voice-profile": "calm", "email": "news"}
    )

    assert (started.bindings.workspace, started.bindings.llm) == ("other", "sonnet")
    assert (started.bindings.voice_profile, started.bindings.email) == ("calm", "news")
    assert Resource("email", "news") not in await leased(pool)
    assert Resource("workspace", "other") in await leased(pool)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"workspace": "nope"},
            r"--workspace: no workspace named 'nope' \(known: default, other\)",
        ),
        ({"dm": "nobody"}, r"--dm: no DM named 'nobody' \(known: console, ops\)"),
        ({"colour": "red"}, r"unknown resource 'colour' \(known: workspace, llm, voice_profile"),
    ],
)
async def test_unknown_names_are_refused_listing_the_known_ones(sessions, pool, overrides, message):
    with pytest.raises(UsageError, match=message):
        await sessions.start("agent-1", overrides)
    assert await leased(pool) == {}


async def test_an_unknown_agent_is_not_found(sessions):
    with pytest.raises(NotFoundError, match=r"no agent named 'ghost' .*known: agent-1, agent-2"):
        await sessions.start("ghost", {})


@pytest.mark.parametrize("new_session", [False, True])
async def test_an_agent_runs_once(sessions, pool, new_session):
    first = await sessions.start("agent-1", {})

    with pytest.raises(
        ConflictError, match=rf"agent-1 is already running \(session {first.session_id}\)"
    ):
        await sessions.start("agent-1", {"workspace": "other"}, new_session=new_session)
    assert set((await leased(pool)).values()) == {first.session_id}


@pytest.mark.parametrize(
    ("role", "name", "noun"),
    [
        ("workspace", "other", "workspace"),
        ("git_identity", "agent-2", "git identity"),
        ("notion", "personal", "Notion integration"),
        ("email", "work", "email account"),
        ("dm", "ops", "DM"),
    ],
)
async def test_an_exclusive_resource_in_use_names_its_holder(sessions, pool, role, name, noun):
    holder = await sessions.start("agent-2", {})
    before = await leased(pool)

    with pytest.raises(ConflictError) as caught:
        await sessions.start("agent-1", {role: name})

    assert str(caught.value).startswith(
        f"{noun} '{name}' is leased to agent-2 (session {holder.session_id})"
    )
    assert await leased(pool) == before
    assert [row.agent_id for row in await sessions.recent()] == ["agent-2"]


async def test_concurrent_starts_for_one_workspace_lease_it_once(sessions, pool):
    results = await asyncio.gather(
        sessions.start("agent-1", {"workspace": "other"}),
        sessions.start("agent-2", {}),
        return_exceptions=True,
    )

    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1
    assert len(losers) == 1
    assert isinstance(losers[0], ConflictError)
    assert set((await leased(pool)).values()) == {winners[0].session_id}


async def test_concurrent_starts_of_one_agent_start_it_once(sessions, pool):
    results = await asyncio.gather(
        *(sessions.start("agent-1", {}, new_session=True) for _ in range(4)),
        return_exceptions=True,
    )

    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, ConflictError) for r in results if isinstance(r, BaseException))
    assert len(await sessions.recent("agent-1")) == 1


async def test_stop_releases_everything_and_the_next_start_is_new(sessions, pool):
    first = await sessions.start("agent-1", {})
    ended: list[SessionEnded] = []
    sessions.subscribe(ended.append)

    assert await sessions.stop(first.session_id, "operator stop")
    assert not await sessions.stop(first.session_id, "again")

    assert await leased(pool) == {}
    row = await sessions.get(first.session_id)
    assert (row.status, row.lease_id) == (SessionStatus.STOPPED, None)
    assert row.ended_at is not None
    assert ended == [
        SessionEnded(first.session_id, "agent-1", SessionStatus.STOPPED, "operator stop")
    ]
    second = await sessions.start("agent-1", {})
    assert (second.session_id != first.session_id, second.resumed) == (True, False)


@pytest.mark.parametrize("end", ["suspend", "crash"])
async def test_a_session_stopped_for_restart_or_crashed_is_resumed(sessions, end):
    first = await sessions.start("agent-1", {})
    if end == "suspend":
        await sessions.stop(first.session_id, "restart", SessionStatus.SUSPENDED)
    else:
        await sessions.mark_crashed(first.session_id, "container died")

    again = await sessions.start("agent-1", {"llm": "sonnet"})

    assert (again.session_id, again.resumed) == (first.session_id, True)
    assert again.lease_token != first.lease_token
    assert again.bindings.llm == "sonnet"
    with pytest.raises(RpcFault):
        await sessions.authenticate(first.session_id, first.lease_token)
    assert (await sessions.authenticate(again.session_id, again.lease_token)).agent_id == "agent-1"


async def test_new_session_forces_a_fresh_one_and_resume_picks_any(sessions):
    crashed = await sessions.start("agent-1", {})
    await sessions.mark_crashed(crashed.session_id, "container died")

    fresh = await sessions.start("agent-1", {}, new_session=True)
    assert (fresh.session_id != crashed.session_id, fresh.resumed) == (True, False)
    await sessions.stop(fresh.session_id, "stop")

    picked = await sessions.start("agent-1", {}, resume=crashed.session_id)
    assert (picked.session_id, picked.resumed) == (crashed.session_id, True)
    await sessions.stop(picked.session_id, "stop")
    # The stopped session `fresh` can be resumed explicitly too.
    assert (await sessions.start("agent-1", {}, resume=fresh.session_id)).resumed


async def test_resume_refuses_what_cannot_be_resumed(sessions):
    other = await sessions.start("agent-2", {})
    with pytest.raises(NotFoundError, match="agent-1 has no session"):
        await sessions.start("agent-1", {}, resume=other.session_id)
    with pytest.raises(NotFoundError, match="agent-1 has no session 's-nope'"):
        await sessions.start("agent-1", {}, resume="s-nope")
    with pytest.raises(UsageError, match="either --new-session or --resume"):
        await sessions.start("agent-1", {}, resume="s-nope", new_session=True)
    forked = await sessions.start("agent-1", {})
    await sessions.mark_forked(forked.session_id, "fork detected at rev 3")
    with pytest.raises(ConflictError, match="forked and cannot be resumed"):
        await sessions.start("agent-1", {}, resume=forked.session_id)
    # Nor is a forked session resumed by default: the next start is new.
    assert not (await sessions.start("agent-1", {})).resumed


async def test_tokens_are_checked_per_session(sessions, pool, stage, clock):
    one = await sessions.start("agent-1", {})
    two = await sessions.start("agent-2", {})

    ctx = await sessions.authenticate(one.session_id, one.lease_token)
    assert (ctx.session_id, ctx.agent_id, ctx.bindings) == (one.session_id, "agent-1", one.bindings)
    for session_id, token in [
        (one.session_id, two.lease_token),
        (one.session_id, one.lease_token[:-1] + "x"),
        (one.session_id, ""),
        ("s-unknown", one.lease_token),
    ]:
        with pytest.raises(RpcFault) as caught:
            await sessions.authenticate(session_id, token)
        assert caught.value.code == ErrorCode.UNAUTHORIZED
        assert caught.value.message == "unknown session or wrong lease token"

    # A choird that restarted (empty cache) checks the stored hash.
    restarted = SessionService(pool, stage, clock=clock)
    assert (await restarted.authenticate(two.session_id, two.lease_token)).agent_id == "agent-2"
    await sessions.stop(two.session_id, "stop")
    with pytest.raises(RpcFault):
        await SessionService(pool, stage).authenticate(two.session_id, two.lease_token)


async def test_sessions_without_heartbeat_are_reaped(sessions, pool, clock: Clock):
    quiet = await sessions.start("agent-1", {})
    clock.advance(6_000)
    lively = await sessions.start("agent-2", {})
    clock.advance(5_000)  # quiet: 11 s without a sign of life; lively: 5 s

    stale = await sessions.find_stale(clock(), 10_000)
    assert [row.session_id for row in stale] == [quiet.session_id]

    reaped = await sessions.reap()

    assert [row.session_id for row in reaped] == [quiet.session_id]
    assert (await sessions.get(quiet.session_id)).status == SessionStatus.CRASHED
    assert set((await leased(pool)).values()) == {lively.session_id}
    assert await sessions.reap() == []
    # The crashed session is resumed by the next start.
    assert (await sessions.start("agent-1", {})).session_id == quiet.session_id


async def test_orphans_of_a_previous_choird_are_crashed_at_startup(sessions, pool):
    kept = await sessions.start("agent-1", {})
    orphan = await sessions.start("agent-2", {})

    crashed = await sessions.reap_orphans({kept.session_id})

    assert [row.session_id for row in crashed] == [orphan.session_id]
    assert set((await leased(pool)).values()) == {kept.session_id}


async def test_terminate_ends_as_the_shutdown_asked(sessions):
    first = await sessions.start("agent-1", {})
    sessions.expect_shutdown(first.session_id, "update")

    assert await sessions.terminate(first.session_id, "done") == SessionStatus.SUSPENDED
    assert (await sessions.start("agent-1", {})).resumed


async def test_why_a_session_ended_is_kept_redacted_and_cleared_by_its_resume(
    sessions, clock: Clock
):
    """`status` shows an interrupted agent's cause from its session row (`end_reason`); an agent's
    own reason may quote a secret, which never reaches the row."""
    canary = "sk-canary-3f9e2d71"
    replace_secrets([canary])
    try:
        first = await sessions.start("agent-1", {})
        await sessions.mark_crashed(first.session_id, f"tool printed {canary} and died")
        assert (
            await sessions.get(first.session_id)
        ).end_reason == f"tool printed {REDACTED} and died"
    finally:
        replace_secrets([])
    again = await sessions.start("agent-1", {})
    assert again.session_id == first.session_id
    assert (await sessions.get(first.session_id)).end_reason is None  # active again
    clock.advance(60_000)
    await sessions.reap()
    row = await sessions.get(first.session_id)
    assert (row.status, row.end_reason) == (
        SessionStatus.CRASHED,
        "no heartbeat for more than 10000 ms",
    )
    long = await sessions.start("agent-2", {})
    await sessions.mark_crashed(long.session_id, "x" * 2000)  # an agent's whole traceback
    assert (await sessions.get(long.session_id)).end_reason == "x" * 500
