"""`status`, `agent.list`, `agent.status` (§17.1 Observability, §17.7 "who is behind").

An agent's state comes from its latest session: `running` while a session is active (its leases
held, its heartbeats expected), `crashed` when the last one crashed or forked, else `stopped`.
An agent whose latest session crashed, forked or was suspended is `interrupted`
(`agent_outage`): `status` lists them, `agent.list`/`agent.status` describe each — why, when,
and the `choirctl agent start` that brings it back.
`agent.status` also shows the latest session's per-tool p50/p95 and lock waits, read from its
replicated events (`choir.store.tool_stats`). Lane states, the active skill and remaining
budgets come from the lanes' REPORT_STATUS, and
so do core jobs held after a crash: `status` counts them, an agent lists its own, each with the
`choirctl session recover` command that decides it.

choird's own problems come from its health (`choir.daemon.health.board`): Postgres `degraded` with
the reason (down, being restarted, how many attempts), and `disk` `full` or `io_error` naming the
path — reported where they happened, so `status` answers at once even while Postgres is down.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from typing import Any, Final

from choir import __version__
from choir.core.held_jobs import recover_command
from choir.core.integrations import AGENT_REPO, unavailable_tools
from choir.daemon.images.repo_refresh import repo_status
from choir.daemon.memory.keys import classes_of
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.gateways import gateway_views
from choir.daemon.operator.usage import spend_view
from choir.daemon.operator.views import agent_state, held_view, iso, lane_view, seconds_between
from choir.daemon.sessions.outage import outage_view
from choir.daemon.staging.diff import render_changes
from choir.protocol.operator.answers import (
    AgentCounts,
    AgentList,
    AgentStatus,
    HeldJobs,
    HeldJobView,
    MemoryStale,
    RepoView,
    Sockets,
    StatusAnswer,
)
from choir.protocol.operator.requests import AgentRef, NoArguments
from choir.protocol.operator.views import (
    AgentSummary,
    HeldView,
    LockWaitView,
    OutageView,
    ProblemFields,
    ToolLatencyView,
)
from choir.store.agents import image_of
from choir.store.sessions import SessionRow, SessionStatus
from choir.store.tool_stats import lock_waits, tool_latencies

POSTGRES_PROBE_TIMEOUT_S: Final = 1.0
"""`status` answers within about this long even when Postgres hangs."""


async def status(ctx: OperatorContext, _: NoArguments) -> StatusAnswer:
    """choird's health: version, uptime, config, Postgres, gateways, agents, approvals."""
    running = ctx.stage.running
    postgres = await _postgres(ctx)
    agents = AgentCounts(total=len(ctx.config.agents), running=None, interrupted=None)
    pending: int | None = None
    latest: dict[str, SessionRow | None] = {}
    if postgres.state == "ok":
        latest = await _latest_sessions(ctx)
        agents = AgentCounts(
            total=agents.total,
            running=sum(agent_state(row) == "running" for row in latest.values()),
            interrupted=[_outage(view) for row in latest.values() if (view := outage_view(row))],
        )
        pending = len(await ctx.services.approvals.list())
    now = ctx.clock()
    return StatusAnswer(
        version=__version__,
        started_at=iso(ctx.started_at),
        uptime_s=seconds_between(ctx.started_at, now),
        config_version=running.version,
        config_hash=running.loaded.config_hash,
        config_staged=ctx.stage.staged is not None,
        postgres=postgres,
        disk=_disk(ctx),
        gateways=gateway_views(ctx),
        agents=agents,
        approvals_pending=pending,
        held_jobs=_held_jobs(ctx, latest),
        repos=[RepoView.model_validate(repo) for repo in repo_status(ctx.home, ctx.config)],
        sockets=Sockets(operator=str(ctx.home.operator_socket), agents=str(ctx.home.agent_socks)),
        memory_reembed=_stale_memory(ctx),
        config_pending=render_changes(ctx.stage.pending()),
    )


def _stale_memory(ctx: OperatorContext) -> list[MemoryStale]:
    stale = ctx.vector_models.stale() if ctx.vector_models is not None else {}
    return [MemoryStale(agent_id=a, model=m.name, dims=m.dims) for a, m in sorted(stale.items())]


def _outage(view: dict[str, Any] | None) -> OutageView | None:
    return OutageView.model_validate(view) if view is not None else None


async def _postgres(ctx: OperatorContext) -> ProblemFields:
    """The known problem if there is one (no probe: it would only time out), else a probe."""
    problem = ctx.health.problem("postgres")
    if problem is None:
        return await probe_postgres(ctx)
    return ProblemFields(state="degraded", problem=problem.state, **_problem_fields(problem.view()))


def _disk(ctx: OperatorContext) -> ProblemFields:
    problem = ctx.health.problem("disk")
    if problem is None:
        return ProblemFields(state="ok")
    return ProblemFields(state=problem.state, **_problem_fields(problem.view()))


def _problem_fields(view: dict[str, Any]) -> dict[str, Any]:
    return {key: view[key] for key in ("reason", "since", "where", "restarts")}


def _held_jobs(ctx: OperatorContext, latest: dict[str, SessionRow | None]) -> HeldJobs:
    """Core jobs held after a crash in every session: how many, which, and what decides them
    (from the agents' reports, so it answers while Postgres is down too — without agent ids)."""
    agent_of = {row.session_id: agent_id for agent_id, row in latest.items() if row is not None}
    jobs = [
        HeldJobView(
            agent_id=agent_of.get(session_id),
            **held_view(session_id, lane, calls).model_dump(mode="json"),
        )
        for session_id, lanes in ctx.services.status.held().items()
        for lane, calls in lanes.items()
    ]
    sessions = sorted({job.session_id for job in jobs})
    hint = None
    if jobs:
        hint = recover_command(sessions[0]) if len(sessions) == 1 else recover_command("<session>")
    return HeldJobs(count=len(jobs), jobs=jobs, hint=hint)


async def probe_postgres(ctx: OperatorContext) -> ProblemFields:
    """`SELECT 1` within a second: `ok` with its latency, or `degraded` with the reason."""
    began = time.perf_counter()
    try:
        async with asyncio.timeout(POSTGRES_PROBE_TIMEOUT_S), ctx.pool.acquire() as conn:
            await conn.fetchval("SELECT 1")
    except TimeoutError:
        reason = f"no answer to SELECT 1 within {POSTGRES_PROBE_TIMEOUT_S:g} s"
        return ProblemFields(state="degraded", reason=reason)
    except Exception as error:  # any driver or socket failure means the same to the operator
        reason = str(error).splitlines()[0] or type(error).__name__
        return ProblemFields(state="degraded", reason=reason)
    latency = round((time.perf_counter() - began) * 1000, 2)
    return ProblemFields(state="ok", latency_ms=latency)


async def agent_list(ctx: OperatorContext, _: NoArguments) -> AgentList:
    """Every configured agent with its state, session, uptime, config version and bindings."""
    latest = await _latest_sessions(ctx)
    return AgentList(
        agents=[_agent_summary(ctx, agent_id, latest[agent_id]) for agent_id in latest]
    )


async def agent_status(ctx: OperatorContext, request: AgentRef) -> AgentStatus:
    """One agent in detail (§17.1): lanes, skill, budgets, bindings, uptime, config version,
    runtime and image."""
    ctx.require_agent(request.agent_id)
    row = await ctx.latest_session(request.agent_id)
    active = _active(row)
    lanes = ctx.services.status.lanes(active.session_id) if active is not None else {}
    edge = lanes.get("edge")
    latest_version = ctx.stage.running.version
    summary = _agent_summary(ctx, request.agent_id, row)
    return AgentStatus(
        **dict(summary),
        config_version_latest=latest_version,
        config_behind=active is not None and active.config_version != latest_version,
        last_heartbeat_at=iso(row.last_heartbeat_at) if row is not None else None,
        ack_rev=row.ack_rev if row is not None else None,
        ended_at=iso(row.ended_at) if row is not None else None,
        skill=edge.report.skill if edge is not None else None,
        budgets=ctx.config.budgets.model_dump(mode="json"),
        budget_remaining=edge.report.budget_remaining if edge is not None else {},
        lanes=[lane_view(active.session_id, lane) for lane in lanes.values()] if active else [],
        image=await _image(ctx, request.agent_id),
        unavailable_tools=_unavailable_tools(ctx, summary.bindings, request.agent_id),
        **(await _tool_figures(ctx, row.session_id) if row is not None else {}),
        spend=await spend_view(ctx, request.agent_id, ctx.clock()),
        link=ctx.services.sessions.link_of(active.session_id) if active is not None else None,
    )


def _unavailable_tools(
    ctx: OperatorContext, bindings: dict[str, Any], agent_id: str
) -> dict[str, str]:
    """What the agent withholds from its model under these bindings (the running session's, or
    the defaults a start would bind), from the config and secrets choird serves it."""
    config = ctx.config
    data: dict[str, Any] = {
        name: {key: entry.model_dump(mode="json") for key, entry in section.items()}
        for name, section in (
            ("search", config.search),
            ("tts", config.tts),
            ("voice_profiles", config.voice_profiles),
        )
    }
    data["bindings"] = {"voice_profile": bindings.get("voice_profile")}
    bound: dict[str, Any] = {}
    if (notion := config.notion_integrations.get(str(bindings.get("notion") or ""))) is not None:
        bound["notion"] = notion.model_dump(mode="json")
    if (email := config.email_accounts.get(str(bindings.get("email") or ""))) is not None:
        bound["email"] = email.model_dump(mode="json")
    data["bound"] = bound
    data["host_unavailable"] = ctx.services.host_tools.unavailable()
    data[AGENT_REPO], data["agent_repo_unavailable"] = _clone_source(ctx, agent_id)
    return unavailable_tools(data, frozenset(ctx.stage.secrets.names()))


def _clone_source(ctx: OperatorContext, agent_id: str) -> tuple[str | None, str | None]:
    """(the repo path the agent is given to clone, or None and why not), as its runtime says."""
    runtime = ctx.lifecycle.runtime if ctx.lifecycle is not None else None
    if runtime is None:
        return None, "this choird starts no agents: none is given a repo to clone"
    source = runtime.clone_source(agent_id, ctx.config)
    return (source[0], None) if isinstance(source, tuple) else (None, source)


async def _tool_figures(ctx: OperatorContext, session_id: str) -> dict[str, Any]:
    """The session's per-tool p50/p95 and lock waits, from its replicated events (§22.1)."""
    async with ctx.pool.acquire() as conn:
        tools = await tool_latencies(conn, session_id)
        waits = await lock_waits(conn, session_id)
    return {
        "tools": [ToolLatencyView.model_validate(asdict(tool)) for tool in tools],
        "lock_wait": LockWaitView.model_validate(asdict(waits)),
    }


async def _image(ctx: OperatorContext, agent_id: str) -> dict[str, Any] | None:
    """The version.json of what the agent was last started from (what INIT_HELLO checks)."""
    async with ctx.pool.acquire() as conn:
        return await image_of(conn, agent_id)


async def _latest_sessions(ctx: OperatorContext) -> dict[str, SessionRow | None]:
    return {agent_id: await ctx.latest_session(agent_id) for agent_id in sorted(ctx.config.agents)}


def _active(row: SessionRow | None) -> SessionRow | None:
    return row if row is not None and row.status == SessionStatus.ACTIVE else None


def _agent_summary(ctx: OperatorContext, agent_id: str, row: SessionRow | None) -> AgentSummary:
    active = _active(row)
    defaults = ctx.config.agents[agent_id].defaults.model_dump(mode="json")
    return AgentSummary(
        agent_id=agent_id,
        state=agent_state(row),
        session_id=row.session_id if row is not None else None,
        session_status=row.status.value if row is not None else None,
        started_at=iso(active.started_at) if active else None,
        uptime_s=seconds_between(active.started_at, ctx.clock()) if active else None,
        config_version=row.config_version if row is not None else None,
        bindings=active.resource_bindings if active else defaults,
        held_jobs=_held_of(ctx, active) if active else [],
        interrupted=_outage(outage_view(row)),
        **_runtime_of(ctx, agent_id),
        encrypted_memories=sorted(c.value for c in classes_of(ctx.config.agents, agent_id)),
    )


def _held_of(ctx: OperatorContext, active: SessionRow) -> list[HeldView]:
    """The session's core jobs held after a crash, each with the command that decides it."""
    lanes = ctx.services.status.held().get(active.session_id, {})
    return [held_view(active.session_id, lane, calls) for lane, calls in lanes.items()]


def _runtime_of(ctx: OperatorContext, agent_id: str) -> dict[str, Any]:
    """Where the agent runs: the runtime's name, whether it is sandboxed, its pid and container,
    and its last security profile check (`agent verify`)."""
    if ctx.lifecycle is None:
        return dict.fromkeys(("runtime", "sandboxed", "pid", "container", "verified"))
    runtime = ctx.lifecycle.runtime
    process = runtime.running(agent_id)
    verified = process.verified if process is not None else None
    return {
        "runtime": runtime.name if process is not None else None,
        "sandboxed": runtime.sandboxed if process is not None else None,
        "pid": process.pid if process is not None else None,
        "container": process.container if process is not None else None,
        "verified": verified.as_dict() if verified is not None else None,
    }
