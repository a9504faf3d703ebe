"""`setup_logging`: send the process's root logger to its JSON-lines file in `$CHOIR_HOME/logs`."""

from __future__ import annotations

import logging
import re
import sys

from choir.home import ChoirHome
from choir.logs.archive import archive_dir, log_path
from choir.logs.formatter import JsonLinesFormatter
from choir.logs.handler import ArchivingFileHandler, WholeLineStreamHandler

DEFAULT_ARCHIVE_THRESHOLD_LINES = 100_000
"""§22.2 default of `log_archive_threshold_lines`."""

_SOURCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_OWNED = "_choir_logs_owned"
"""Marks the handlers `setup_logging` installed, so a second call replaces only those."""


def _level_number(level: str | int) -> int:
    if isinstance(level, int):
        return level
    known = logging.getLevelNamesMapping()
    if level.upper() not in known:
        names = ", ".join(sorted(known, key=known.__getitem__))
        raise ValueError(f"unknown log level {level!r}: use one of {names}")
    return known[level.upper()]


def setup_logging(
    home: ChoirHome,
    source: str,
    *,
    level: str | int = "INFO",
    also_stderr: bool = False,
    archive_threshold_lines: int = DEFAULT_ARCHIVE_THRESHOLD_LINES,
) -> ArchivingFileHandler:
    """Send every record of this process to `logs/<source>.log` as redacted JSON lines.

    `source` is `choird` or an agent id. The file is archived to `logs/archive/<source>/` past
    `archive_threshold_lines` lines (0: never). `also_stderr` mirrors the lines to stderr, for
    running in the foreground. Calling it again replaces the handlers of the previous call.
    Returns the file handler (its `wait_for_archives` waits for background compression).
    """
    if not _SOURCE.fullmatch(source):
        raise ValueError(f"log source {source!r} must be 'choird' or an agent id")
    number = _level_number(level)
    home.logs.mkdir(parents=True, exist_ok=True)
    # The previous handler goes first: its background compression must finish before the new
    # handler looks for staged archives to complete.
    shutdown_logging()
    formatter = JsonLinesFormatter(source)
    handler = ArchivingFileHandler(
        log_path(home, source), archive_dir(home, source), threshold=archive_threshold_lines
    )
    handlers: list[logging.Handler] = [handler]
    if also_stderr:
        handlers.append(WholeLineStreamHandler(sys.stderr))
    root = logging.getLogger()
    for each in handlers:
        each.setFormatter(formatter)
        setattr(each, _OWNED, True)
        root.addHandler(each)
    root.setLevel(number)
    return handler


def set_archive_threshold(lines: int) -> None:
    """Archive this process's log past `lines` lines from the next record on (`config apply` of
    `log_archive_threshold_lines`: a hot-reload tunable, so choird must not wait for a restart)."""
    if lines < 0:
        raise ValueError(f"archive threshold must be 0 (never) or positive, got {lines}")
    for handler in logging.getLogger().handlers:
        if getattr(handler, _OWNED, False) and isinstance(handler, ArchivingFileHandler):
            handler.threshold = lines


def shutdown_logging() -> None:
    """Remove and close the handlers `setup_logging` installed (waiting for pending archives)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, _OWNED, False)]:
        root.removeHandler(handler)
        handler.close()
