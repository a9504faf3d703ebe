"""The Events tab on a real choird and agent: the live timeline across edge and cores, filter,
pause and resume, jump to a revision, expand a payload, and history paged in from choird."""

from __future__ import annotations

import asyncio

from tests.tui.conftest import Live
from tests.tui.pilot import console, until
from tests.tui.pilot import show_tab as tab
from tui.app import ChoirApp
from tui.views.events import EventsView
from tui.widgets.timeline import HASH, KIND, LANE, REV, Timeline


def timeline(app: ChoirApp) -> Timeline:
    return app.query_one(Timeline)


def lanes_shown(app: ChoirApp) -> set[str]:
    return {row[LANE] for row in timeline(app).rows}


async def stored_count(live: Live, session_id: str) -> int:
    return len((await live.client.session_events(session_id, limit=1000)).events)


async def chat_and_wait(live: Live, session_id: str, text: str) -> None:
    """Send `text`; return once its message, the model's answer and the reply are stored."""
    before = await stored_count(live, session_id)
    await live.client.chat_send("agent-1", text)
    for _ in range(400):
        if await stored_count(live, session_id) >= before + 3:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no reply to {text!r} was stored")


async def test_the_timeline_follows_edge_and_cores_live(live: Live):
    session_id = (await live.client.agent_start("agent-1")).session_id
    async with console(live.home) as (app, pilot):
        await tab(pilot, "events")
        view = app.query_one(EventsView)
        await until(pilot, lambda: view.session_id == session_id)
        await live.client.chat_send("agent-1", "please start the slow job")
        await until(pilot, lambda: {"edge", "core:slow"} <= lanes_shown(app), what="both lanes")
        kinds = {row[KIND] for row in timeline(app).rows}
        assert {"user_msg", "model_output", "core_started", "tool_call_committed"} <= kinds
        rows = timeline(app).rows
        assert [row[REV] for row in rows] == sorted(row[REV] for row in rows)
        assert all(len(row[HASH]) == 8 for row in rows)

        # filter by lane and type
        await pilot.press("slash")
        await pilot.press(*"lane=core:slow type=tool", "enter")
        await until(pilot, lambda: lanes_shown(app) == {"core:slow"})
        assert all("tool" in row[KIND] for row in timeline(app).rows)
        await pilot.press("slash")
        await pilot.press(*("backspace",) * 30, "enter")
        await until(pilot, lambda: "edge" in lanes_shown(app))

        # pause: new events are held, resume shows them
        await pilot.press("p")
        assert timeline(app).paused
        shown = len(timeline(app).rows)
        await live.client.chat_send("agent-1", "hello there")
        await until(pilot, lambda: timeline(app).held > 0, what="events held while paused")
        assert len(timeline(app).rows) == shown
        await pilot.press("p")
        await until(pilot, lambda: len(timeline(app).rows) > shown)
        assert "PAUSED" not in str(app.query_one("#event-status").render())

        # jump to revision 1 and expand it: the first event of the session
        await pilot.press("g")
        await pilot.pause()
        await pilot.press("1", "enter")
        await until(pilot, lambda: timeline(app).current() is not None)
        await until(pilot, lambda: timeline(app).current()[REV] == 1)  # type: ignore[index]
        await pilot.press("enter")
        await until(pilot, lambda: view.has_class("-expanded"), what="the expanded event")
        text = str(app.query_one("#event-detail-text").render())
        assert '"rev": 1' in text
        assert '"payload"' in text
        await pilot.press("escape")
        assert not view.has_class("-expanded")


async def test_older_events_are_paged_in_from_choird(live: Live):
    session_id = (await live.client.agent_start("agent-1")).session_id
    for index in range(4):
        await chat_and_wait(live, session_id, f"hello {index}")
    stored = (await live.client.session_events(session_id, limit=1000)).events
    async with console(live.home) as (app, pilot):
        await tab(pilot, "events")
        view = app.query_one(EventsView)
        await until(pilot, lambda: view.session_id == session_id and bool(timeline(app).rows))
        line = timeline(app)
        line.replace(line.rows[-3:], detached=False)  # as if only the tail were held
        first = line.first_rev
        assert first is not None
        assert first > 1
        await pilot.press("home")
        await until(pilot, lambda: line.first_rev == 1, what="older events paged in")
        assert [row[REV] for row in line.rows][: len(stored)] == [e.rev for e in stored][
            : len(line.rows)
        ]
