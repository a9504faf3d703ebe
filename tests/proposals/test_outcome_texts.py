"""What a Telegram approval message's chat is told at each end of a proposal (§19.6, issue 17)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from choir.daemon.gateway.telegram.approvals import decided_line, outcome_text
from choir.store.approvals.pending import ApprovalRow

AT = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
SKILL = ApprovalRow(
    id="ap-1",
    session_id="s-1",
    agent_id="agent-1",
    request_type="skill",
    payload={"spec": {"name": "triage"}, "rationale": "notes pile up"},
    status="approved",
    created_at=AT,
    resolved_at=AT,
    resolved_by="phone",
    resolved_via="telegram",
)


def test_an_applied_kind_says_it_is_being_applied_then_how_it_ended() -> None:
    assert outcome_text(SKILL).endswith("Applying it: commit, merge, build, update.")
    applied = replace(SKILL, status="applied", outcome="commit abc on proposal/s-1/triage")
    assert outcome_text(applied).startswith("Applied: ")
    assert outcome_text(applied).endswith("commit abc on proposal/s-1/triage")
    failed = replace(SKILL, status="failed", outcome="build failed: skills/x.json: bad")
    assert "applying it failed" in outcome_text(failed)
    assert outcome_text(failed).endswith("build failed: skills/x.json: bad")


def test_an_approved_config_change_says_it_is_loaded_and_applied() -> None:
    change = replace(SKILL, request_type="config_change", payload={"summary": "shorter timeout"})
    assert outcome_text(change).endswith("Applying it: config load, config apply.")


def test_a_timeout_is_a_rejection_told_as_a_timeout() -> None:
    timed = replace(SKILL, status="rejected", resolved_by="timeout", resolved_via="timeout")
    assert outcome_text(timed).startswith("Approval timed out: ")
    assert outcome_text(timed).endswith("Rejected automatically.")
    assert decided_line(timed) == "Timed out at 2026-11-27 08:00:00 UTC: rejected automatically."
    assert decided_line(SKILL) == "Approved by phone at 2026-11-27 08:00:00 UTC."


def test_an_approved_tool_says_a_human_writes_it_then_what_and_where() -> None:
    tool = replace(
        SKILL,
        request_type="tool",
        payload={"manifest": {"llm": {"name": "weather.lookup"}}, "intended_behavior": "fetch"},
    )
    assert outcome_text(tool).endswith("Committing its manifest and a stub for a human to write.")
    waiting = replace(tool, outcome="awaiting implementation: choirctl tool register")
    assert outcome_text(waiting) == (
        "Approved: weather.lookup: fetch. awaiting implementation: choirctl tool register"
    )
