"""Reading log files back: for tests, `choirctl logs`, and anyone holding a `.log.gz` archive."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson


def read_log_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of the log (or gzipped archive) at `path`, parsed; raises on a non-JSON line."""
    raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    entries: list[dict[str, Any]] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not a JSON log line ({error})") from error
        if not isinstance(entry, dict):
            raise ValueError(f"{path}:{number}: a log line must be a JSON object")
        entries.append(entry)
    return entries
