"""Whether a resumed agent really resumed (§13.2): `agent start` answers only once it knows.

Spawning the agent is not resuming its session: the agent still has to say hello, read the
handover, verify the chain and rebuild its state, and any of that can fail. A start, restart or
update that resumes a session therefore waits until the agent reports its lanes (it does so as
soon as they run) — or until the session ends, which means the resume failed: the agent says why
(TERMINATE_SELF with `failed`), or choird saw it exit. Then the start fails with that reason, so
`choirctl` and `choir up` exit non-zero with one line instead of printing "resumed".
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

from choir.daemon.agents.status_board import StatusBoard
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import RESUME_FAILED, SessionEnded
from choir.errors import ChoirError
from choir.logs import get_logger

log = get_logger("choird.lifecycle")

RESUME_WAIT_S: Final = 60.0
"""How long a start waits for a resumed agent to report; past it, the start answers anyway (the
agent is slow, not failed: crash detection still covers it)."""
POLL_S: Final = 0.05


class ResumeFailed(ChoirError):
    """The agent was spawned but could not resume its session."""


async def until_resumed(
    sessions: SessionService,
    status: StatusBoard,
    *,
    agent_id: str,
    session_id: str,
    dm: str | None,
    within: float = RESUME_WAIT_S,
) -> None:
    """Return once the agent of `session_id` runs its lanes; ResumeFailed if the session ended."""
    ended: list[SessionEnded] = []

    def noted(event: SessionEnded) -> None:
        if event.session_id == session_id:
            ended.append(event)

    unsubscribe = sessions.subscribe(noted)
    try:
        deadline = time.monotonic() + within
        while not ended:
            if status.lanes(session_id):
                return
            if time.monotonic() > deadline:
                log.warning(
                    "resumed agent has not reported yet; answering the start anyway",
                    fields={"agent_id": agent_id, "session_id": session_id, "waited_s": within},
                )
                return
            await asyncio.sleep(POLL_S)
    finally:
        unsubscribe()
    raise ResumeFailed(_failure(agent_id, session_id, ended[0].reason, dm))


def _failure(agent_id: str, session_id: str, reason: str, dm: str | None) -> str:
    fresh = f"choirctl agent start {agent_id} --dm {dm or '<dm>'} --new-session"
    return (
        f"{agent_id} could not resume session {session_id}: "
        f"{reason.removeprefix(RESUME_FAILED).rstrip('.')}; see "
        f"choirctl logs {agent_id}, or start a new session with {fresh}"
    )


__all__ = ["RESUME_WAIT_S", "ResumeFailed", "until_resumed"]
