"""The Locks tab: the selected agent's §9 lock table — resource, mode, holders, waiters, held for.

choir-agent sends its table with REPORT_STATUS whenever it changes
(`choir.agent.kernel.lock_report`); choird keeps the latest per session (`session.locks`) and
publishes each as a `locks` feed item. Ages count up locally from the report: `held_for_s` was true
at `reported_at`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable

from tui.messages import LocksReported
from tui.views.base import ChoirView
from tui.widgets.caption import Caption
from tui.widgets.format import seconds_text
from tui.widgets.tables import sync_rows

if TYPE_CHECKING:
    from choir.protocol.operator.views import LockView

COLUMNS: Final = (
    ("resource", "resource"),
    ("mode", "mode"),
    ("holders", "holders"),
    ("waiters", "waiters"),
    ("held for", "held"),
)
MODE_STYLES: Final = {"X": "bold #e06c75", "S": "#56b6f7", "FREE": "dim"}


class LocksView(ChoirView):
    """One row per held or awaited resource."""

    VIEW_ID = "locks"
    TITLE = "Locks"

    DEFAULT_CSS = """
    LocksView #locks-caption { height: 1; padding: 0 1; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Caption(id="locks-caption")
        table: DataTable[Any] = DataTable(id="locks-table", cursor_type="row")
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        yield table

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(1.0, self.redraw)

    def redraw(self) -> None:
        session_id = self.selected_session
        table_data = self.state.locks.get(session_id or "")
        locks = table_data.locks if table_data else []
        caption = self.query_one("#locks-caption", Caption)
        if session_id is None:
            caption.show(f"{self.selected_agent or 'No agent'} is not running: no locks.")
        elif not locks:
            caption.show(f"session {session_id}: no locks held or awaited")
        else:
            waiting = sum(len(lock.waiters) for lock in locks)
            caption.show(f"session {session_id}: {len(locks)} resources, {waiting} waiting")
        reported_at = table_data.reported_at if table_data else None
        elapsed = _since(reported_at, self.console.clock())
        sync_rows(
            self.query_one("#locks-table", DataTable),
            [key for _, key in COLUMNS],
            [(lock.resource, cells(lock, elapsed)) for lock in locks],
        )

    def on_locks_reported(self, message: LocksReported) -> None:
        if message.data.session_id == self.selected_session:
            self.redraw()


def _since(reported_at: str | None, now: datetime) -> float:
    if not reported_at:
        return 0.0
    return max((now - datetime.fromisoformat(reported_at)).total_seconds(), 0.0)


def cells(lock: LockView, elapsed: float) -> list[Text | str]:
    """A row; ages are the reported ones plus the time since the report."""
    mode = lock.mode
    held = lock.held_for_s
    return [
        Text(lock.resource, style="bold"),
        Text(mode, style=MODE_STYLES.get(mode, "")),
        ", ".join(lock.holders) or "—",
        ", ".join(
            f"{w.owner}:{w.mode} ({seconds_text(w.waiting_s + elapsed)})" for w in lock.waiters
        )
        or "—",
        "—" if held is None else seconds_text(held + elapsed),
    ]
