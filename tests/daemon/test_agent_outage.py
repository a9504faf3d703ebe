"""`agent_outage`: how an agent down after a crash, a fork or a failed restart is told (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from choir.daemon.sessions.outage import ago, exit_words, not_running, outage_view
from choir.store.sessions import SessionRow, SessionStatus

ENDED = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def row(status: SessionStatus, reason: str | None = "why") -> SessionRow:
    return SessionRow(
        session_id="s-1",
        agent_id="agent-1",
        status=status,
        started_at=ENDED - timedelta(hours=1),
        ended_at=None if status == SessionStatus.ACTIVE else ENDED,
        resource_bindings={"dm": "console", "workspace": "ws"},
        config_version=1,
        last_heartbeat_at=ENDED,
        ack_rev=7,
        head_hash=None,
        lease_id=None,
        end_reason=reason,
    )


RESUME = (
    "choirctl agent start agent-1 --dm console resumes session s-1 "
    "(add --new-session to start afresh)"
)
FRESH = "choirctl agent start agent-1 --dm console --new-session"


@pytest.mark.parametrize(
    ("status", "resumes", "next_step", "hint"),
    [
        (SessionStatus.CRASHED, True, "choirctl agent start agent-1 --dm console", RESUME),
        (SessionStatus.SUSPENDED, True, "choirctl agent start agent-1 --dm console", RESUME),
        (
            SessionStatus.FORKED,
            False,
            FRESH,
            f"session s-1 cannot be resumed: start a new one with {FRESH}",
        ),
    ],
)
def test_an_interrupted_session_names_its_cause_and_the_next_step(
    status: SessionStatus, resumes: bool, next_step: str, hint: str
) -> None:
    assert outage_view(row(status)) == {
        "agent_id": "agent-1",
        "session_id": "s-1",
        "status": status.value,
        "reason": "why",
        "ended_at": ENDED.isoformat(),
        "resumes": resumes,
        "next_step": next_step,
        "new_session": FRESH,
        "hint": hint,
    }


@pytest.mark.parametrize("status", [SessionStatus.ACTIVE, SessionStatus.STOPPED])
def test_a_running_or_stopped_agent_is_no_outage(status: SessionStatus) -> None:
    assert outage_view(row(status)) is None
    assert outage_view(None) is None


def test_a_session_that_ended_before_reasons_were_kept_still_says_something() -> None:
    view = outage_view(row(SessionStatus.CRASHED, reason=None))
    assert view is not None
    assert view["reason"] == "it ended without a word (no reason was recorded)"


def test_a_refusal_says_why_when_and_what_to_do() -> None:
    now = ENDED + timedelta(seconds=4)
    crashed = row(SessionStatus.CRASHED, "choir-agent was killed by signal 9 (SIGKILL)")
    assert not_running("agent-1", crashed, now, None) == (
        "agent-1 is not running: session s-1 crashed 4 s ago "
        f"(choir-agent was killed by signal 9 (SIGKILL)); {RESUME}"
    )
    assert not_running("agent-1", crashed, now, "nothing to stop").endswith("; nothing to stop")
    stopped = row(SessionStatus.STOPPED)
    assert not_running("agent-1", stopped, now, None, "console") == (
        "agent-1 is not running: start it with choirctl agent start agent-1 --dm console"
    )
    assert not_running("agent-1", None, now, "start it, then verify it") == (
        "agent-1 is not running: start it, then verify it"
    )


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (-9, "was killed by signal 9 (SIGKILL)"),
        (137, "exited with code 137 (killed by signal 9 (SIGKILL))"),
        (1, "exited with code 1"),
        (0, "exited with code 0"),
        (255, "exited with code 255"),
        (None, "exited (exit code unknown: it was adopted after a choird restart)"),
    ],
)
def test_exit_codes_in_words(code: int | None, words: str) -> None:
    assert exit_words(code) == words


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0.4, "0 s ago"),
        (59, "59 s ago"),
        (119, "119 s ago"),
        (180, "3 min ago"),
        (7200, "2 h ago"),
        (90_000, "1 d ago"),
    ],
)
def test_ago(seconds: float, words: str) -> None:
    assert ago(seconds) == words
