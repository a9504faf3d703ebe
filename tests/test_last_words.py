"""What a restarted choird reads of an agent that gave its start up while it was away
(`choir.logs.last_words`): the last start failure of that session, logged by that process.

The log is written as an agent writes it — its JSON lines through choir's formatter, bound to
its session, then the line it prints as it exits — into a real file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from choir.logs import JsonLinesFormatter, bind_context, get_logger
from choir.logs.last_words import START_FAILED, TAIL_BYTES, start_failure

GAVE_UP = "choird was unreachable for 60 s while agent-1 was starting (loading the config: lost)"


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    """agent-1's log: choir's JSON lines, as its process writes them."""
    path = tmp_path / "agent-1.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(JsonLinesFormatter("agent-1"))
    logger = logging.getLogger("choir.agent.test_last_words")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()


def agent_logs(session_id: str, message: str, **fields: str) -> None:
    with bind_context(session_id=session_id):
        get_logger("choir.agent.test_last_words").error(message, fields=fields)


def test_the_sessions_last_start_failure_is_read(log_file: Path) -> None:
    began = time.time()
    agent_logs("s-1", "session started")
    agent_logs("s-1", START_FAILED, error=GAVE_UP)
    agent_logs("s-1", "could not tell choird the start failed", error="connection refused")
    with log_file.open("a") as log:
        log.write(f"error: {GAVE_UP}\n")  # what choir-agent prints as it exits

    assert start_failure(log_file, "s-1", began) == GAVE_UP


def test_a_failure_of_another_session_or_an_earlier_process_is_not_this_ones(
    log_file: Path,
) -> None:
    agent_logs("s-1", START_FAILED, error="an earlier start's failure")
    time.sleep(1.2)  # the next process starts later (the log's times are in milliseconds)
    began = time.time()
    agent_logs("s-2", START_FAILED, error="another session's failure")
    agent_logs("s-1", "session started")

    assert start_failure(log_file, "s-1", began) is None
    assert start_failure(log_file, "s-2", began) == "another session's failure"


def test_only_the_logs_end_is_read(log_file: Path) -> None:
    began = time.time()
    agent_logs("s-1", START_FAILED, error="too far back")
    for _ in range(TAIL_BYTES // 200 + 10):
        agent_logs("s-1", "filler", text="x" * 100)
    assert log_file.stat().st_size > TAIL_BYTES
    assert start_failure(log_file, "s-1", began) is None  # the cut first line is skipped too

    agent_logs("s-1", START_FAILED, error=GAVE_UP)
    assert start_failure(log_file, "s-1", began) == GAVE_UP


def test_no_log_no_words(tmp_path: Path) -> None:
    assert start_failure(tmp_path / "missing.log", "s-1", time.time()) is None
