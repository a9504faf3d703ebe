"""`choir down`: stop every running agent gracefully, then choird; nothing left behind.

Agents go first, one at a time, each with its own progress lines (a graceful stop writes the
session summary and flushes its events, §17.2; whether the summary was stored, or why not, is
said as `agent stop` says it); then choird is asked to shut down (`shutdown`),
which stops anything still running, releases the embedded Postgres and exits. `down` waits
until its process is gone. An agent that fails to stop is reported and the rest still go.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from choir.client import ChoirClient
from choir.ctl.agent.views import exit_note
from choir.errors import ChoirError
from choir.home import ChoirHome
from choir.launch import choird_process
from choir.launch.up import Steps, answers


def down(home: ChoirHome, steps: Steps) -> dict[str, Any]:
    """Every step of `choir down`; what was stopped."""
    if not answers(home):
        pid = choird_process.running_pid(home)
        if pid is None:
            steps.line("choird", "not running: nothing to stop")
            return {"home": str(home.root), "agents": [], "choird_pid": None}
        steps.line("choird", f"pid {pid} holds {home.root} but does not answer: SIGTERM")
        os.kill(pid, signal.SIGTERM)  # choird stops its agents gracefully on SIGTERM too
        agents: list[dict[str, Any]] = []
    else:
        agents, pid = asyncio.run(_stop_all(home, steps))

    def tick(seconds: float) -> None:
        steps.waiting("choird", "stopping", seconds)

    took = choird_process.wait_exit(pid, tick)
    steps.line("choird", f"stopped in {took:.1f} s (pid {pid})")
    steps.line("choir", "down: agents stopped, choird and its Postgres exited")
    return {"home": str(home.root), "agents": agents, "choird_pid": pid}


def summary_line(stopped: dict[str, Any]) -> str | None:
    """How the stop's session summary went (§11.8), as `agent stop` says it: stored, skipped
    for no news, or a warning naming why it is missing."""
    summary = stopped.get("summary")
    if not summary:
        return None
    if summary["warn"]:
        return f"warning: no session summary: {summary['detail']}"
    return f"summary: {summary['detail']}"


async def _stop_all(home: ChoirHome, steps: Steps) -> tuple[list[dict[str, Any]], int]:
    async with await ChoirClient.connect(home, call_timeout=None) as choird:
        listed = (await choird.agent_list()).agents
        stopped: list[dict[str, Any]] = []
        for agent in listed:
            if agent.state != "running":
                continue
            agent_id = agent.agent_id
            steps.line(agent_id, "stopping gracefully (session summary, final flush)")
            try:
                result = await choird.agent_stop(agent_id)
            except ChoirError as error:
                steps.line(agent_id, f"did not stop: {error.message} (choird stops it next)")
                stopped.append({"agent_id": agent_id, "error": error.message})
                continue
            ended = f"stopped: session {result.session_id} {result.status}"
            steps.line(agent_id, ended + exit_note(result.exit_code))
            stopped.append(result.model_dump(mode="json"))
            if (summary := summary_line(stopped[-1])) is not None:
                steps.line(agent_id, summary)
        answer = await choird.shutdown()
    pid = answer.pid
    return stopped, pid
