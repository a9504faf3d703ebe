"""The process-wide registry of secret values and the redaction every log line passes through.

Secret values must never reach a log (DESIGN-NOTES "Secrets"). Code that handles secrets is careful
not to log them; this registry is the backstop. choird registers every value of secrets.json when it
loads or reloads them, and the JSON-lines formatter runs `redact_json` over each finished line, so a
secret is caught wherever it slipped in: the message, a structured field, or an exception's text.

Secrets are matched in two forms: as they are (`redact`, for any text) and as JSON escapes them
inside a string (`redact_json`, for a finished log line).

The state is one immutable snapshot (the values and a compiled alternation per form) swapped by a
single assignment, so the hot path takes no lock and never sees a half-built pattern.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 4
"""Shorter values are ignored: redacting every "on" or "42" would shred the log and hide nothing."""


@dataclass(frozen=True)
class _Snapshot:
    values: frozenset[str]
    plain: re.Pattern[str] | None
    """Matches the values as they are."""
    json: re.Pattern[str] | None
    """Matches the values as they appear inside a JSON string (quotes and backslashes escaped)."""


_EMPTY = _Snapshot(frozenset(), None, None)
_snapshot = _EMPTY
_write_lock = threading.Lock()


def _json_escaped(value: str) -> str:
    """How `value` appears inside a JSON string; the form the formatted line actually contains."""
    return orjson.dumps(value).decode()[1:-1]


def _alternation(forms: Iterable[str]) -> re.Pattern[str]:
    # Longest first: an alternation takes the first branch that matches, so a secret that contains
    # another one must be tried before it or its tail would survive.
    ordered = sorted(set(forms), key=lambda form: (-len(form), form))
    return re.compile("|".join(map(re.escape, ordered)))


def _build(values: frozenset[str]) -> _Snapshot:
    if not values:
        return _EMPTY
    return _Snapshot(values, _alternation(values), _alternation(map(_json_escaped, values)))


def _kept(values: Iterable[str]) -> frozenset[str]:
    return frozenset(value for value in values if len(value) >= MIN_SECRET_LENGTH)


def register_secrets(values: Iterable[str]) -> None:
    """Add `values` to the redacted set (values shorter than 4 characters are ignored)."""
    global _snapshot
    added = _kept(values)
    with _write_lock:
        if not added <= _snapshot.values:
            _snapshot = _build(_snapshot.values | added)


def replace_secrets(values: Iterable[str]) -> None:
    """Make `values` the whole redacted set in one atomic swap (after secrets.json is reloaded)."""
    global _snapshot
    kept = _kept(values)
    with _write_lock:
        _snapshot = _build(kept)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `[REDACTED]`."""
    pattern = _snapshot.plain
    return text if pattern is None else pattern.sub(REDACTED, text)


def redact_json(line: str) -> str:
    """A JSON document with every registered secret in its strings (and keys, and the text of its
    numbers) replaced by `[REDACTED]`; the result is always valid JSON.

    The hot path is one regex scan of the line. Only a line that holds a secret is parsed, scrubbed
    value by value and re-encoded: substituting inside the encoded text could cut through an escape
    sequence or a bare number and leave a line no JSON reader accepts.
    """
    snapshot = _snapshot
    if snapshot.json is None or snapshot.json.search(line) is None:
        return line
    return orjson.dumps(_scrub(orjson.loads(line))).decode()


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(key): _scrub(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    text = orjson.dumps(value).decode()
    return value if redact(text) == text else redact(text)
