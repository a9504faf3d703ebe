"""Names of tools, skills and skill states, and the reversible tool wire-name mapping.

Canonical tool names are dotted and namespaced (§8.2: `choir.fs.read`). OpenAI-compatible APIs
only accept function names matching `^[a-zA-Z0-9_-]{1,64}$`, so the LLM sees a *wire name* where
each `.` becomes `__` (`choir.fs.read` <-> `choir__fs__read`). The mapping is reversible because a
canonical segment may not start or end with `_` nor contain `__` — which is why the canonical
pattern here is slightly stricter than "lowercase, digits and underscores".
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import AfterValidator, WithJsonSchema

_SEGMENT: Final = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*"
TOOL_NAME_PATTERN: Final = rf"^{_SEGMENT}(?:\.{_SEGMENT})+$"
SLUG_PATTERN: Final = r"^[a-z][a-z0-9_-]{0,63}$"
WIRE_NAME_MAX: Final = 64
"""OpenAI's limit on a function name."""

_TOOL_NAME_RE: Final = re.compile(TOOL_NAME_PATTERN)
_SLUG_RE: Final = re.compile(SLUG_PATTERN)


def to_wire_name(name: str) -> str:
    """The function name the LLM sees: `choir.fs.read` -> `choir__fs__read`."""
    return name.replace(".", "__")


def from_wire_name(wire_name: str) -> str:
    """The canonical tool name of an LLM function name: `choir__fs__read` -> `choir.fs.read`."""
    return wire_name.replace("__", ".")


def is_tool_name(value: str) -> bool:
    return _TOOL_NAME_RE.fullmatch(value) is not None and len(to_wire_name(value)) <= WIRE_NAME_MAX


def _check_tool_name(value: str) -> str:
    if not _TOOL_NAME_RE.fullmatch(value):
        raise ValueError(
            f"invalid tool name {value!r}: use dotted lowercase segments like 'choir.fs.read' "
            "(letters, digits, single inner underscores; at least two segments)"
        )
    if len(to_wire_name(value)) > WIRE_NAME_MAX:
        raise ValueError(
            f"tool name {value!r} is too long: its wire name must fit {WIRE_NAME_MAX} characters"
        )
    return value


def _slug_checker(what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not _SLUG_RE.fullmatch(value):
            raise ValueError(
                f"invalid {what} {value!r}: use up to 64 lowercase letters, digits, '_' or '-', "
                "starting with a letter"
            )
        return value

    return AfterValidator(check)


_SLUG_SCHEMA: Final = WithJsonSchema({"type": "string", "pattern": SLUG_PATTERN})

ToolName = Annotated[
    str,
    AfterValidator(_check_tool_name),
    WithJsonSchema({"type": "string", "pattern": TOOL_NAME_PATTERN}),
]
"""A canonical, namespaced tool name such as `choir.fs.read`."""

SkillName = Annotated[str, _slug_checker("skill name"), _SLUG_SCHEMA]
"""A skill's name, e.g. `tool-builder`."""

StateName = Annotated[str, _slug_checker("state name"), _SLUG_SCHEMA]
"""A skill state's name, e.g. `understand`."""

EventName = Annotated[str, _slug_checker("transition event"), _SLUG_SCHEMA]
"""A skill transition trigger, e.g. `complete`, `revise`, `fail`."""
