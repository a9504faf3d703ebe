"""`choir restart` (and `choirctl choird restart`): choird restarted in place, agents kept running.

choird is asked to restart (`choird.restart`): it refuses, with why, before stopping anything if
it cannot re-execute itself or its home would not let it start again; otherwise it answers, stops
serving and re-executes itself under the same pid (`choir.daemon.reexec`). The command waits for
the old socket to go and the new one to answer, then says what became of each agent that ran:
adopted (same session, same process or container) or not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from choir.client import ChoirClient
from choir.errors import UnavailableError
from choir.home import ChoirHome
from choir.launch import choird_process
from choir.launch.up import Steps, answers


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
    """Each agent that ran before: adopted by the new image (same session), or what it is."""
    async with await ChoirClient.connect(home, call_timeout=None) as choird:
        listed = {a.agent_id: a for a in (await choird.agent_list()).agents}
    agents = []
    for agent_id, session_id in before.items():
        now = listed.get(agent_id)
        adopted = now is not None and now.state == "running" and now.session_id == session_id
        if adopted and now is not None:
            where = f"pid {now.pid}" if now.pid is not None else f"container {now.container}"
            steps.line(agent_id, f"adopted: session {session_id}, {where}")
        else:
            state = now.state if now is not None else "not configured"
            steps.line(agent_id, f"not adopted: {state} (choirctl agent status {agent_id})")
        agents.append(
            {
                "agent_id": agent_id,
                "session_id": session_id,
                "adopted": adopted,
                "state": now.state if now is not None else None,
                "pid": now.pid if now is not None else None,
            }
        )
    return agents
