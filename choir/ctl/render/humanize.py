"""Small renderings of times and payloads for choirctl's human output. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))


def duration(seconds: float | None) -> str:
    """`45s`, `3m12s`, `2h05m`, `3d04h`; `-` when unknown. The two largest units only."""
    if seconds is None:
        return "-"
    left = int(seconds)
    parts: list[tuple[int, str]] = []
    for unit, size in _UNITS:
        amount, left = divmod(left, size)
        if amount or parts or unit == "s":
            parts.append((amount, unit))
    first, *rest = parts[:2]
    return f"{first[0]}{first[1]}" + "".join(f"{amount:02d}{unit}" for amount, unit in rest)


def moment(iso: str | None) -> str:
    """An ISO timestamp as local `YYYY-MM-DD HH:MM:SS`; `-` when absent."""
    if not iso:
        return "-"
    return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def ago(iso: str, now: datetime | None = None) -> str:
    """How long ago an ISO timestamp was: `4s ago`, `3m12s ago` (`duration`'s units)."""
    then = datetime.fromisoformat(iso)
    seconds = ((now or datetime.now(then.tzinfo)) - then).total_seconds()
    return f"{duration(max(seconds, 0.0))} ago"


def compact(value: Any, width: int = 100) -> str:
    """One-line JSON, cut to `width` characters with an ellipsis."""
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


def one_line(text: str, width: int = 70) -> str:
    """`text` with its whitespace runs as single spaces, cut to `width` with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def dash(value: object) -> str:
    """`-` for None or empty, else the value as text."""
    return "-" if value is None or value == "" else str(value)
