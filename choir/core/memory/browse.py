"""A session's messages in order, as the agent browses them (pure; seed design 004's
`memory_browse`).

    lines = message_lines(events)     # who said what, and each tool call as one sentence

What a person would call the conversation: the user's messages (injected ones marked), the
agent's words (model text; a reply repeating it is written once) and each tool call told in one
sentence (`tool_synthesis`: never a prompt-masked result's data, never a secret-named argument),
at the revision of its result. A core job's lines say which job spoke. Long texts are cut at
`TEXT_CHARS`, the line saying so.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Final

from choir.core.memory.chunking import LoggedEvent
from choir.core.memory.tool_synthesis import tool_descriptions
from choir.protocol.log.events import AgentReplied, InjectedInstruction, ModelOutput, UserMsg
from choir.protocol.log.lanes import CORE_LANE_PREFIX, EDGE_LANE

TEXT_CHARS: Final = 2_000
"""One message's text is cut to this many characters (the whole event is a `session events`
or `session_detail` away)."""


@dataclass(frozen=True, slots=True)
class MessageLine:
    """One message of the session."""

    rev: int
    who: str
    """`user`, `user (injected)`, `agent`, `agent (core job x)`."""
    text: str
    cut: bool = False
    """The text was longer than `TEXT_CHARS`."""


def message_lines(
    events: Iterable[LoggedEvent], *, masked: Collection[str] = ()
) -> list[MessageLine]:
    """The messages of `events` (any order), by revision."""
    ordered = sorted(events, key=lambda e: e.rev)
    lines: list[MessageLine] = []
    said: dict[str, str] = {}
    """The latest model text per lane, so a reply repeating it is written once."""
    for logged in ordered:
        event, who = logged.event, _speaker(logged.lane)
        match event:
            case UserMsg(text=text, attachments=files):
                attached = f" [attached: {', '.join(files)}]" if files else ""
                lines.append(_line(logged.rev, "user", text + attached))
            case InjectedInstruction(content=content, source=source):
                lines.append(
                    _line(logged.rev, "user (injected)" if source == "user" else who, content)
                )
            case ModelOutput(text=text) if text.strip():
                said[logged.lane] = text
                lines.append(_line(logged.rev, who, text))
            case AgentReplied(text=text, attachments=files):
                if said.pop(logged.lane, None) == text and not files:
                    continue
                attached = f" [attached: {', '.join(files)}]" if files else ""
                lines.append(_line(logged.rev, who, text + attached))
    for described in tool_descriptions(ordered, masked=masked):
        lines.append(_line(described.rev, _speaker(described.lane), described.text))
    return sorted(lines, key=lambda line: line.rev)


def _line(rev: int, who: str, text: str) -> MessageLine:
    if len(text) <= TEXT_CHARS:
        return MessageLine(rev, who, text)
    return MessageLine(rev, who, text[: TEXT_CHARS - 1] + "…", cut=True)


def _speaker(lane: str) -> str:
    if lane == EDGE_LANE:
        return "agent"
    return f"agent (core job {lane.removeprefix(CORE_LANE_PREFIX)})"
