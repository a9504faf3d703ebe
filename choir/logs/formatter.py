"""One JSON object per line (§22.2), the format of every choir log file.

Each line carries `timestamp` (RFC 3339 UTC, milliseconds), `level`, `source` (`choird` or the agent
id), `session_id` and `lane` (null when not bound), `logger`, `message`, then the structured
fields of the call and of the bound context, and `exc` when an exception is attached. JSON string
escaping keeps a multi-line message or traceback on one line, so `grep` and `jq` work line by line.
The finished line is passed through secret redaction before it is returned.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping
from typing import Any

import orjson

from choir.logs.context import current_context
from choir.logs.redaction import redact_json

STANDARD_KEYS = frozenset(
    {"timestamp", "level", "source", "session_id", "lane", "logger", "message", "exc", "stack"}
)
FIELD_PREFIX = "field_"
"""A structured field named like a standard key is written as `field_<name>` instead of it."""


_second: list[tuple[int, str]] = [(-1, "")]
"""The last second formatted and its text: lines come many per second, so the date-and-time
part is formatted once per second (as `now_ts` does for commits)."""


def rfc3339_utc(created: float) -> str:
    """`created` (seconds since the epoch) as `2026-11-26T01:02:03.456Z`."""
    whole, millis = divmod(round(created * 1000), 1000)
    cached, text = _second[0]
    if whole != cached:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second[0] = (whole, text)
    return f"{text}.{millis:03d}Z"


def _type_name(kind: type[BaseException]) -> str:
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


def exception_fields(record: logging.LogRecord) -> dict[str, Any]:
    """`exc` (type, message, full traceback with chained causes) and `stack`, when present."""
    out: dict[str, Any] = {}
    if record.exc_info and record.exc_info[1] is not None:
        error = record.exc_info[1]
        text = "".join(traceback.format_exception(error)).rstrip("\n")
        out["exc"] = {"type": _type_name(type(error)), "message": str(error), "traceback": text}
    if record.stack_info:
        out["stack"] = record.stack_info.rstrip("\n")
    return out


def _encode_default(value: object) -> object:
    """What orjson cannot encode natively: sets become lists, anything else its `str`."""
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def _encode(entry: Mapping[str, Any]) -> str:
    try:
        return orjson.dumps(entry, default=_encode_default, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        # A value orjson rejects outright (an int past 64 bits, a cycle): keep the line, lose types.
        return orjson.dumps({key: str(value) for key, value in entry.items()}).decode()


class JsonLinesFormatter(logging.Formatter):
    """Formats a record as one redacted JSON line for `source` (`choird` or an agent id)."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def format(self, record: logging.LogRecord) -> str:
        return redact_json(_encode(self.entry(record)))

    def entry(self, record: logging.LogRecord) -> dict[str, Any]:
        """The record as the mapping that becomes its line, before encoding and redaction."""
        context = current_context()
        entry: dict[str, Any] = {
            "timestamp": rfc3339_utc(record.created),
            "level": record.levelname,
            "source": self.source,
            "session_id": context.session_id,
            "lane": context.lane,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        extra = {**context.fields, **fields} if isinstance(fields, Mapping) else context.fields
        for name, value in extra.items():
            entry[f"{FIELD_PREFIX}{name}" if name in STANDARD_KEYS else name] = value
        entry.update(exception_fields(record))
        return entry
