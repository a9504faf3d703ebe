"""`usage` (issue 19): what agents' LLM, TTS and embedding calls used and cost, and each
agent's spend against its caps (also shown by `agent status`).

Days are UTC days, as the spend caps count them. An agent or model no longer in config.json
is still reported while it has recorded calls; a name that is neither configured nor recorded
is refused (NotFoundError, exit 4) naming where the known ones are listed.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from choir.core.spend import Spent, cap_refusal, day_of
from choir.daemon.operator.context import OperatorContext
from choir.errors import NotFoundError, UsageError
from choir.protocol.operator import answers as a
from choir.protocol.operator import requests as r
from choir.store.usage import UsageFilter, has_calls, spent, top_jobs, usage_report


async def usage(ctx: OperatorContext, request: r.UsageRequest) -> a.UsageReport:
    """Calls grouped as asked, their total, the costliest jobs and every agent's spend."""
    await _require_known(ctx, request)
    now = ctx.clock()
    since = since_day(request.since, now)
    where = UsageFilter(
        request.agent_id,
        request.model,
        _midnight(since) if since is not None else None,
        request.kind,
    )
    async with ctx.pool.acquire() as conn:
        rows = [a.UsageRow(**row) for row in await usage_report(conn, request.by, where)]
        jobs = [a.JobUsage(**row) for row in await top_jobs(conn, where)]
    agents = [request.agent_id] if request.agent_id else sorted(ctx.config.agents)
    return a.UsageReport(
        by=request.by,
        agent_id=request.agent_id,
        model=request.model,
        kind=request.kind,
        since=since.isoformat() if since is not None else None,
        rows=rows,
        total=_total(rows),
        top_jobs=jobs,
        spend=[await spend_view(ctx, agent_id, now) for agent_id in agents],
    )


async def spend_view(ctx: OperatorContext, agent_id: str, now: datetime) -> a.SpendView:
    """The agent's spend today and this month, its caps, and the cap that stops it if any."""
    day_start = _midnight(now.astimezone(UTC).date())
    async with ctx.pool.acquire() as conn:
        known = await spent(conn, agent_id, day_start, day_start.replace(day=1))
    agent = ctx.config.agents.get(agent_id)
    cap = agent.spend_cap if agent is not None else None
    figures = Spent(day_of(day_start), known.day_usd, known.month_usd)
    return a.SpendView(
        agent_id=agent_id,
        day=figures.day,
        day_usd=round(known.day_usd, 6),
        month_usd=round(known.month_usd, 6),
        day_cap_usd=cap.day_usd if cap is not None else None,
        month_cap_usd=cap.month_usd if cap is not None else None,
        unknown_cost_calls=known.unknown_cost_calls,
        cap_reached=cap_refusal(agent_id, cap, figures),
    )


def since_day(since: str | None, now: datetime) -> date | None:
    """The first UTC day a `--since` names: `2026-11-01`, or `7d` for today and the 6 before."""
    if since is None:
        return None
    today = now.astimezone(UTC).date()
    if since.endswith("d"):
        days = int(since[:-1])
        if days < 1:
            raise UsageError("--since 0d counts no day: give 1d (today) or more")
        return today - timedelta(days=days - 1)
    try:
        return date.fromisoformat(since)
    except ValueError:
        raise UsageError(
            f"--since {since!r} is not a date: give a UTC day as YYYY-MM-DD, or Nd for the "
            "last N days"
        ) from None


async def _require_known(ctx: OperatorContext, request: r.UsageRequest) -> None:
    agent, model = request.agent_id, request.model
    async with ctx.pool.acquire() as conn:
        if (
            agent is not None
            and agent not in ctx.config.agents
            and not await has_calls(conn, agent_id=agent)
        ):
            known = ", ".join(sorted(ctx.config.agents)) or "none configured"
            raise NotFoundError(
                f"no agent named {agent!r} in the running config or with recorded calls "
                f"(known: {known}); see choirctl agent list"
            )
        if (
            model is not None
            and model not in ctx.config.models
            and not await has_calls(conn, model=model)
        ):
            known = ", ".join(sorted(ctx.config.models)) or "none configured"
            raise NotFoundError(
                f"no model named {model!r} in the running config or with recorded calls "
                f"(known: {known}); see choirctl model list"
            )


def _total(rows: list[a.UsageRow]) -> a.UsageRow:
    costs = [row.cost_usd for row in rows if row.cost_usd is not None]
    calls = sum(row.calls for row in rows)
    latency = sum(row.latency_ms_avg * row.calls for row in rows)
    return a.UsageRow(
        key="total",
        calls=calls,
        prompt_tokens=sum(row.prompt_tokens for row in rows),
        completion_tokens=sum(row.completion_tokens for row in rows),
        cached_tokens=sum(row.cached_tokens for row in rows),
        characters=sum(row.characters for row in rows),
        latency_ms_avg=latency // calls if calls else 0,
        cost_usd=sum(costs) if costs else None,
        unknown_cost_calls=sum(row.unknown_cost_calls for row in rows),
    )


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
