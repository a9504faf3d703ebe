"""The Usage tab: billed calls (LLM, TTS, embedding) and cost per agent per UTC day, the costliest
jobs, and each agent's spend against its caps (the `usage` verb, grouped `agent_day`, over the
last 30 days). `k` steps through the kinds of call counted: every kind, then each alone.

A cost nobody knows (no price configured, none reported) shows as `unknown`, never as $0; a
reached cap is shown in red with the line the agent's user was given. Re-read on mount, after a
resync, when sessions start or end, and with `f` — never on a timer.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static

from choir.errors import ChoirError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.messages import AgentsUpdated, SessionChanged
from tui.views.base import ChoirView

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")

SPAN: Final = "30d"
"""How far back the tab looks."""
KINDS: Final = (None, "llm", "tts", "embedding")
"""What `k` steps through: every kind of call (None), then each kind alone."""


def money(amount: float) -> str:
    """Cents from a dollar up, four decimals below (`$0.0034`), as the cap messages say it."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def usd(value: float | None, unknown_calls: int = 0) -> Text:
    """A cost as shown: `$0.0123`, `unknown` (dim yellow), or `$0.0123 + 2 unknown`."""
    if value is None:
        return Text("unknown", "yellow") if unknown_calls else Text("-", "dim")
    shown = Text(f"${value:.4f}")
    if unknown_calls:
        shown.append(f" + {unknown_calls} unknown", "yellow")
    return shown


class UsageView(ChoirView):
    """Per agent per day, top jobs, spend against caps; `f` reads them again."""

    VIEW_ID = "usage"
    TITLE = "Usage"

    DEFAULT_CSS = """
    UsageView #usage-spend { height: auto; padding: 0 1; }
    UsageView #usage-days { height: 2fr; }
    UsageView .usage-heading { height: auto; padding: 0 1; text-style: bold; }
    UsageView #usage-jobs { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "refresh", "Refresh"),
        Binding("k", "next_kind", "Kind"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.report: a.UsageReport | None = None
        """The last `usage` answer."""
        self.kind: str | None = None
        """The one kind of call counted (`KINDS`); None: every kind."""

    def compose(self) -> ComposeResult:
        yield Static("", id="usage-spend")
        yield Static(days_heading(None), id="usage-days-heading", classes="usage-heading")
        yield DataTable(id="usage-days", cursor_type="row", zebra_stripes=True)
        yield Static("Costliest core jobs", classes="usage-heading")
        yield DataTable(id="usage-jobs", cursor_type="row", zebra_stripes=True)

    def _table(self, name: str) -> DataTable[Any]:
        return self.query_one(f"#usage-{name}", DataTable)

    def on_mount(self) -> None:
        days = (
            "agent",
            "day",
            "calls",
            "prompt",
            "cached",
            "completion",
            "chars",
            "avg ms",
            "cost",
        )
        self._table("days").add_columns(*days)
        self._table("jobs").add_columns("agent", "job", "lane", "calls", "tokens", "cost")
        super().on_mount()
        self.read()

    def on_resynced(self) -> None:
        super().on_resynced()
        self.read()

    def on_session_changed(self, _: SessionChanged) -> None:
        self.read()

    def on_agents_updated(self, _: AgentsUpdated) -> None:
        self.read()

    def redraw(self) -> None:
        report = self.report
        if report is None:
            return
        self.query_one("#usage-spend", Static).update(spend_lines(report.spend))
        self.query_one("#usage-days-heading", Static).update(days_heading(report.kind))
        days = self._table("days")
        days.clear()
        for row in report.rows:
            agent, _, day = row.key.partition(" ")
            days.add_row(
                agent,
                day,
                row.calls,
                row.prompt_tokens,
                row.cached_tokens,
                row.completion_tokens,
                row.characters,
                row.latency_ms_avg,
                usd(row.cost_usd, row.unknown_cost_calls),
            )
        jobs = self._table("jobs")
        jobs.clear()
        for job in report.top_jobs:
            cost = usd(job.cost_usd, job.unknown_cost_calls)
            jobs.add_row(job.agent_id, job.job_id, job.lane, job.calls, job.tokens, cost)

    @work(group="usage-read", exclusive=True)
    async def read(self) -> None:
        if not self.bridge.connected:
            return  # the resync reads it once connected
        try:
            kind = {"kind": self.kind} if self.kind is not None else {}
            report = await self.bridge.ask(
                OperatorVerb.USAGE, a.UsageReport, by="agent_day", since=SPAN, **kind
            )
        except ChoirError:
            return  # not connected: the resync reads it again
        self.report = report
        if self.is_attached:  # the console may have closed while the call ran
            with contextlib.suppress(NoMatches):
                self.redraw()

    def action_refresh(self) -> None:
        self.read()

    def action_next_kind(self) -> None:
        self.kind = KINDS[(KINDS.index(self.kind) + 1) % len(KINDS)]
        self.read()


def days_heading(kind: str | None) -> str:
    counted = f"{kind} calls" if kind else "calls of every kind (k: one kind)"
    return f"Calls per agent per UTC day (last {SPAN}): {counted}"


def spend_lines(spend: list[a.SpendView]) -> Text:
    """One line per agent: today and this month against the caps; a reached cap in red."""
    text = Text()
    for view in spend:
        if text:
            text.append("\n")
        text.append(view.agent_id, "bold")
        text.append(f"  today {money(view.day_usd)}")
        text.append(f" of {money(view.day_cap_usd)}" if view.day_cap_usd is not None else "")
        text.append(f"  this month {money(view.month_usd)}")
        text.append(f" of {money(view.month_cap_usd)}" if view.month_cap_usd is not None else "")
        if view.unknown_cost_calls:
            text.append(f"  (+{view.unknown_cost_calls} calls of unknown cost)", "yellow")
        if view.cap_reached:
            text.append(f"\n  {view.cap_reached}", "red")
    return text or Text("No agents configured.", "dim")
