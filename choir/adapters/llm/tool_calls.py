"""Reading the structured `tool_calls` of an assistant message (§8.2: never parsed from text).

Each call's wire name is mapped back to its canonical name and its JSON arguments are parsed. A
call naming a tool that was not offered, or carrying arguments that are not a JSON object, is kept
as an `InvalidToolCall` — the model gets a structured error for it, as for any bad tool input,
instead of the call vanishing or the lane crashing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from choir.adapters.llm.types import InvalidToolCall
from choir.protocol.lenient_json import loads_lenient
from choir.protocol.log.events import ToolCall
from choir.protocol.names import WIRE_NAME_MAX, from_wire_name, to_wire_name

UNKNOWN_TOOL = "unknown_tool"
INVALID_ARGUMENTS = "invalid_arguments"
_NOT_IN_NAME = re.compile(r"[^a-zA-Z0-9_-]")
"""Characters OpenAI-compatible APIs reject in a function name."""


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """The tool calls of one assistant message, sorted into runnable and invalid."""

    valid: list[ToolCall]
    invalid: list[InvalidToolCall]
    wire: list[dict[str, Any]]
    """Every call in OpenAI form, in the model's order, for the assistant message; names and
    arguments an API would refuse in a history are replaced (invalid calls keep the originals)."""


def offered_names(tools: Sequence[Mapping[str, Any]]) -> Mapping[str, str]:
    """Wire name -> canonical name of each tool offered to the model."""
    return _OFFERED.of(tools)


class _OfferedNames:
    """`offered_names` of the `tools` lists lately read, by the identity of their entries.

    A lane offers the same entries call after call (the registry and the skill control tools
    build each once and never change it), so their names are read once, not at every answer.
    The entries are kept with their names: an id cannot be reused while its entry is held.
    """

    __slots__ = ("_read",)

    LIMIT = 8
    """Lists remembered (a lane's, each core job's, a skill state's); the oldest goes first."""

    def __init__(self) -> None:
        self._read: dict[tuple[int, ...], tuple[tuple[Mapping[str, Any], ...], dict[str, str]]] = {}

    def of(self, tools: Sequence[Mapping[str, Any]]) -> Mapping[str, str]:
        key = tuple(map(id, tools))
        found = self._read.get(key)
        if found is not None:
            return found[1]
        names: dict[str, str] = {}
        for tool in tools:
            function = tool.get("function")
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names[function["name"]] = from_wire_name(function["name"])
        if len(self._read) >= self.LIMIT:
            del self._read[next(iter(self._read))]
        self._read[key] = (tuple(tools), names)
        return names


_OFFERED = _OfferedNames()


def read_tool_calls(raw: Sequence[Any], offered: Mapping[str, str]) -> ToolCalls:
    """Sort the model's `tool_calls` into runnable and invalid calls."""
    calls = ToolCalls(valid=[], invalid=[], wire=[])
    for index, item in enumerate(raw):
        entry = item if isinstance(item, Mapping) else {}
        function = entry.get("function")
        function = function if isinstance(function, Mapping) else {}
        call_id = _text(entry.get("id")) or f"call_{index}"
        wire_name = _text(function.get("name"))
        arguments = _arguments_text(function.get("arguments"))
        outcome = _read_one(call_id, wire_name, arguments, offered)
        if isinstance(outcome, ToolCall):
            calls.valid.append(outcome)
            calls.wire.append(_wire(call_id, to_wire_name(outcome.name), arguments or "{}"))
        else:
            calls.invalid.append(outcome)
            calls.wire.append(_wire(call_id, _echo_name(wire_name), _echo_arguments(outcome)))
    return calls


def _read_one(
    call_id: str, wire_name: str, arguments: str, offered: Mapping[str, str]
) -> ToolCall | InvalidToolCall:
    name = _canonical(wire_name, offered)
    if name is None:
        problem = (
            f"unknown tool {wire_name!r}: call one of the offered tools by its exact name"
            if wire_name
            else "a tool call without a function name: call one of the offered tools by name"
        )
        known = sorted(offered.values())
        return InvalidToolCall(call_id, wire_name, arguments, UNKNOWN_TOOL, problem, known)
    parsed = _parse_arguments(arguments)
    if isinstance(parsed, str):
        problem = f"arguments of {name} {parsed}; call it again with a JSON object of arguments"
        return InvalidToolCall(call_id, wire_name, arguments, INVALID_ARGUMENTS, problem)
    return ToolCall(id=call_id, name=name, arguments=parsed)


def _canonical(wire_name: str, offered: Mapping[str, str]) -> str | None:
    """The canonical name of an offered tool; some models answer with the dotted name itself."""
    if wire_name in offered:
        return offered[wire_name]
    return offered.get(to_wire_name(wire_name)) if "." in wire_name else None


def _parse_arguments(text: str) -> dict[str, Any] | str:
    """The arguments object, or why the text is not one."""
    if not text.strip():
        return {}
    try:
        value = loads_lenient(text)  # a lone surrogate escaped in an argument: U+FFFD
    except orjson.JSONDecodeError as exc:
        return f"are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return f"must be a JSON object, got {type(value).__name__}"
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _arguments_text(value: Any) -> str:
    """The arguments as the model sent them; a few providers send an object, not a string."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return orjson.dumps(value).decode()


def _echo_name(wire_name: str) -> str:
    """A name the API accepts in the history: providers reject the whole request otherwise."""
    return _NOT_IN_NAME.sub("_", wire_name)[:WIRE_NAME_MAX] or "unnamed_tool"


def _echo_arguments(call: InvalidToolCall) -> str:
    """Arguments the API accepts in the history; the error result tells the model what was sent."""
    return call.arguments if call.error_code == UNKNOWN_TOOL and _is_json(call.arguments) else "{}"


def _is_json(text: str) -> bool:
    return isinstance(_parse_arguments(text), dict)


def _wire(call_id: str, wire_name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": wire_name, "arguments": arguments},
    }
