"""Choosing the step that answers a request; pure, so branching is tested without a server."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from choir.scripted.script import ReplyStep, Script, Step, ToolCallsStep

_PLACEHOLDER = re.compile(r"\{(\d+)\}")


@dataclass(frozen=True, slots=True)
class Turn:
    """The last user or tool message of a request: what step conditions look at."""

    role: str
    """`user` or `tool`."""
    text: str
    """Its text content (text parts joined)."""


def last_turn(messages: Sequence[Any]) -> Turn | None:
    """The last user or tool message, or None when the conversation has neither."""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") in ("user", "tool"):
            return Turn(message["role"], content_text(message.get("content")))
    return None


def content_text(content: Any) -> str:
    """A message's text: the string itself, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def captures(step: Step, turn: Turn | None) -> tuple[str, ...]:
    """The groups of `step`'s `match_regex` in `turn` (for `templated` steps); unmatched ones
    are empty. A tool message's text is JSON: a group taken from it has its escapes undone."""
    if step.match_regex is None or turn is None:
        return ()
    found = re.search(step.match_regex, turn.text)
    if found is None:
        return ()
    groups = tuple(group or "" for group in found.groups())
    return tuple(_unescaped(group) for group in groups) if turn.role == "tool" else groups


def _unescaped(text: str) -> str:
    try:
        value = json.loads(f'"{text}"')
    except ValueError:
        return text
    return value if isinstance(value, str) else text


def fill(template: str, groups: Sequence[str]) -> str:
    """`template` with `{n}` replaced by group n (1-based); other braces are left alone."""
    return _PLACEHOLDER.sub(
        lambda m: groups[int(m[1]) - 1] if int(m[1]) <= len(groups) else m[0], template
    )


def matches(step: Step, turn: Turn | None) -> bool:
    """Whether `step`'s conditions hold for `turn`; a step without conditions always matches."""
    role, text = (turn.role, turn.text) if turn else ("", "")
    if step.after is not None and step.after != role:
        return False
    if step.match is not None and step.match.casefold() not in text.casefold():
        return False
    return step.match_regex is None or re.search(step.match_regex, text) is not None


class ScriptPlayer:
    """Replays one script: each request gets the first unused step whose conditions hold."""

    def __init__(self, script: Script) -> None:
        self.script = script
        """What is replayed."""
        self._used: set[int] = set()
        self._calls = 0

    def next_step(self, messages: Sequence[Any]) -> Step | None:
        """The step answering a request with `messages`; None when no step is left for it.
        A `templated` step comes back filled in with what its `match_regex` captured."""
        turn = last_turn(messages)
        for index, step in enumerate(self.script.steps):
            if index not in self._used and matches(step, turn):
                if not step.repeat:
                    self._used.add(index)
                return filled(step, captures(step, turn)) if step.templated else step
        return None

    def new_call_id(self) -> str:
        """A tool call id unique within this script's replay."""
        self._calls += 1
        return f"call_{self._calls}"

    @property
    def remaining(self) -> int:
        """Steps not used up yet (`repeat` steps never are)."""
        return len(self.script.steps) - len(self._used)


def filled(step: Step, groups: Sequence[str]) -> Step:
    """`step` with its text and string call arguments filled in from `groups`."""
    if isinstance(step, ReplyStep):
        return step.model_copy(update={"text": fill(step.text, groups)})
    if isinstance(step, ToolCallsStep):
        calls = [
            call.model_copy(update={"arguments": _filled_value(call.arguments, groups)})
            for call in step.calls
        ]
        return step.model_copy(update={"text": fill(step.text, groups), "calls": calls})
    return step


def _filled_value(value: Any, groups: Sequence[str]) -> Any:
    if isinstance(value, str):
        return fill(value, groups)
    if isinstance(value, dict):
        return {key: _filled_value(item, groups) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled_value(item, groups) for item in value]
    return value
