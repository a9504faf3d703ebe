"""What a logger writes while a block runs, as the JSON lines a choir log file would hold."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from choir.logs import JsonLinesFormatter


@contextmanager
def log_lines(logger_name: str, source: str) -> Iterator[list[dict[str, Any]]]:
    """The lines `logger_name` logs at INFO and above while the block runs, formatted (and
    redacted) for `source` (`choird` or an agent id); the list fills when the block ends."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonLinesFormatter(source))
    logger = logging.getLogger(logger_name)
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    lines: list[dict[str, Any]] = []
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
        lines.extend(json.loads(line) for line in buffer.getvalue().splitlines())
