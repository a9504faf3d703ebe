"""What `agent stop` says of the session summary (§11.8): a table of outcomes -> answers."""

from __future__ import annotations

from typing import Any

import pytest

from choir.daemon.sessions.stop_summary import summary_view
from choir.protocol.wire.payloads import SummaryOutcome, TerminateSelfRequest

CASES: dict[str, tuple[SummaryOutcome | None, int, dict[str, Any]]] = {
    "stored": (
        SummaryOutcome(rev=12, timeout_ms=30_000),
        12,
        {"stored": True, "rev": 12, "skipped": None, "warn": False, "detail": "stored (rev 12)"},
    ),
    "made but never flushed": (
        SummaryOutcome(rev=12, timeout_ms=30_000),
        11,
        {"stored": False, "skipped": "not_flushed", "warn": True},
    ),
    "timed out": (
        SummaryOutcome(skipped="timed_out", timeout_ms=30_000),
        11,
        {
            "stored": False,
            "skipped": "timed_out",
            "warn": True,
            "detail": "skipped: the model did not answer within 30 s (summary_timeout_ms in "
            "config.json)",
        },
    ),
    "hurried by SIGTERM": (
        SummaryOutcome(skipped="hurried", timeout_ms=30_000),
        11,
        {"skipped": "hurried", "warn": True},
    ),
    "empty session": (
        SummaryOutcome(skipped="nothing_to_summarize", timeout_ms=30_000),
        0,
        {"skipped": "nothing_to_summarize", "warn": False},
    ),
    "summaries off": (
        SummaryOutcome(skipped="disabled", timeout_ms=0),
        4,
        {"skipped": "disabled", "warn": False, "detail": "skipped: summary_timeout_ms is 0"},
    ),
    "agent killed": (None, 4, {"stored": False, "skipped": "unknown", "warn": True}),
}


@pytest.mark.parametrize(("outcome", "ack_rev", "expected"), CASES.values(), ids=CASES.keys())
def test_the_stop_answer_says_what_became_of_the_summary(
    outcome: SummaryOutcome | None, ack_rev: int, expected: dict[str, Any]
) -> None:
    view = summary_view(outcome, ack_rev, "agent-1")
    assert {key: view[key] for key in expected} == expected
    assert view["detail"]


def test_terminate_self_without_a_summary_keeps_its_old_wire_form() -> None:
    assert TerminateSelfRequest(reason="graceful stop").model_dump(mode="json") == {
        "reason": "graceful stop"
    }
    sent = TerminateSelfRequest(reason="x", summary=SummaryOutcome(skipped="hurried", timeout_ms=5))
    assert TerminateSelfRequest.model_validate(sent.model_dump(mode="json")) == sent
