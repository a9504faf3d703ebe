"""`choir restart` (and `choirctl choird restart`): choird restarted in place, agents kept running.

choird is asked to restart (`choird.restart`): it refuses, with why, before stopping anything if
it cannot re-execute itself or its home would not let it start again; otherwise it answers, stops
serving and re-executes itself under the same pid (`choir.daemon.reexec`). The command waits for
the old socket to go and the new one to answer, then says what became of each agent that ran:
reconnected — adopted (same session, same process or container) and heard from by the new
image (`agent status`'s link, set by the agent's first call) within `RECONNECT_TIMEOUT_S` — or,
on a warning line naming where to look, not. Any agent not back makes the exit code 1: adoption
alone only says the process or container was found alive, not that it can reach choird.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from choir.client import ChoirClient
from choir.errors import UnavailableError
from choir.home import ChoirHome
from choir.launch import choird_process
from choir.launch.up import Steps, answers

if TYPE_CHECKING:
    from choir.protocol.operator.answers import AgentStatus
    from choir.protocol.operator.views import AgentSummary

RECONNECT_TIMEOUT_S: Final = 30.0
"""How long an adopted agent is given to call the new image (it retries with a backoff of a few
seconds while choird is away); past it, it is named with where to look."""
RECONNECT_POLL_S: Final = 0.25


def restart(home: ChoirHome, steps: Steps) -> dict[str, Any]:
    """Every step of `choir restart`; choird's pid, how long it took and each agent."""
    if not answers(home):
        raise UnavailableError(f"choird is not running on {home.root}: choir up starts it")
    began = time.monotonic()
    pid, before = asyncio.run(_ask(home))
    steps.line("choird", f"restarting (agents keep running: {len(before)})")
    exited = choird_process.exit_of(pid)
    _wait_gone(home, exited)

    def tick(seconds: float) -> None:
        steps.waiting("choird", "waiting for its socket", seconds)

    choird_process.wait_ready(home, exited, lambda: answers(home), tick)
    took = time.monotonic() - began
    steps.line("choird", f"ready in {took:.1f} s (pid {pid})")
    agents = asyncio.run(_agents_after(home, before, steps))
    return {"home": str(home.root), "choird_pid": pid, "took_s": round(took, 1), "agents": agents}


async def _ask(home: ChoirHome) -> tuple[int, dict[str, str]]:
    """choird's answer (its pid) and the running agents' sessions, asked before it goes."""
    async with await ChoirClient.connect(home, call_timeout=None) as choird:
        listed = (await choird.agent_list()).agents
        running = {a.agent_id: a.session_id or "" for a in listed if a.state == "running"}
        answer = await choird.choird_restart()
    return answer.pid, running


def _wait_gone(home: ChoirHome, exited: Callable[[], int | None]) -> None:
    """Until the old image stops answering (it lets work in flight settle first)."""
    began = time.monotonic()
    while answers(home) and exited() is None:
        if time.monotonic() - began > choird_process.EXIT_TIMEOUT_S:
            raise UnavailableError(
                f"choird still serves {choird_process.EXIT_TIMEOUT_S:g} s after it was asked "
                f"to restart: see {home.choird_log}"
            )
        time.sleep(choird_process.POLL_S)


async def _agents_after(
    home: ChoirHome, before: dict[str, str], steps: Steps
) -> list[dict[str, Any]]:
    """Each agent that ran before: adopted by the new image (same session) and reconnected to
    it, or what it is."""
    async with await ChoirClient.connect(home, call_timeout=None) as choird:
        listed = {a.agent_id: a for a in (await choird.agent_list()).agents}
        adopted = {
            agent_id
            for agent_id, session_id in before.items()
            if (now := listed.get(agent_id)) is not None
            and now.state == "running"
            and now.session_id == session_id
        }
        seen = await _reconnections(choird, adopted, before, steps)
    return [
        _report(agent_id, session_id, listed.get(agent_id), seen.get(agent_id), steps)
        for agent_id, session_id in before.items()
    ]


async def _reconnections(
    choird: ChoirClient, adopted: set[str], before: dict[str, str], steps: Steps
) -> dict[str, AgentStatus]:
    """Each adopted agent as last seen: once it has called the new image (its `link` is set
    by its first heartbeat or report), once it no longer runs its session, or as it was when
    `RECONNECT_TIMEOUT_S` ran out."""
    seen: dict[str, AgentStatus] = {}
    waiting = set(adopted)
    began = time.monotonic()
    while True:
        for agent_id in sorted(waiting):
            status = seen[agent_id] = await choird.agent_status(agent_id)
            if status.link is not None or not _runs(status, before[agent_id]):
                waiting.discard(agent_id)
        took = time.monotonic() - began
        if not waiting or took > RECONNECT_TIMEOUT_S:
            return seen
        steps.waiting("agents", f"waiting for {len(waiting)} to reconnect", took)
        await asyncio.sleep(RECONNECT_POLL_S)


def _runs(status: AgentSummary, session_id: str) -> bool:
    return status.state == "running" and status.session_id == session_id


def _report(
    agent_id: str,
    session_id: str,
    listed: AgentSummary | None,
    status: AgentStatus | None,
    steps: Steps,
) -> dict[str, Any]:
    """The agent's line, and what `--json` says of it."""
    now = status or listed
    adopted = status is not None
    link = status.link if status is not None else None
    reconnected = status is not None and link is not None and _runs(status, session_id)
    state = now.state if now is not None else None
    look = f"choirctl agent status {agent_id}, choirctl logs {agent_id}"
    if reconnected and now is not None:
        # a docker agent has a pid too (the container's first process): its container says more
        where = f"container {now.container[:12]}" if now.container else f"pid {now.pid}"
        steps.line(agent_id, f"reconnected: session {session_id}, {where} ({link})")
    elif adopted:
        why = (
            f"not within {RECONNECT_TIMEOUT_S:g} s"
            if status is not None and _runs(status, session_id)
            else f"it is {state} now"
        )
        steps.line(agent_id, f"warning: adopted but never reconnected ({why}): see {look}")
    else:
        why = f"it is {state} now" if state is not None else "no longer configured"
        steps.line(agent_id, f"warning: not adopted ({why}): see {look}")
    return {
        "agent_id": agent_id,
        "session_id": session_id,
        "adopted": adopted,
        "reconnected": reconnected,
        "link": link,
        "state": state,
        "pid": now.pid if now is not None else None,
    }


def all_back(summary: dict[str, Any]) -> bool:
    """Whether every agent that ran before the restart runs and talks to the new image."""
    return all(agent["reconnected"] for agent in summary["agents"])
