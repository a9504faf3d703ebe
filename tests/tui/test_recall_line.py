"""The console's timeline shows a `memory_recalled` event on the line choirctl prints."""

from __future__ import annotations

from choir.core.memory.recall import recall_line
from choir.protocol import MemoryRecalled, RecalledItem
from choir.protocol.operator.views import EventView
from tui.widgets.event_text import summary


def test_the_console_timeline_shows_the_recall_line() -> None:
    item = RecalledItem(id="0" * 8, name="deploy.host", score=0.71, tokens=12, text="pollux")
    payload = MemoryRecalled(items=[item], tokens=12, budget_tokens=2000, took_ms=9)
    view = EventView(
        rev=2,
        lane="edge",
        event_type="memory_recalled",
        created_at=None,
        hash="0" * 64,
        payload=payload.model_dump(mode="json"),
        artifact=None,
    )
    assert summary(view) == "1 recalled, 12/2000 tokens, 9 ms: deploy.host 0.71"
    assert summary(view) == recall_line(view.payload)
