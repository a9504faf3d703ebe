"""The console at any terminal size: tiny ones never crash it, 80x24 shows every view's table,
and large ones use the space."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from tests.tui.sample import feed, sample_app
from tui.views import VIEWS
from tui.widgets.timeline import Timeline

SIZES = [(1, 1), (5, 3), (12, 4), (20, 6), (40, 10), (80, 24), (200, 60)]


@pytest.mark.parametrize("size", SIZES)
async def test_every_tab_survives_any_size(size: tuple[int, int]):
    app = sample_app()
    async with app.run_test(size=size) as pilot:
        feed(app)
        await pilot.pause()
        for view in VIEWS:
            await pilot.press(view.key)
            await pilot.pause()
        assert app.is_running


async def test_resizing_down_and_up_under_a_live_timeline_keeps_working():
    app = sample_app()
    async with app.run_test(size=(120, 40)) as pilot:
        feed(app)
        await pilot.press("5")
        await pilot.pause()
        for size in [(3, 2), (80, 24), (1, 1), (160, 50)]:
            await pilot.resize_terminal(*size)
            await pilot.pause()
            await pilot.press("up", "down", "end")
        line = app.query_one(Timeline)
        assert len(line.rows) == 9
        assert line.region.height > 30  # a large terminal gives the timeline the room


async def test_at_80x24_the_agents_table_shows_every_agent_and_the_header_its_health():
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        feed(app)
        await pilot.pause()
        table = app.query_one("#agents-table", DataTable)
        assert table.row_count == 2
        assert table.region.height >= 3
        assert "agents 1/2 running" in str(app.query_one("#health").render())
