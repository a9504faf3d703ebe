"""A session's messages in order (`choir.core.memory.browse`): who said what, a reply repeating
the model's text once, tool calls as sentences at their result (masked results unread), long
texts cut."""

from __future__ import annotations

from datetime import UTC, datetime

from choir.core.memory.browse import TEXT_CHARS, MessageLine, message_lines
from choir.protocol.log.chain import GENESIS_HASH
from choir.protocol.log.committed import CommittedEvent
from choir.protocol.log.events import (
    AgentReplied,
    Event,
    InjectedInstruction,
    ModelOutput,
    ToolCall,
    ToolCallRequested,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.tooling.tools import ToolResult


def logged(events: list[tuple[str, Event]]) -> list[CommittedEvent]:
    sealed, previous = [], GENESIS_HASH
    for rev, (lane, event) in enumerate(events, start=1):
        committed = CommittedEvent.seal(
            rev=rev, lane=lane, ts=datetime.now(UTC), hash_prev=previous, event=event
        )
        sealed.append(committed)
        previous = committed.hash
    return sealed


def test_the_conversation_reads_in_order_with_tool_calls_as_sentences():
    search = ToolCall(id="s", name="choir.web.search", arguments={"query": "castor uptime"})
    events = logged(
        [
            ("edge", UserMsg(text="is castor up?")),
            (
                "edge",
                ModelOutput(lane="edge", model="m", text="Let me check.", tool_calls=[search]),
            ),
            ("edge", ToolCallRequested(call_id="s", tool="choir.web.search", arguments={})),
            (
                "edge",
                ToolResultCommitted(
                    call_id="s",
                    tool="choir.web.search",
                    result=ToolResult.ok("3 results", results=[{"snippet": "SECRET DATA"}] * 3),
                ),
            ),
            ("edge", ModelOutput(lane="edge", model="m", text="Castor is up.")),
            ("edge", AgentReplied(text="Castor is up.")),
            (
                "edge",
                InjectedInstruction(target="edge", content="also check pollux", source="user"),
            ),
            ("core:ops", ModelOutput(lane="core:ops", model="m", text="x" * (TEXT_CHARS + 5))),
        ]
    )

    lines = message_lines(reversed(events))
    masked = message_lines(events, masked={"choir.web.search"})

    assert [(line.rev, line.who, line.text) for line in lines[:6]] == [
        (1, "user", "is castor up?"),
        (2, "agent", "Let me check."),
        (4, "agent", 'searched the web for "castor uptime" (3 results)'),
        (5, "agent", "Castor is up."),
        (7, "user (injected)", "also check pollux"),
        (8, "agent (core job ops)", "x" * (TEXT_CHARS - 1) + "…"),
    ]
    assert len(lines) == 6
    assert lines[-1].cut
    assert not any("SECRET" in line.text for line in lines)
    assert MessageLine(4, "agent", 'searched the web for "castor uptime"') in masked
