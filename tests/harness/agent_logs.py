"""Everything an agent logged, wherever it is now: its archives (`logs/archive/<agent-id>/`) and
its active log. choird archives an agent's log when its process exits, so a test that reads the
log after a stop or a crash finds it there."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

from choir.home import ChoirHome
from choir.logs import archived_logs

SETTLE_S = 10.0
"""How long to wait for an archive being compressed (its staged copy) to be finished."""


def agent_log_text(home: ChoirHome, agent_id: str) -> str:
    """The agent's archives, oldest first, then its active log. An archive made while reading
    (the active log renamed away) is read again, so no line is missed or read twice."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        before = _settled_archives(home, agent_id, deadline)
        active = home.agent_log(agent_id)
        try:
            text = active.read_text()
        except FileNotFoundError:
            text = ""
        if _settled_archives(home, agent_id, deadline) == before:
            return "".join(gzip.decompress(p.read_bytes()).decode() for p in before) + text
    raise AssertionError(f"{agent_id}'s log kept being archived for {SETTLE_S} s")


def _settled_archives(home: ChoirHome, agent_id: str, deadline: float) -> list[Path]:
    """The finished archives once none is being compressed (no staged `.log` left)."""
    folder = home.log_archive / agent_id
    while folder.is_dir() and any(path.suffix == ".log" for path in folder.iterdir()):
        if time.monotonic() > deadline:
            raise AssertionError(f"an archive in {folder} was not compressed in time")
        time.sleep(0.05)
    return archived_logs(home, agent_id)


def instruction_queued(home: ChoirHome, agent_id: str = "agent-1") -> bool:
    """Whether the agent has logged taking an instruction for one of its core jobs: an
    injection is a push, so an operator's `session.inject` answers before the job has it."""
    return '"message":"instruction for a core job queued"' in agent_log_text(home, agent_id)
