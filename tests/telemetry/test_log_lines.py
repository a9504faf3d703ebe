"""The telemetry log lines (§22.1) at the level an operator reads them: INFO for what needs
no asking (a long lock wait and its release, a long run, a snapshot, a progress summary at most
once a minute), DEBUG for every call and every heartbeat — and nothing built at all when DEBUG
is off."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from choir.agent.kernel import call_log
from choir.agent.replication import progress_log
from choir.agent.replication.progress_log import EVERY_S, ProgressNotes
from choir.core.locks.lockset import Lockset
from choir.logs import current_context

LOCKS = Lockset.of("file:shared.txt:X")


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[logging.LogRecord, str | None]] = []

    def emit(self, record: logging.LogRecord) -> None:
        lane = current_context().lane  # the line's standard `lane` key, as the formatter reads it
        self.records.append((record, lane))

    def seen(self) -> list[tuple[str, str, dict[str, object]]]:
        """(level, message, fields with the bound lane, when there is one)."""
        return [
            (r.levelname, r.getMessage(), {**({"lane": lane} if lane else {}), **r.fields})  # type: ignore[attr-defined]
            for r, lane in self.records
        ]


@pytest.fixture(params=[logging.INFO, logging.DEBUG], ids=["info", "debug"])
def lines(request: pytest.FixtureRequest) -> Iterator[Lines]:
    handler = Lines()
    names = ("choir.agent.kernel.locks", "choir.agent.kernel.tools", progress_log.log.logger.name)
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(request.param)
    try:
        yield handler
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


def debug_on(lines: Lines) -> bool:
    return logging.getLogger("choir.agent.kernel.locks").isEnabledFor(logging.DEBUG)


def test_a_long_lock_wait_and_its_release_are_info_a_short_one_only_debug(lines: Lines) -> None:
    call_log.lock_waited("edge", "choir.fs.write", LOCKS, 3)
    call_log.lock_released("edge", "choir.fs.write", LOCKS, wait_ms=3, held_ms=20)
    call_log.lock_waited("edge", "choir.fs.write", LOCKS, 1500)
    call_log.lock_released("edge", "choir.fs.write", LOCKS, wait_ms=1500, held_ms=20)
    call_log.lock_released("core:a", "choir.exec", LOCKS, wait_ms=0, held_ms=12_000)
    long = [
        (
            "INFO",
            "lock wait",
            {
                "lane": "edge",
                "tool": "choir.fs.write",
                "locks": ["file:shared.txt:X"],
                "wait_ms": 1500,
            },
        ),
        (
            "INFO",
            "lock released",
            {
                "lane": "edge",
                "tool": "choir.fs.write",
                "locks": ["file:shared.txt:X"],
                "held_ms": 20,
            },
        ),
        (
            "INFO",
            "lock released",
            {
                "lane": "core:a",
                "tool": "choir.exec",
                "locks": ["file:shared.txt:X"],
                "held_ms": 12_000,
            },
        ),
    ]
    short = [
        (
            "DEBUG",
            "lock wait",
            {
                "lane": "edge",
                "tool": "choir.fs.write",
                "locks": ["file:shared.txt:X"],
                "wait_ms": 3,
            },
        ),
        (
            "DEBUG",
            "lock released",
            {
                "lane": "edge",
                "tool": "choir.fs.write",
                "locks": ["file:shared.txt:X"],
                "held_ms": 20,
            },
        ),
    ]
    assert lines.seen() == (short + long if debug_on(lines) else long)


def test_a_long_run_is_info_every_run_is_debug(lines: Lines) -> None:
    call_log.tool_ran("edge", "choir.fs.read", "success", 4)
    call_log.tool_ran("core:a", "choir.exec", "timeout", 10_000)
    slow = (
        "INFO",
        "tool call finished",
        {"lane": "core:a", "tool": "choir.exec", "status": "timeout", "duration_ms": 10_000},
    )
    quick = (
        "DEBUG",
        "tool call finished",
        {"lane": "edge", "tool": "choir.fs.read", "status": "success", "duration_ms": 4},
    )
    assert lines.seen() == ([quick, slow] if debug_on(lines) else [slow])


def test_replication_progress_is_one_info_line_a_minute_while_events_flow(lines: Lines) -> None:
    notes = ProgressNotes(since=0.0)
    for n in range(10):  # ten heartbeats of 5 events in 50 s: no summary yet
        progress_log.heartbeat_acknowledged(
            notes, 5.0 * n, base_rev=5 * n, ack_rev=5 * n + 5, round_trip_ms=n
        )
    progress_log.heartbeat_acknowledged(notes, 61.0, base_rev=50, ack_rev=52, round_trip_ms=3)
    progress_log.heartbeat_acknowledged(notes, 70.0, base_rev=52, ack_rev=52, round_trip_ms=1)
    progress_log.heartbeat_acknowledged(notes, 200.0, base_rev=52, ack_rev=52, round_trip_ms=1)
    info = [line for line in lines.seen() if line[0] == "INFO"]
    assert info == [
        (
            "INFO",
            "replication progress",
            {"ack_rev": 52, "heartbeats": 11, "events": 52, "slowest_ms": 9, "over_s": 61.0},
        ),
    ]  # the idle heartbeats after it (no events) add no line, however long the silence
    debug = [line for line in lines.seen() if line[0] == "DEBUG"]
    assert len(debug) == (13 if debug_on(lines) else 0)
    assert EVERY_S == 60.0


def test_a_stored_snapshot_is_info(lines: Lines) -> None:
    progress_log.snapshot_stored(1200, 1000)
    assert lines.seen() == [("INFO", "snapshot stored", {"rev": 1200, "events_since_last": 1000})]
