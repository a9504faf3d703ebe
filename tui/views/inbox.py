"""The Inbox tab: the recovery inbox — what waits for a decision after a restart (issue 19).

Not the DMs' messages: held core jobs, crashed sessions with calls of unknown outcome, pending
approvals and those that timed out while choird was down, failed agent updates. Each row shows
its agent, since when it waits and what it is; the detail pane shows the context to decide with
(the calls and their arguments, the proposal, the failure) and the choices. `d` decides the
highlighted item: pick a choice, confirm, and choird runs the command that owns the item
(`inbox.resolve`). One decided elsewhere meanwhile is said as a warning, not an error.

The list is `inbox.list`, re-read on mount, after a resync and when what it is made of changes
(an approval, a session starting or ending, agents listed again, the held jobs and agents down
that choird's status counts) — never on a timer of its own.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static

from choir.errors import ChoirError, ConflictError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.dialogs import ConfirmDialog, TextPrompt
from tui.messages import AgentsUpdated, ApprovalChanged, SessionChanged, StatusUpdated
from tui.views.base import ChoirView

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")

RESOLVER: Final = "choir tui"
"""Who decided, as choird records it."""
EMPTY: Final = (
    "Nothing waits for a decision. After a restart of choird or an agent, what needs a human "
    "appears here: held jobs, calls of unknown outcome, approvals, failed updates."
)
DANGEROUS: Final = frozenset({"abort", "reject"})
"""Choices that end something for good: confirmed in red."""


class InboxView(ChoirView):
    """The recovery inbox; `d` decides the highlighted item, `f` reads it again."""

    VIEW_ID = "inbox"
    TITLE = "Inbox"

    DEFAULT_CSS = """
    InboxView #inbox-empty { height: auto; padding: 1 2; color: $text-muted; }
    InboxView #inbox-table { height: 2fr; min-height: 4; }
    InboxView #inbox-detail-box {
        height: 3fr; min-height: 3; border-top: solid $primary-darken-2; padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "decide", "Decide"),
        Binding("f", "refresh", "Refresh"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: dict[str, a.InboxItemView] = {}
        """item id -> its `inbox.list` row, oldest first."""
        self._seen_status: tuple[int, int] | None = None

    def compose(self) -> ComposeResult:
        yield Static(EMPTY, id="inbox-empty", markup=False)
        yield DataTable(id="inbox-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="inbox-detail-box"):
            yield Static("", id="inbox-detail")

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#inbox-table", DataTable)

    def on_mount(self) -> None:
        self.table.add_columns("item", "kind", "agent", "since", "what")
        super().on_mount()
        self.read()

    def on_resynced(self) -> None:
        super().on_resynced()
        self.read()

    def on_approval_changed(self, _: ApprovalChanged) -> None:
        self.read()

    def on_session_changed(self, _: SessionChanged) -> None:
        self.read()

    def on_agents_updated(self, _: AgentsUpdated) -> None:
        self.read()

    def on_status_updated(self, message: StatusUpdated) -> None:
        """Held jobs are counted in choird's status (re-read every 5 s): read the inbox again
        only when their count or the agents down changed."""
        status = message.status
        seen = (status.held_jobs.count, len(status.agents.interrupted or ()))
        if seen != self._seen_status:
            self._seen_status = seen
            self.read()

    # drawing

    def redraw(self) -> None:
        table, keep = self.table, self.highlighted()
        table.clear()
        for item_id, item in self.items.items():
            table.add_row(
                item_id,
                item.kind.replace("_", " "),
                item.agent_id or "-",
                item.since[:19].replace("T", " "),
                item.title,
                key=item_id,
            )
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep))
        self.query_one("#inbox-empty").display = not self.items
        self.show_detail()

    def highlighted(self) -> str | None:
        table = self.table
        if not table.row_count:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        except Exception:  # the cursor is past the rows while they are redrawn
            return None
        return None if key.value is None else str(key.value)

    def show_detail(self) -> None:
        item = self.items.get(self.highlighted() or "")
        self.query_one("#inbox-detail", Static).update("" if item is None else detail(item))

    @on(DataTable.RowHighlighted)
    def _highlighted(self, _: DataTable.RowHighlighted) -> None:
        self.show_detail()

    # reading and deciding

    @work(group="inbox-read", exclusive=True)
    async def read(self) -> None:
        if not self.bridge.connected:
            return  # the resync reads it once connected
        try:
            answer = await self.bridge.ask(OperatorVerb.INBOX_LIST, a.InboxList)
        except ChoirError:
            return  # not connected: the resync reads it again
        self.items = {item.item_id: item for item in answer.items}
        if self.is_attached:  # the console may have closed while the call ran
            with contextlib.suppress(NoMatches):
                self.redraw()

    def action_refresh(self) -> None:
        self.read()

    def action_decide(self) -> None:
        item_id = self.highlighted()
        if item_id is None:
            self.notify("Nothing waits for a decision.", severity="warning")
            return
        self.decide(item_id)

    @work(group="inbox-decide", exclusive=True)
    async def decide(self, item_id: str) -> None:
        """Pick a choice, confirm, then `inbox.resolve`: choird runs the owning command."""
        item = self.items.get(item_id)
        if item is None:
            return
        choices = [choice.replace("_", "-") for choice in item.choices]
        prompt = TextPrompt(f"Decide {item_id}:", value=choices[0], choices=choices)
        picked = await self.app.push_screen_wait(prompt)
        if not picked:
            return
        choice = picked.replace("-", "_")
        question = ConfirmDialog(
            f"{picked} {item_id}?", item.title, yes=picked, danger=choice in DANGEROUS
        )
        if not await self.app.push_screen_wait(question):
            return
        try:
            answer = await self.bridge.ask(
                OperatorVerb.INBOX_RESOLVE,
                a.InboxResolved,
                item_id=item_id,
                choice=choice,
                by=RESOLVER,
            )
        except ConflictError as error:
            self.notify(error.message, title="inbox", severity="warning", markup=False)
        except ChoirError as error:
            self.notify(error.message, title="inbox", severity="error", markup=False)
        else:
            self.notify(f"{item_id}: {answer.outcome}", title="inbox", markup=False)
        self.read()


def detail(item: a.InboxItemView) -> Text:
    """The item's context and choices, as the detail pane shows them."""
    text = Text()
    text.append(f"{item.title}\n", "bold")
    if item.session_id:
        text.append(f"session {item.session_id}\n", "dim")
    for line in item.context:
        text.append(f"  {line}\n")
    text.append("\nchoices: ", "bold")
    text.append(", ".join(choice.replace("_", "-") for choice in item.choices))
    text.append(f"\n{item.hint}\n", "dim")
    return text
