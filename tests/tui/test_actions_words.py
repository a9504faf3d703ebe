"""How the Approvals tab words approvals, and how palette actions build their payloads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from choir.protocol.operator.views import ApprovalView
from tui.actions import ACTIONS, RESOLVER
from tui.views.approvals_detail import (
    COLLAPSED_LINES,
    age,
    collapse,
    countdown,
    detail_blocks,
    duration,
    patch_changes,
    resolution,
    summary,
)

NOW = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def approval_at(created_at: str | None, **fields: Any) -> ApprovalView:
    """An approval created at `created_at`; `fields` replace the rest."""
    row: dict[str, Any] = {
        "approval_id": "ap-1",
        "agent_id": "agent-1",
        "session_id": "s-1",
        "request_type": "config_change",
        "status": "pending",
        "created_at": created_at,
        "resolved_at": None,
        "resolved_by": None,
        "payload": {},
    }
    return ApprovalView.model_validate({**row, **fields})


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (59.9, "59s"), (60, "1m00s"), (3599, "59m59s"), (3600, "1h00m"), (-5, "0s")],
)
def test_durations_show_the_two_largest_units(seconds: float, shown: str):
    assert duration(seconds) == shown


def test_age_and_countdown_run_from_created_at():
    approval = approval_at((NOW - timedelta(minutes=2)).isoformat())
    assert age(approval, NOW) == "2m00s"
    assert countdown(approval, NOW, 300_000) == "3m00s"
    assert countdown(approval, NOW, 120_000) == "due"
    assert countdown(approval, NOW, None) == "?"
    assert age(approval_at(None), NOW) == "?"


def test_summaries_prefer_the_proposals_own_words():
    assert summary({"summary": "  Raise  the\nlimit ", "rationale": "x"}) == "Raise the limit"
    assert summary({"manifest": {"llm": {"name": "weather.lookup"}}}) == "manifest weather.lookup"
    assert summary({"spec": {"name": "triage"}}) == "spec triage"
    assert summary({"z": 1, "a": "b" * 100}, width=20) == '{"a": "bbbbbbbbbbbb…'


def test_a_merge_patch_reads_as_the_changes_it_makes():
    config = {"approval_timeout_ms": 1_800_000, "models": {"demo": {"temperature": None}}, "x": 1}
    patch = {
        "approval_timeout_ms": 600_000,
        "models": {"demo": {"temperature": 0.2}, "new": {"provider": "openrouter"}},
        "x": None,
        "gone": None,
        "same": None,
        "event_window_size": 60,
    }
    assert patch_changes(config, patch) == [
        "~ approval_timeout_ms: 1800000 → 600000",
        "+ event_window_size: 60",
        "~ models.demo.temperature: null → 0.2",
        '+ models.new: {"provider": "openrouter"}',
        "- x",
    ]


def test_long_blocks_collapse_until_expanded():
    lines = [str(n) for n in range(COLLAPSED_LINES + 5)]
    assert collapse(lines, expanded=False) == (lines[:COLLAPSED_LINES], 5)
    assert collapse(lines, expanded=True) == (lines, 0)
    assert collapse(lines[:3], expanded=False) == (lines[:3], 0)


def test_the_detail_lists_prose_first_then_structured_fields():
    approval = approval_at(
        NOW.isoformat(),
        status="rejected",
        resolved_by="timeout",
        payload={"patch": {"a": 1}, "rationale": "why", "summary": "what"},
    )
    blocks = detail_blocks(approval, {"a": 0})
    assert [title for title, _ in blocks] == [
        "ap-1",
        "summary",
        "rationale",
        "changes to the running config",
    ]
    assert blocks[0][1][3] == "status    rejected (timed out)"
    assert blocks[-1][1] == ["~ a: 0 → 1"]
    assert detail_blocks(approval, None)[-1] == ("patch", ["{", '  "a": 1', "}"])
    approved = approval_at(None, status="approved", resolved_by="choirctl")
    assert resolution(approved) == "approved by choirctl"


def test_payloads_carry_the_answers_and_the_fixed_fields():
    by_title = {action.title: action for action in ACTIONS}
    approve = by_title["Approval: approve"]
    assert approve.payload({"approval_id": "ap-1"}) == {"approval_id": "ap-1", "by": RESOLVER}
    decide = by_title["Session: decide interrupted calls (resume/read-only/abort)"]
    assert decide.payload({"session_id": "s-1", "choice": "read-only", "job_name": ""}) == {
        "session_id": "s-1",
        "choice": "read_only",
    }
    compact = by_title["Session: compact working memory"]
    assert compact.payload({"session_id": "s-1", "lane": ""}) == {"session_id": "s-1"}
