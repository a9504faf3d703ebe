"""The Lanes tab: the selected agent's edge lane and each core job — state, skill, step, budgets.

Rows come from `state.lanes` (REPORT_STATUS as the feed's `lane` items carry it, and the lanes of
`agent.status` after a resync); a report updates its row in place. State colours are the shared
lane-state kinds (idle / reasoning / waiting-tool / completed / terminated).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from tui.messages import LaneReported
from tui.views.base import ChoirView
from tui.widgets.caption import Caption
from tui.widgets.format import age, budgets_text
from tui.widgets.lane_state import STYLES, lane_text
from tui.widgets.tables import sync_rows

if TYPE_CHECKING:
    from choir.protocol.operator.views import CoreView, LaneView

COLUMNS: Final = (
    ("lane", "lane"),
    ("state", "state"),
    ("skill", "skill"),
    ("step", "step"),
    ("budgets left", "budgets"),
    ("reported", "reported"),
)


def legend() -> Text:
    text = Text("states: ", style="dim")
    for kind in ("idle", "reasoning", "waiting-tool", "completed", "terminated"):
        text.append(f"■ {kind}  ", style=STYLES[kind])
    return text


class LanesView(ChoirView):
    """One row per lane of the selected agent's session."""

    VIEW_ID = "lanes"
    TITLE = "Lanes"

    DEFAULT_CSS = """
    LanesView #lanes-caption, LanesView #lanes-legend { height: 1; padding: 0 1; }
    LanesView #lanes-caption { color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Caption(id="lanes-caption")
        table: DataTable[Any] = DataTable(id="lanes-table", cursor_type="row")
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Static(legend(), id="lanes-legend")

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(1.0, self.redraw)

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#lanes-table", DataTable)

    def redraw(self) -> None:
        session_id = self.selected_session
        lanes = self.state.session_lanes(session_id)
        caption = self.query_one("#lanes-caption", Caption)
        if self.selected_agent is None:
            caption.show("No agent selected.")
        elif session_id is None:
            caption.show(f"{self.selected_agent} is not running: start it in the Agents tab (s).")
        else:
            caption.show(f"{self.selected_agent} · session {session_id} · {len(lanes)} lanes")
        now = self.console.clock()
        rows = [(lane.lane, cells(lane, now)) for lane in lanes]
        sync_rows(self.table, [key for _, key in COLUMNS], rows)

    def on_lane_reported(self, message: LaneReported) -> None:
        if message.data.session_id == self.selected_session:
            self.redraw()


def cells(lane: LaneView | CoreView, now: datetime) -> list[Text | str]:
    step = lane.step
    reported = lane.reported_at
    when = age(datetime.fromisoformat(reported), now) + " ago" if reported else "—"
    return [
        Text(lane.lane, style="bold" if lane.lane == "edge" else ""),
        lane_text(lane.state),
        lane.skill or "—",
        "—" if step is None else str(step),
        budgets_text(lane.budget_remaining),
        when,
    ]
