"""JSON from outside choir, decoded into text choir can hash, send and store.

A model's JSON may escape a lone surrogate (`"\\ud800"` is valid JSON, not valid Unicode), and a
broken provider may send bytes that are not UTF-8. orjson refuses both — it would turn a whole
reply into "malformed" — and a Python string holding a lone surrogate can be neither hashed
(canonical JSON is UTF-8) nor sent. So where such text enters, it is decoded leniently: bytes
that are not UTF-8 and lone surrogates both become U+FFFD, the Unicode replacement character;
surrogate pairs become the character they stand for. Everything else decodes exactly as orjson
would, and valid input takes orjson's path alone.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

INT64_MIN: Final = -(2**63)
UINT64_MAX: Final = 2**64 - 1


def loads_lenient(data: bytes | str) -> Any:
    """`orjson.loads(data)`, or — when only invalid UTF-8 or lone surrogates stand in its way —
    the same value with U+FFFD in their place; `orjson.JSONDecodeError` otherwise."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        try:
            value = json.loads(text, parse_int=_integer, parse_constant=_not_json)
        except (ValueError, RecursionError):
            raise error from None
        return without_lone_surrogates(value)


def without_lone_surrogates(value: Any) -> Any:
    """`value` (JSON-shaped) with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(key): without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    return value


def _text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 pairs what can be paired; "replace" then marks each lone half
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _integer(digits: str) -> int | float:
    """As orjson reads them: integers beyond 64 bits become floats."""
    value = int(digits)
    return value if INT64_MIN <= value <= UINT64_MAX else float(digits)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
