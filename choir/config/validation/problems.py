"""Turn pydantic validation errors into `<json.path>: <problem>` lines an operator can act on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from choir.config.base import UNKNOWN_TAG

_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "required key missing",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
}
"""pydantic messages that would name Python classes or say less than they should."""


def json_path(loc: Sequence[int | str], root: str = "config.json") -> str:
    """`('models', 'sonnet', 'temperature')` -> `models.sonnet.temperature`.

    Union tags (`type=telegram`; no config name contains `=`) and pydantic's `[key]` marker for
    dict-key errors are dropped: the operator's file has neither.
    """
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item != "[key]" and "=" not in item:
            parts.append(item)
    return ".".join(parts).replace(".[", "[") or root


def describe(error: ErrorDetails) -> str:
    """One `<path>: <problem>` line for one pydantic error."""
    path = json_path(error["loc"])
    if error["type"] == UNKNOWN_TAG:
        return _unknown_tag(path, error.get("ctx") or {}, error["input"])
    message = _MESSAGES.get(error["type"], error["msg"])
    return f"{path}: {message}"


def _unknown_tag(path: str, ctx: Mapping[str, Any], data: Any) -> str:
    field, noun, known = ctx["field"], ctx["noun"], ctx["known"]
    if not isinstance(data, Mapping):
        return f"{path}: must be a JSON object"
    if field not in data:
        return f"{path}.{field}: required key missing (one of: {known})"
    return f"{path}.{field}: unknown {noun} {data[field]!r} (known: {known})"


def problems_of(error: ValidationError) -> list[str]:
    """Every error of a failed validation, one line each, in file order."""
    return [describe(detail) for detail in error.errors(include_url=False)]
