"""Strict JSON reading for hand-edited files: exact error positions and no silent duplicates.

`json.loads` keeps the last of two equal keys without a word; for config.json that hides a second
definition of the same model or agent. The parse here remembers duplicates and reports each one
with its JSON path.

It also refuses what would fail later, far from the file: nesting deeper than `MAX_DEPTH` (100k
levels overflowed Python's stack with a traceback), integers beyond 64 bits (a 5,000-digit one
raised inside the decoder; smaller giants break orjson and timers downstream), and non-finite
numbers (`1e999`, `NaN`, `Infinity`, which JSON does not even allow). Each is one problem line
naming the JSON path.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Final

MAX_DEPTH: Final = 64
"""Deepest nesting accepted; config.json needs about six levels, a tool's JSON schema a dozen."""
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**64 - 1
"""Integers must fit a signed or unsigned 64-bit word, as orjson and Postgres bigint need."""

NAMED_SECTIONS = frozenset(
    {
        "workspaces",
        "models",
        "tts",
        "voice_profiles",
        "git_identities",
        "notion_integrations",
        "email_accounts",
        "search",
        "gateways",
        "dms",
        "agents",
    }
)
"""Top-level objects whose keys are resource names: a repeated key there is a duplicate *name*."""


class _Object(dict[str, Any]):
    """A decoded JSON object that remembers which keys appeared more than once."""

    duplicates: list[str]


def _object_pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj and key not in obj.duplicates:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


@dataclass(frozen=True)
class ParsedJson:
    """The decoded top-level object (None if unusable) and every problem found while reading."""

    data: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)


def parse_json_object(text: str, source: str) -> ParsedJson:
    """Decode `text` (the contents of the file called `source`) as one JSON object.

    Problems read `<source>: invalid JSON at line L, column C: <reason>` or
    `<json.path>: duplicate name '<key>'`. Values never appear in problems, so this is safe for
    secrets.json too. Duplicates leave usable data (last one wins) so later checks still run.
    """
    try:
        data = json.loads(
            text,
            object_pairs_hook=_object_pairs,
            parse_int=_integer,
            parse_float=_float,
            parse_constant=_constant,
        )
    except json.JSONDecodeError as err:
        where = f"line {err.lineno}, column {err.colno}"
        return ParsedJson(None, [f"{source}: invalid JSON at {where}: {err.msg}"])
    except RecursionError:
        return ParsedJson(None, [_too_deep(source)])
    if not isinstance(data, dict):
        return ParsedJson(None, [f"{source}: must be a JSON object {{...}}"])
    shape = _shape_problems(data, source)
    if shape:
        return ParsedJson(None, shape)
    return ParsedJson(_plain(data), list(_duplicates(data, source, ())))


class _OutOfRange:
    """Stands in for a number no consumer can hold, so its path can be reported."""

    __slots__ = ()


_OUT_OF_RANGE: Final = _OutOfRange()


def _integer(digits: str) -> int | _OutOfRange:
    if len(digits) > 21:  # past 2**64 whatever the digits: never convert a 5,000-digit string
        return _OUT_OF_RANGE
    value = int(digits)
    return value if INT_MIN <= value <= INT_MAX else _OUT_OF_RANGE


def _float(text: str) -> float | _OutOfRange:
    value = float(text)
    return value if math.isfinite(value) else _OUT_OF_RANGE


def _constant(name: str) -> _OutOfRange:
    return _OUT_OF_RANGE  # NaN, Infinity, -Infinity: not JSON


def _too_deep(where: str) -> str:
    return f"{where}: nested more than {MAX_DEPTH} levels deep; flatten it"


def _shape_problems(data: dict[str, Any], source: str) -> list[str]:
    """Nesting past MAX_DEPTH and numbers out of range, with their paths; iterative, so no
    input can exhaust the stack here."""
    problems: list[str] = []
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return [_too_deep(_path(path, source))]
        if value is _OUT_OF_RANGE:
            problems.append(
                f"{_path(path, source)}: number out of range (integers must fit in 64 bits, "
                "and numbers must be finite)"
            )
        elif isinstance(value, dict):
            stack.extend((child, (*path, key)) for key, child in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(
                (child, (*path, f"[{i}]")) for i, child in reversed(list(enumerate(value)))
            )
    return problems


def _path(path: tuple[str, ...], source: str) -> str:
    """config.json problems are bare JSON paths, as every other config problem; another
    file's (secrets.json) name the file first."""
    dotted = ".".join(path).replace(".[", "[")
    if not dotted:
        return source
    return dotted if source == "config.json" else f"{source}: {dotted}"


def _duplicates(value: Any, source: str, path: tuple[str, ...]) -> list[str]:
    problems: list[str] = []
    if isinstance(value, _Object):
        where = ".".join(path) or source
        noun = "name" if len(path) == 1 and path[0] in NAMED_SECTIONS else "key"
        problems.extend(f"{where}: duplicate {noun} {key!r}" for key in value.duplicates)
        for key, child in value.items():
            problems.extend(_duplicates(child, source, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            problems.extend(_duplicates(child, source, (*path, f"[{index}]")))
    return problems


def _plain(value: Any) -> Any:
    """The same data with ordinary dicts, so nothing downstream sees the bookkeeping class."""
    if isinstance(value, dict):
        return {key: _plain(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_plain(child) for child in value]
    return value
