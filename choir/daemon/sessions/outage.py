"""An agent that stopped without being stopped: what happened, when, and the step that fixes it.

Pure. `status`, `agent list`, `agent status`, a refused `chat` and the console all describe an
agent whose latest session crashed, forked or was suspended the same way (issue 12: every failure
reported with the next step): the session, why it ended (`sessions.end_reason`, as choird logged
it), when, and the `choirctl agent start` that brings it back — resuming the session, or, for a
forked one, starting afresh. An agent stopped on purpose, or never started, is no outage.
"""

from __future__ import annotations

import signal
from datetime import datetime
from typing import Any, Final

from choir.daemon.operator.views import iso, seconds_between
from choir.store.sessions import SessionRow, SessionStatus

INTERRUPTED: Final = frozenset(
    {SessionStatus.CRASHED, SessionStatus.FORKED, SessionStatus.SUSPENDED}
)
"""Latest-session statuses that leave an agent down until someone starts it again."""

_UNRECORDED: Final = {
    SessionStatus.CRASHED: "it ended without a word (no reason was recorded)",
    SessionStatus.FORKED: "its log diverged from the one choird stored",
    SessionStatus.SUSPENDED: "it was stopped for a restart or update that did not start it again",
}
"""The reason shown for a session that ended before choir recorded why."""


def outage_view(row: SessionRow | None) -> dict[str, Any] | None:
    """The agent's outage — its latest session `row` crashed, forked or suspended — else None.

    `next_step` is the command to run; `hint` says what it does, for any front end to show."""
    if row is None or row.status not in INTERRUPTED:
        return None
    start = start_command(row.agent_id, row.resource_bindings.get("dm"))
    fresh = f"{start} --new-session"
    resumes = row.status != SessionStatus.FORKED
    if resumes:
        hint = f"{start} resumes session {row.session_id} (add --new-session to start afresh)"
    else:
        hint = f"session {row.session_id} cannot be resumed: start a new one with {fresh}"
    return {
        "agent_id": row.agent_id,
        "session_id": row.session_id,
        "status": row.status.value,
        "reason": row.end_reason or _UNRECORDED[row.status],
        "ended_at": iso(row.ended_at),
        "resumes": resumes,
        "next_step": start if resumes else fresh,
        "new_session": fresh,
        "hint": hint,
    }


def start_command(agent_id: str, dm: object) -> str:
    """`choirctl agent start <agent> --dm <dm>` (choirctl needs the DM named)."""
    return f"choirctl agent start {agent_id} --dm {dm or '<dm>'}"


def not_running(
    agent_id: str, row: SessionRow | None, now: datetime, hint: str | None, dm: object = None
) -> str:
    """Why a verb that needs the agent running refuses: its outage if it has one, then `hint`
    (the verb's own advice) or else the outage's next step. A stopped agent: `hint`, or how to
    start it on `dm` (its default DM)."""
    outage = outage_view(row)
    if row is None or outage is None:
        advice = hint or f"start it with {start_command(agent_id, dm)}"
        return f"{agent_id} is not running: {advice}"
    when = f" {ago(seconds_between(row.ended_at, now))}" if row.ended_at else ""
    what = f"{agent_id} is not running: session {row.session_id} {outage['status']}{when}"
    return f"{what} ({outage['reason']}); {hint or outage['hint']}"


def ago(seconds: float) -> str:
    """`4 s ago`, `3 min ago`, `2 h ago`, `5 d ago`."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size * (2 if unit == "min" else 1):
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def exit_words(code: int | None) -> str:
    """How a process ended, from its exit code: a negative code is the signal that killed it
    (asyncio), 129-192 a shell's or container's way of saying the same, None unknown (an agent
    choird adopted after a restart is not its child: nothing tells it the code)."""
    if code is None:
        return "exited (exit code unknown: it was adopted after a choird restart)"
    if code < 0:
        return f"was killed by {_signal_name(-code)}"
    if 128 < code <= 128 + 64:
        return f"exited with code {code} (killed by {_signal_name(code - 128)})"
    return f"exited with code {code}"


def _signal_name(number: int) -> str:
    try:
        return f"signal {number} ({signal.Signals(number).name})"
    except ValueError:
        return f"signal {number}"


__all__ = ["INTERRUPTED", "ago", "exit_words", "not_running", "outage_view", "start_command"]
