"""The compaction LLM call: what it is asked, and how its reply is read (§11.3).

The model never rewrites the summary; it answers with one `{"memory_delta": {...}}` document
(`MemoryDeltaDocument`) that `ReferenceSummary.apply` folds in, so a bad reply can only touch
what it names. Events are shown one per line with their short hash, the handle facts and
references cite and `choir.memory.query mode=hash` finds again. Long tool output is cut: the
summary keeps what matters, the log keeps everything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Final

from pydantic import ValidationError

from choir.core.memory.working import WindowEvent
from choir.core.prompt.window import Message, ResultView, event_messages, json_text
from choir.protocol.log.lanes import EDGE_LANE, job_name_of
from choir.protocol.names import from_wire_name
from choir.protocol.problems import validation_problems
from choir.protocol.tooling.memory import MemoryDelta, MemoryDeltaDocument, ReferenceSummary

__all__ = ["EVENT_CHARS", "compaction_messages", "parse_delta"]

EVENT_CHARS: Final = 2_000
"""Longest excerpt of one event the compaction call sees."""

OVERWRITE_SHARE: Final = 0.5
"""Past this share of `max_summary_chars`, the model is told to rewrite rather than append."""

_FENCE: Final = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)

_INSTRUCTIONS: Final = """\
You maintain the reference summary of the {who} of an AI agent: everything that no longer fits \
its context window. Fold the events below into it.
Answer with one JSON object and nothing else, of this JSON Schema:
{schema}
- mode "append" adds summary_update to the summary; "overwrite" replaces the summary text with it.
- Keep what the lane will need later: requests, decisions, results, names, paths, errors, open \
work. Drop chatter and raw tool output. Write from the {perspective}'s side, concisely, \
saying who said or did what (the user, the agent, a tool). The summary update is also kept as \
this window's archive entry, which can be searched and opened by name later.
- add_references: hashes (as shown in brackets) of events worth finding again.
- add_fact: one durable key/value fact, with the hash of its event as source_event; remove_fact \
drops an outdated fact by key. Omit both when there is none.{rewrite}"""

_REWRITE: Final = """
- The summary is long: use mode "overwrite" and rewrite it whole, under {words} words."""


@cache
def _delta_schema() -> str:
    """The memory delta's JSON Schema as the instructions show it: the same every fold, and
    generating it cost each fold a few milliseconds."""
    return json_text(MemoryDeltaDocument.model_json_schema())


def compaction_messages(
    lane: str,
    summary: ReferenceSummary,
    folded: Sequence[WindowEvent],
    result_view: ResultView,
    max_summary_chars: int,
) -> list[Message]:
    """The system and user messages of one compaction call."""
    rewrite = ""
    if len(summary.summary) > max_summary_chars * OVERWRITE_SHARE:
        rewrite = _REWRITE.format(words=max_summary_chars // 12)
    edge = lane == EDGE_LANE
    instructions = _INSTRUCTIONS.format(
        who="edge lane (the one who talks with the user)"
        if edge
        else f"core job {job_name_of(lane)}",
        perspective="edge lane" if edge else "core job",
        schema=_delta_schema(),
        rewrite=rewrite,
    )
    lines = [_event_line(item, result_view) for item in folded]
    body = "\n".join(
        [
            f"Current reference summary: {summary.model_dump_json()}",
            "",
            "Events to fold, oldest first ([hash] #rev role: content):",
            *lines,
        ]
    )
    return [{"role": "system", "content": instructions}, {"role": "user", "content": body}]


def parse_delta(reply: str) -> MemoryDelta | list[str]:
    """The delta in a compaction reply, or the problems that make it invalid.

    Accepts the document `{"memory_delta": {...}}`, or the bare delta, optionally inside a
    Markdown code fence (models add one even when told not to).
    """
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        return MemoryDeltaDocument.model_validate_json(text).memory_delta
    except ValidationError as document_error:
        try:
            return MemoryDelta.model_validate_json(text)
        except ValidationError:
            return validation_problems(document_error)


def _event_line(item: WindowEvent, result_view: ResultView) -> str:
    parts = []
    for message in event_messages(item.event, result_view):
        content = message.get("content") or ""
        calls = message.get("tool_calls", [])
        called = "; ".join(_call_text(call["function"]) for call in calls)
        text = " -> ".join(part for part in (content, f"calls {called}" if called else "") if part)
        parts.append(f"{message['role']}: {text}")
    line = " | ".join(parts) or item.event.kind
    if len(line) > EVENT_CHARS:
        line = line[:EVENT_CHARS] + " …[cut]"
    return f"[{item.ref}] #{item.rev} {line}"


def _call_text(function: dict[str, str]) -> str:
    return f"{from_wire_name(function['name'])}({function['arguments']})"
