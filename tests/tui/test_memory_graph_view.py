"""The Memory tab shows a knowledge item's place in the graph (seed design 003): its type, loc
and tags, and its edges both ways, against a real choird."""

from __future__ import annotations

from tests.tui.conftest import Live
from tests.tui.pilot import console, show_tab, until
from tests.tui.test_memory_view import shown
from tui.views.memory import MemoryView


async def test_an_opened_knowledge_item_shows_its_type_loc_tags_and_edges(live: Live):
    wifi = await live.client.knowledge_add(
        "agent-1", "the office wifi is choir-guest", name="wifi", tags=["net"],
        fields={"loc": "office:net", "type": "record"},
    )  # fmt: skip
    await live.client.knowledge_add("agent-1", "the router is in the attic", name="router")
    await live.client.knowledge_add("agent-1", "summary of the office network", name="summary")
    await live.client.knowledge_link("agent-1", "wifi", "router", "relates_to")
    await live.client.knowledge_link("agent-1", "summary", "wifi", "derived_from")
    async with console(live.home) as (app, pilot):
        app.select_agent("agent-1")
        await show_tab(pilot, "memory")
        view = app.query_one(MemoryView)
        await pilot.press("k")
        await until(pilot, lambda: "3 knowledge item(s)" in shown(app, "memory-what"))
        assert next(iter(view.table.rows)).value == wifi.item.id
        await pilot.press("enter")
        await until(pilot, lambda: "choir-guest" in shown(app, "memory-detail"), what="item")
        detail = shown(app, "memory-detail")
        assert "record · loc office:net · tags net" in detail
        assert "→ relates_to router" in detail
        assert "← summary derived_from this" in detail
