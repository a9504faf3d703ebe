"""The Workspaces tab: every configured workspace, who holds its lease; reset with confirmation.

A reset deletes everything inside the workspace directory (§15.4). choird stops the agent
holding the lease first, gracefully (or, without an agent runtime, refuses and says so), so the
dialog names that agent. The list is re-read with `workspace.list` on mount, after a resync and
when sessions start or end (leases change only then) — never on a timer.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static

from choir.errors import ChoirError, ConflictError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.dialogs import ConfirmDialog
from tui.messages import AgentsUpdated, SessionChanged
from tui.views.base import ChoirView, PaletteCommand

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")


EMPTY: Final = 'No workspaces configured: add one under "workspaces" in config.json.'


class WorkspacesView(ChoirView):
    """Workspaces with their lease holders; `r` resets the highlighted one after a confirmation."""

    VIEW_ID = "workspaces"
    TITLE = "Workspaces"

    DEFAULT_CSS = """
    WorkspacesView #workspaces-empty { height: auto; padding: 1 2; color: $text-muted; }
    WorkspacesView #workspaces-table { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "reset", "Reset"),
        Binding("f", "refresh", "Refresh"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.workspaces: dict[str, a.WorkspaceView] = {}
        """name -> its `workspace.list` row."""

    def compose(self) -> ComposeResult:
        yield Static(EMPTY, id="workspaces-empty", markup=False)
        yield DataTable(id="workspaces-table", cursor_type="row", zebra_stripes=True)

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#workspaces-table", DataTable)

    def on_mount(self) -> None:
        self.table.add_columns("workspace", "path", "leased to", "session", "since")
        super().on_mount()
        self.read()

    def on_resynced(self) -> None:
        super().on_resynced()
        self.read()

    def on_session_changed(self, _: SessionChanged) -> None:
        self.read()

    def on_agents_updated(self, _: AgentsUpdated) -> None:
        self.read()

    def redraw(self) -> None:
        table = self.table
        keep = self.highlighted()
        table.clear()
        for name, row in sorted(self.workspaces.items()):
            path = Text(row.path)
            if not row.exists:
                path.append(" (missing)", "red")
            holder = row.leased_to
            table.add_row(
                name,
                path,
                Text(holder, "bold") if holder else Text("-", "dim"),
                row.session_id or "-",
                (row.leased_at or "-")[:19].replace("T", " "),
                key=name,
            )
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep))
        self.query_one("#workspaces-empty").display = not self.workspaces

    def highlighted(self) -> str | None:
        table = self.table
        if not table.row_count:
            return None
        row = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return None if row.value is None else str(row.value)

    @work(group="workspaces-read", exclusive=True)
    async def read(self) -> None:
        if not self.bridge.connected:
            return  # the resync reads it once connected
        try:
            rows = (await self.bridge.ask(OperatorVerb.WORKSPACE_LIST, a.WorkspaceList)).workspaces
        except ChoirError:
            return  # not connected: the resync reads it again
        self.workspaces = {row.name: row for row in rows}
        if self.is_attached:  # the console may have closed while the call ran
            with contextlib.suppress(NoMatches):  # ...and already removed the table
                self.redraw()

    def action_refresh(self) -> None:
        self.read()

    def action_reset(self) -> None:
        name = self.highlighted()
        if name is None:
            self.notify("No workspace to reset.", severity="warning")
            return
        self.reset(name)

    @work(group="workspace-reset", exclusive=True)
    async def reset(self, name: str) -> None:
        """Confirm, then `workspace.reset`: choird stops the holder first, then empties it."""
        row = self.workspaces.get(name)
        path = row.path if row else "?"
        detail = f"Deletes every file in {path} (the directory itself stays)."
        if row and row.leased_to:
            detail += (
                f"\n{row.leased_to} holds it (session {row.session_id}): choird "
                f"stops {row.leased_to} gracefully first."
            )
        dialog = ConfirmDialog(f"Reset workspace {name}?", detail, yes="Reset", danger=True)
        if not await self.app.push_screen_wait(dialog):
            return
        try:
            answer = await self.bridge.ask(
                OperatorVerb.WORKSPACE_RESET, a.WorkspaceReset, name=name
            )
        except ConflictError as error:
            self.notify(error.message, title="workspace reset", severity="warning", markup=False)
            return
        except ChoirError as error:
            self.notify(error.message, title="workspace reset", severity="error", markup=False)
            return
        stopped = answer.stopped
        after = f" (stopped {stopped.agent_id} first)" if stopped else ""
        self.notify(
            f"workspace {name} reset: {answer.removed} entries removed{after}",
            title="workspace reset",
            markup=False,
        )
        self.read()

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "Workspaces: reset the highlighted workspace",
                "choirctl workspace reset <name>",
                self.action_reset,
            )
        ]
