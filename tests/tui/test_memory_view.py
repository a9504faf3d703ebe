"""The Memory tab against a real choird: the selected agent's stats, a search and its results,
an opened chunk with its source events, the knowledge list, and a refusal as a notification."""

from __future__ import annotations

from typing import Any

from textual.widgets import Input, Static

from tests.harness.memory import TEXTS, fill_memory
from tests.tui.actions.conftest import confirmation, notes
from tests.tui.actions.test_actions_palette import palette, prompt
from tests.tui.conftest import Live, column
from tests.tui.pilot import console, show_tab, until
from tui.dialogs import TextPrompt
from tui.views.memory import MemoryView


def shown(app: Any, widget_id: str) -> str:
    return str(app.query_one(f"#{widget_id}", Static).content)


async def test_stats_search_open_and_knowledge(live: Live):
    session_id, ids = await fill_memory(live.daemon)
    wifi = await live.client.knowledge_put("agent-1", "the office wifi is choir-guest", name="wifi")
    async with console(live.home) as (app, pilot):
        app.select_agent("agent-1")
        await show_tab(pilot, "memory")
        view = app.query_one(MemoryView)
        await until(pilot, lambda: "mid-term 3 (1 sessions)" in shown(app, "memory-stats"))
        assert "knowledge 1" in shown(app, "memory-stats")
        assert "vector coverage " in shown(app, "memory-stats")
        assert "tree depth 0" in shown(app, "memory-stats")  # as choirctl's 2nd line
        assert "embedding local (256 dims) · queue 0 · breaker closed" in shown(app, "memory-stats")

        await pilot.press("slash")
        assert isinstance(app.screen.focused, Input)
        await pilot.press(*"kubectl", "enter")
        await until(pilot, lambda: "hit(s) for 'kubectl'" in shown(app, "memory-what"))
        assert "3 hit(s) for 'kubectl' (hybrid)" in shown(app, "memory-what")
        texts = column(app, "memory-results", "text")
        assert texts[0] == TEXTS[0]  # the text match ranks first; the vectors bring the rest
        assert sorted(texts) == sorted(TEXTS)
        assert view.table.has_focus

        await pilot.press("enter")  # open the hit
        await until(pilot, lambda: "source events" in shown(app, "memory-detail"), what="item")
        detail = shown(app, "memory-detail")
        assert f"chunk {ids[0]}" in detail
        assert f"{session_id} · mid_term · tool_call · revs 1-2" in detail
        assert "memory event 1" in detail
        assert "memory event 2" in detail
        assert "memory event 3" not in detail

        await pilot.press("k")  # the knowledge list
        await until(pilot, lambda: "1 knowledge item(s)" in shown(app, "memory-what"))
        assert next(iter(view.table.rows)).value == wifi.item.id
        await pilot.press("enter")
        await until(pilot, lambda: "choir-guest" in shown(app, "memory-detail"), what="item")
        assert f"knowledge {wifi.item.id}" in shown(app, "memory-detail")

        await pilot.press("s", "o")  # knowledge store, semantic mode
        assert "[knowledge · semantic]" in shown(app, "memory-what")
        await pilot.press("slash", *"internet access", "enter")
        await until(pilot, lambda: "(semantic)" in shown(app, "memory-what"), what="search")
        assert [row.value for row in view.table.rows] == [wifi.item.id]
        assert column(app, "memory-results", "from") == [f"{wifi.item.name} · knowledge"]


def problem(prompt: TextPrompt) -> str:
    return str(prompt.query_one("#problem", Static).content)


async def asked(pilot, about: str) -> TextPrompt:
    """The prompt asking `about` (`: name (`: the one before it may still be closing)."""
    await until(
        pilot,
        lambda: isinstance(pilot.app.screen, TextPrompt) and about in pilot.app.screen.label,
        what=f"the prompt for {about}",
    )
    screen = pilot.app.screen
    assert isinstance(screen, TextPrompt)
    return screen


async def test_knowledge_from_the_palette_and_a_refusal_as_one_notification(live: Live):
    async with console(live.home) as (app, pilot):
        app.select_agent("agent-1")
        await palette(pilot, "knowledge put")
        assert (await asked(pilot, ": agent?")).value == "agent-1"
        await pilot.press("enter")
        await asked(pilot, ": text to remember?")
        await pilot.press(*"the printer is on floor two", "enter")
        await asked(pilot, ": name (")
        await pilot.press("enter")  # optional: derived from the text
        memory = await asked(pilot, ": memory (")
        assert (memory.value, memory.choices) == ("", ("knowledge", "system", "app", "personal"))
        await pilot.press("enter")  # optional: knowledge, and no user is asked
        await until(
            pilot,
            lambda: any("stored in agent-1's knowledge" in t for _, t in notes(app)),
            what="the notice",
        )
        assert not isinstance(app.screen, TextPrompt)

        await palette(pilot, "knowledge delete")
        await pilot.press("enter")  # agent-1
        await prompt(pilot)
        await pilot.press(*"no.such.key", "enter")
        dialog = await confirmation(pilot)
        assert dialog.question == "Delete no.such.key from agent-1's knowledge?"
        await pilot.press("y")
        await until(
            pilot,
            lambda: any("has no knowledge item 'no.such.key'" in t for _, t in notes(app)),
            what="the refusal",
        )
    items = (await live.client.knowledge_list("agent-1")).items
    assert [(item.text, item.memory) for item in items] == [
        ("the printer is on floor two", "knowledge")
    ]


async def test_a_personal_item_from_the_palette_asks_its_user(live: Live):
    async with console(live.home) as (app, pilot):
        app.select_agent("agent-1")
        await palette(pilot, "knowledge add")
        await asked(pilot, ": agent?")
        await pilot.press("enter")
        await asked(pilot, ": text to remember?")
        await pilot.press(*"prefers short answers", "enter")
        await asked(pilot, ": name (")
        await pilot.press(*"style", "enter")
        memory = await asked(pilot, ": memory (")
        await pilot.press(*"persnal", "enter")  # a typo is caught here, not sent
        await until(
            pilot, lambda: "is not one of" in str(memory.query_one("#problem", Static).content)
        )
        await pilot.press(*["backspace"] * 7, *"personal", "enter")
        user = await asked(pilot, ": user (")
        await pilot.press("enter")  # required for a personal item
        await until(
            pilot, lambda: "type an answer" in str(user.query_one("#problem", Static).content)
        )
        await pilot.press(*"console", "enter")
        await until(
            pilot,
            lambda: any("added to agent-1's knowledge" in t for _, t in notes(app)),
            what="the notice",
        )
        await show_tab(pilot, "memory")
        await pilot.press("k")
        await until(pilot, lambda: "1 knowledge item(s)" in shown(app, "memory-what"))
        assert column(app, "memory-results", "from") == ["style · personal of console"]
        await pilot.press("s", "slash", *"short answers", "enter")  # a search's hit: its memory
        await until(pilot, lambda: "hit(s) for" in shown(app, "memory-what"), what="the search")
        assert column(app, "memory-results", "from") == ["style · personal of console"]
    items = (await live.client.knowledge_list("agent-1")).items
    assert [(i.name, i.memory, i.user) for i in items] == [("style", "personal", "console")]
