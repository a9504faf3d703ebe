"""Lanes, Locks and Cores on a real choird and agent: a core job appears, holds the workspace
lock, shows its latest event, takes an injected instruction and is cancelled from the console."""

from __future__ import annotations

from choir.protocol.operator.views import EventView
from tests.tui.conftest import Live, column
from tests.tui.pilot import console, until
from tests.tui.pilot import show_tab as tab
from tui.app import ChoirApp


def rows(app: ChoirApp, table_id: str, *keys: str) -> list[tuple[str, ...]]:
    columns = [column(app, table_id, key) for key in keys]
    return list(zip(*columns, strict=True))


async def events_of(live: Live, session_id: str, kind: str) -> list[EventView]:
    answer = await live.client.session_events(session_id, limit=1000)
    return [event for event in answer.events if event.event_type == kind]


async def test_a_core_job_shows_in_lanes_locks_and_cores_and_is_cancelled(live: Live):
    session_id = (await live.client.agent_start("agent-1")).session_id
    async with console(live.home) as (app, pilot):
        await until(pilot, lambda: app.state.session_of("agent-1") == session_id)
        await tab(pilot, "lanes")
        await until(pilot, lambda: "edge" in column(app, "lanes-table", "lane"), what="edge lane")

        await live.client.chat_send("agent-1", "please start the slow job")
        await until(pilot, lambda: "core:slow" in column(app, "lanes-table", "lane"))
        await tab(pilot, "locks")
        await until(
            pilot,
            lambda: ("workspace", "X", "core:slow") in rows(app, "locks-table", *LOCK_COLUMNS),
            what="the slow job's workspace lock",
        )
        await tab(pilot, "cores")
        await until(pilot, lambda: column(app, "cores-table", "job") == ["slow"])
        await until(pilot, lambda: "waiting-tool" in column(app, "cores-table", "state"))
        await until(
            pilot,
            lambda: column(app, "cores-table", "latest")[0].startswith("tool_proposal: choir.exec"),
            what="the job's latest CoreEvent",
        )

        await pilot.press("i")
        await pilot.pause()
        await pilot.press(*"use fewer seconds")
        await pilot.press("enter")
        await until(
            pilot,
            lambda: _injected(live, session_id),
            what="the instruction committed by edge",
        )

        await pilot.press("c")
        await pilot.pause()
        assert type(app.screen).__name__ == "ConfirmDialog"
        await pilot.press("y")
        await until(pilot, lambda: column(app, "cores-table", "state") == ["terminated"])
        await tab(pilot, "locks")
        await until(pilot, lambda: column(app, "locks-table", "resource") == [])


LOCK_COLUMNS = ("resource", "mode", "holders")


async def _injected(live: Live, session_id: str) -> bool:
    injected = await events_of(live, session_id, "injected_instruction")
    return any("for core job slow: use fewer seconds" in e.payload["content"] for e in injected)
