"""SVG snapshots of the monitoring views at a fixed size with fixed data (`tests/tui/sample.py`).

Regenerate after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`
and look at the report before committing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.tui.sample import feed, sample_app
from tui.views import spec

SIZE = (110, 30)


def showing(view_id: str) -> Any:
    async def run_before(pilot: Pilot[None]) -> None:
        feed(pilot.app)  # type: ignore[arg-type]
        await pilot.pause()
        await pilot.press(spec(view_id).key)
        await pilot.pause()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("view_id", ["agents", "lanes", "locks", "cores", "events"])
def test_view_snapshot(snap_compare: Any, view_id: str) -> None:
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=showing(view_id))


def test_offline_screen_snapshot(snap_compare: Any) -> None:
    from choir.home import ChoirHome
    from tui.app import ChoirApp

    app = ChoirApp(ChoirHome(Path("/nonexistent/choir-home")))

    async def run_before(pilot: Pilot[None]) -> None:
        for _ in range(40):
            await pilot.pause(0.05)
            if type(app.screen).__name__ == "OfflineScreen":
                break
        await pilot.pause()

    assert snap_compare(app, terminal_size=(90, 24), run_before=run_before)
