"""`choirctl usage [--agent A] [--model M] [--kind K] [--since 2026-11-01|7d] [--by …] [--json]`
(issue 19).

What agents' billed calls — LLM calls, TTS calls, choird's embedding of their memory — used and
cost, grouped; then each agent's spend today and this month against its caps. Unknown costs show
as `unknown` (with how many calls), never as $0.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Final

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.errors import UsageError

if TYPE_CHECKING:
    from choir.protocol.operator.answers import SpendView, UsageReport, UsageRow

GROUPINGS: Final = ("day", "model", "agent", "job", "agent_day", "kind")
KINDS: Final = ("llm", "embedding", "tts")
SINCE: Final = re.compile(r"^(\d{4}-\d{2}-\d{2}|\d{1,4}d)$")


@documented("usage")
def usage(
    agent_id: Annotated[
        str | None, typer.Option("--agent", help="One agent's calls (default: every agent's).")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="One model's calls (default: every model's).")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="From a UTC day (2026-11-01) or the last N days (7d)."),
    ] = None,
    by: Annotated[
        str, typer.Option("--by", help="Group per day, model, agent, job, agent_day or kind.")
    ] = "day",
    kind: Annotated[
        str | None,
        typer.Option("--kind", help="One kind of call: llm, embedding or tts (default: all)."),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.output import emit

    check_options(by, since, kind)
    data = with_choird(
        home,
        lambda choird: choird.usage(agent_id=agent_id, model=model, since=since, by=by, kind=kind),
    )
    emit(data, as_json, lambda: _show(data))


def check_options(by: str, since: str | None, kind: str | None = None) -> None:
    """Refuse a bad `--by`, `--since` or `--kind` before asking choird (one line, exit 2)."""
    if by not in GROUPINGS:
        raise UsageError(f"--by {by!r}: choose one of {', '.join(GROUPINGS)}")
    if kind is not None and kind not in KINDS:
        raise UsageError(f"--kind {kind!r}: choose one of {', '.join(KINDS)}")
    if since is not None and not SINCE.match(since):
        raise UsageError(
            f"--since {since!r}: give a UTC day as YYYY-MM-DD (2026-11-01) or Nd for the last "
            "N days (7d)"
        )


def usd(value: float | None, unknown_calls: int = 0) -> str:
    """A cost as shown: `$0.0123`, `unknown`, or `$0.0123 + 2 unknown`."""
    if value is None:
        return "unknown" if unknown_calls else "-"
    shown = f"${value:.4f}"
    return f"{shown} + {unknown_calls} unknown" if unknown_calls else shown


def _show(data: UsageReport) -> None:
    from choir.ctl.render.output import table, warn

    rows = [*data.rows, data.total] if data.rows else []
    if not rows:
        print("no billed calls recorded" + (f" since {data.since}" if data.since else ""))
    else:
        headers = (data.by, "calls", "prompt", "cached", "completion", "chars", "avg ms", "cost")
        table(headers, _cells(rows))
    if data.top_jobs:
        print("\ncostliest jobs:")
        table(
            ("agent", "job", "lane", "calls", "tokens", "cost"),
            [
                (
                    j.agent_id,
                    j.job_id,
                    j.lane,
                    j.calls,
                    j.tokens,
                    usd(j.cost_usd, j.unknown_cost_calls),
                )
                for j in data.top_jobs
            ],
        )
    if data.spend:
        print("\nspend (UTC):")
        table(("agent", "today", "day cap", "this month", "month cap"), _spend(data.spend))
    for spend in data.spend:
        if spend.cap_reached:
            warn(spend.cap_reached)


def _cells(rows: list[UsageRow]) -> list[tuple[object, ...]]:
    return [
        (
            row.key,
            row.calls,
            row.prompt_tokens,
            row.cached_tokens,
            row.completion_tokens,
            row.characters,
            row.latency_ms_avg,
            usd(row.cost_usd, row.unknown_cost_calls),
        )
        for row in rows
    ]


def _spend(spend: list[SpendView]) -> list[tuple[object, ...]]:
    from choir.core.spend import usd as money

    def cap(value: float | None) -> str:
        return money(value) if value is not None else "none"

    return [
        (
            s.agent_id,
            money(s.day_usd),
            cap(s.day_cap_usd),
            usd(s.month_usd, s.unknown_cost_calls),
            cap(s.month_cap_usd),
        )
        for s in spend
    ]
