"""Why an agent gave its start up, read back from its log by a choird that was not there.

An agent whose start fails tells choird why (TERMINATE_SELF, failed) — unless choird is what
failed: a starting agent that waited out its patience for a restarted choird
(`choir.agent.start_retry`) exits with nobody to tell. Its log line is then the only record, so
the choird that comes back reads it when it finds the agent gone, and puts the reason on the
crashed session, where `choirctl agent status` shows it. Only the log's end is read: the line is
among the agent's last.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Final

import orjson

START_FAILED: Final = "could not start the session"
"""The message of the line an agent logs when its start (or resume) fails; its `error` says why."""
TAIL_BYTES: Final = 64 * 1024
"""How much of the log's end is searched."""


def start_failure(log_file: Path, session_id: str, since: float) -> str | None:
    """The `error` of the last START_FAILED line of `session_id` logged at or after `since`
    (seconds since the epoch: the process's start); None when the log holds none."""
    try:
        with log_file.open("rb") as log:
            size = log.seek(0, 2)
            log.seek(max(0, size - TAIL_BYTES))
            tail = log.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        error = _failure(line, session_id, since)
        if error is not None:
            return error
    return None


def _failure(line: bytes, session_id: str, since: float) -> str | None:
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None  # the tail's first, cut line, or what the agent printed as it exited
    if not isinstance(entry, dict) or entry.get("message") != START_FAILED:
        return None
    if entry.get("session_id") != session_id or not isinstance(entry.get("error"), str):
        return None
    try:
        logged = datetime.fromisoformat(str(entry.get("timestamp"))).timestamp()
    except ValueError:
        return None
    return str(entry["error"]) if logged >= since - 1 else None  # the log keeps ms


__all__ = ["START_FAILED", "TAIL_BYTES", "start_failure"]
