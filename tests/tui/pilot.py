"""Driving `choir tui` under Textual's pilot, shared by the monitoring and the action tests."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from textual.pilot import Pilot

from choir.home import ChoirHome
from tui.app import ChoirApp


@asynccontextmanager
async def console(
    home: ChoirHome, size: tuple[int, int] = (120, 40)
) -> AsyncIterator[tuple[ChoirApp, Pilot[None]]]:
    """`choir tui` on `home` under the pilot, once connected and resynced."""
    app = ChoirApp(home)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.state.connection == "connected", what="connected")
        yield app, pilot


async def until(
    pilot: Pilot[Any],
    condition: Callable[[], bool | Awaitable[bool]],
    within: float = 20.0,
    what: str = "the console to show it",
) -> None:
    """Let the console run until `condition` holds; fails after `within` seconds."""
    began = time.monotonic()
    while True:
        outcome = condition()
        if not isinstance(outcome, bool):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() - began > within:
            raise AssertionError(f"waited {within} s for {what}")
        await pilot.pause(0.05)


async def show_tab(pilot: Pilot[Any], view_id: str) -> None:
    """Switch tabs the way the operator does: with the tab's key."""
    from tui.views import spec

    await pilot.press(spec(view_id).key)
    await pilot.pause()
