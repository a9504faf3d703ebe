"""Strict JSON reading for hand-edited files: exact error positions and no silent duplicates.

`json.loads` keeps the last of two equal keys without a word; for config.json that hides a second
definition of the same model or agent. The parse here remembers duplicates and reports each one
with its JSON path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

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
        data = json.loads(text, object_pairs_hook=_object_pairs)
    except json.JSONDecodeError as err:
        where = f"line {err.lineno}, column {err.colno}"
        return ParsedJson(None, [f"{source}: invalid JSON at {where}: {err.msg}"])
    if not isinstance(data, dict):
        return ParsedJson(None, [f"{source}: must be a JSON object {{...}}"])
    return ParsedJson(_plain(data), list(_duplicates(data, source, ())))


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
