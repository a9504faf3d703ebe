"""What `agent stop` says of the session summary (§11.8): stored, or why not — never silent.

Pure. The agent says how its summary went with TERMINATE_SELF (`SummaryOutcome`); choird holds
that against what it durably has: a summary the agent committed but did not flush before it
exited is not stored. A skipped summary is a warning, not a failed stop — §11.8 lets a stop go
on without one (mid-term memory still gets the session's raw events) — so the operator is told
why and what to change, and the command exits 0.
"""

from __future__ import annotations

from typing import Any, Final

from choir.protocol.wire.payloads import SummaryOutcome

QUIET: Final = frozenset({"nothing_to_summarize", "disabled"})
"""Reasons for no summary that are no news: the session was empty, or summaries are off."""


def summary_view(outcome: SummaryOutcome | None, ack_rev: int, agent_id: str) -> dict[str, Any]:
    """`{stored, rev, skipped, warn, detail}` for the stop's answer."""
    if outcome is None:
        return _skipped(
            "unknown",
            "the agent exited without saying whether it summarized (it was killed or crashed; "
            f"see choirctl logs {agent_id})",
        )
    if outcome.rev is not None:
        if ack_rev >= outcome.rev:
            return {
                "stored": True,
                "rev": outcome.rev,
                "skipped": None,
                "warn": False,
                "detail": f"stored (rev {outcome.rev})",
            }
        return _skipped(
            "not_flushed", "made, but the agent exited before choird had it (see its log)"
        )
    skipped = outcome.skipped or "unknown"
    return _skipped(skipped, _why(skipped, outcome.timeout_ms, agent_id))


def _why(skipped: str, timeout_ms: int, agent_id: str) -> str:
    seconds = f"{timeout_ms / 1000:g} s"
    reasons = {
        "timed_out": f"the model did not answer within {seconds} (summary_timeout_ms in "
        "config.json)",
        "call_failed": f"the model call failed (see choirctl logs {agent_id})",
        "not_a_summary": "the model's reply was not a summary object",
        "nothing_to_summarize": "the session had nothing to summarize",
        "disabled": "summary_timeout_ms is 0",
        "hurried": "the stop was hurried (a second stop, or choird's SIGTERM after its grace)",
        "not_made": f"replication had failed (see choirctl logs {agent_id})",
    }
    return reasons.get(skipped, f"skipped ({skipped})")


def _skipped(skipped: str, detail: str) -> dict[str, Any]:
    return {
        "stored": False,
        "rev": None,
        "skipped": skipped,
        "warn": skipped not in QUIET,
        "detail": f"skipped: {detail}",
    }


__all__ = ["summary_view"]
