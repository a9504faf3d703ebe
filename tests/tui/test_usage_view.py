"""The Usage tab (issue 19): calls and cost per agent per day, the costliest jobs, and each
agent's spend against its caps — a cost nobody knows shown as `unknown`, a reached cap in red.

The console never connects (`tests/tui/sample.py`); the tab is handed the `usage` answer choird
would give. Regenerate the picture after an intended change with `--snapshot-update`.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Static

from choir.protocol.operator.answers import UsageReport
from choir.protocol.operator.views import EventView
from tests.tui.conftest import Live
from tests.tui.pilot import console, until
from tests.tui.pilot import show_tab as tab
from tests.tui.sample import sample_app
from tests.tui.test_actions_snapshots import SIZE, showing
from tui.app import ChoirApp
from tui.views.usage import UsageView, spend_lines, usd
from tui.widgets.event_text import summary

CAP_LINE = (
    "spend cap reached: agent default has spent $0.0034 today (2026-03-14 UTC), its cap "
    "agents.default.spend_cap.day_usd is $0.0030; no model call is made until the day ends or "
    "the cap is raised (edit config.json, then choirctl config load and choirctl config apply)"
)


def row(key: str, calls: int, cost: float | None, unknown: int = 0) -> dict[str, Any]:
    return {
        "key": key,
        "calls": calls,
        "prompt_tokens": 1200 * calls,
        "completion_tokens": 90 * calls,
        "cached_tokens": 400 * calls,
        "latency_ms_avg": 840,
        "cost_usd": cost,
        "unknown_cost_calls": unknown,
    }


def spend(agent: str, day: float, cap: float | None, reached: str | None) -> dict[str, Any]:
    return {
        "agent_id": agent,
        "day": "2026-03-14",
        "day_usd": day,
        "month_usd": day * 3,
        "day_cap_usd": cap,
        "month_cap_usd": None,
        "unknown_cost_calls": 0,
        "cap_reached": reached,
    }


REPORT = UsageReport.model_validate(
    {
        "by": "agent_day",
        "agent_id": None,
        "model": None,
        "since": "2026-02-13",
        "rows": [
            row("default 2026-03-13", 14, 0.0411),
            row("default 2026-03-14", 3, 0.0034),
            row("review 2026-03-14", 2, None, unknown=2),
        ],
        "total": row("total", 19, 0.0445, unknown=2),
        "top_jobs": [
            {
                "agent_id": "default",
                "job_id": "j-5f0c9a2e",
                "lane": "core:digest",
                "calls": 6,
                "tokens": 9100,
                "cost_usd": 0.0187,
                "unknown_cost_calls": 0,
            }
        ],
        "spend": [spend("default", 0.0034, 0.003, CAP_LINE), spend("review", 0.0, None, None)],
    }
)


def with_usage(app: ChoirApp) -> None:
    view = app.query_one(UsageView)
    view.report = REPORT
    view.redraw()


def test_usage_snapshot(snap_compare: Any) -> None:
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=showing("usage", with_usage))


def test_unknown_costs_are_shown_as_unknown_never_as_zero() -> None:
    assert usd(None, 2).plain == "unknown"
    assert usd(0.0411, 2).plain == "$0.0411 + 2 unknown"
    assert usd(None, 0).plain == "-"  # no call at all


def test_a_reached_cap_is_a_red_line_under_its_agent() -> None:
    text = spend_lines(REPORT.spend)
    assert "default  today $0.0034 of $0.0030" in text.plain
    assert CAP_LINE in text.plain
    red = [text.plain[span.start : span.end] for span in text.spans if span.style == "red"]
    assert red == [f"\n  {CAP_LINE}"]


def test_the_timeline_shows_a_calls_tokens_latency_and_cost() -> None:
    payload: dict[str, Any] = {
        "kind": "llm_call",
        "lane": "edge",
        "model": "sonnet",
        "prompt_tokens": 1000,
        "completion_tokens": 200,
        "cached_tokens": 400,
        "latency_ms": 840,
        "cost_usd": 0.0034,
    }

    def shown(**changes: Any) -> str:
        view = EventView(
            rev=7,
            lane="edge",
            event_type="llm_call",
            created_at=None,
            hash="0" * 64,
            payload={**payload, **changes},
            artifact=None,
        )
        return summary(view)

    assert shown() == "sonnet 1000+200 tokens (400 cached), 840 ms, $0.0034"
    assert shown(cost_usd=None, cached_tokens=0) == "sonnet 1000+200 tokens, 840 ms, cost unknown"


async def test_k_steps_through_the_kinds_of_call_counted(live: Live) -> None:
    """Issue 19: TTS and embedding calls are usage too; the tab counts one kind at a time on `k`
    — each step a `usage` read of choird with that kind."""
    async with console(live.home) as (app, pilot):
        await tab(pilot, "usage")
        view = app.query_one(UsageView)
        await until(pilot, lambda: view.report is not None)
        assert view.report is not None
        assert view.report.kind is None
        heading = app.query_one("#usage-days-heading", Static)

        for kind in ("llm", "tts", "embedding", None):
            await pilot.press("k")
            await until(
                pilot, lambda kind=kind: view.report is not None and view.report.kind == kind
            )
            shown = str(heading.content)
            assert (f"{kind} calls" if kind else "calls of every kind") in shown
