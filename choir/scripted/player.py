"""Choosing the step that answers a request; pure, so branching is tested without a server."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from choir.scripted.script import Script, Step


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
        """The step answering a request with `messages`; None when no step is left for it."""
        turn = last_turn(messages)
        for index, step in enumerate(self.script.steps):
            if index not in self._used and matches(step, turn):
                if not step.repeat:
                    self._used.add(index)
                return step
        return None

    def new_call_id(self) -> str:
        """A tool call id unique within this script's replay."""
        self._calls += 1
        return f"call_{self._calls}"

    @property
    def remaining(self) -> int:
        """Steps not used up yet (`repeat` steps never are)."""
        return len(self.script.steps) - len(self._used)
