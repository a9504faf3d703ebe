"""The Approvals tab: pending proposals with age and timeout countdown; approve or reject.

The table is `state.approvals` (pending only), which the bridge keeps from `approval.list` and
the `approval` feed items — nothing here polls choird. Ages and countdowns tick locally once a
second from each `created_at` (by the console's clock) and the running `approval_timeout_ms`
(read with `config.show` on mount, after a resync and when the config changes).

An approval resolved elsewhere (choirctl, a DM button, the timeout sweep) leaves the table as its
feed item arrives; if the operator had it open, a notice says how it ended, and a confirmation
dialog open for it closes unanswered. It can never be resolved twice: choird answers a conflict
for one resolved in between, and that is shown as a notice, not an error.

The detail pane ends with what the proposal would change as a unified diff (`approval.show`,
read once per approval in a worker), syntax-coloured with rich's diff lexer and scrollable with
the rest of the detail; the payload fields the diff shows are then left out above it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static

import tui.views.approvals_detail as words
from choir.errors import ChoirError, ConflictError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.dialogs import ConfirmDialog
from tui.messages import ApprovalChanged, ConfigChanged
from tui.views.base import ChoirView, PaletteCommand

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
    from choir.protocol.operator import views as v
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")
    v = LazyModule("choir.protocol.operator.views")


Payload = dict[str, Any]

RESOLVER: Final = "choir tui"
"""`resolved_by` of approvals answered here (choirctl's are `choirctl`)."""
COLUMNS: Final = (
    ("approval", "id"),
    ("agent", "agent"),
    ("type", "type"),
    ("age", "age"),
    ("times out", "left"),
    ("summary", "summary"),
)
EMPTY: Final = (
    "No pending approvals. Agents propose tools, skills and config changes with the "
    "choir.propose.* tools; each appears here the moment it is asked."
)
KEPT_ENDED: Final = 100
"""Resolved approvals remembered to say how they ended, oldest forgotten first."""
_DIFF_STYLES: Final = {"+": "green", "-": "red", "~": "yellow"}
ANSWERED: Final = {
    "approve": ("Approve", "approved", "approval approve {id}"),
    "restart": ("Approve and restart", "approved (restarting what it needs)",
                "approval approve {id} --restart"),
    "reject": ("Reject", "rejected", "approval reject {id}"),
}  # fmt: skip
"""How to answer: the dialog's verb, what is said after, choirctl's command."""


class ApprovalsView(ChoirView):
    """Pending approvals; `a` approves and `r` rejects the highlighted one after a confirmation;
    `R` approves a config change that needs a restart and restarts what it needs."""

    VIEW_ID = "approvals"
    TITLE = "Approvals"

    DEFAULT_CSS = """
    ApprovalsView #approvals-table { height: 2fr; min-height: 4; }
    ApprovalsView #approvals-empty { height: auto; padding: 1 2; color: $text-muted; }
    ApprovalsView #approvals-notice { height: auto; padding: 0 1; color: $warning; display: none; }
    ApprovalsView #approval-detail-box {
        height: 3fr; min-height: 3; border-top: solid $primary-darken-2; padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "answer('approve')", "Approve"),
        Binding("R", "answer('restart')", "Approve+restart"),
        Binding("r", "answer('reject')", "Reject"),
        Binding("e", "expand", "Expand/collapse"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.timeout_ms: int | None = None
        """The running `approval_timeout_ms`; None until `config.show` answered."""
        self.running_config: Payload | None = None
        """The running config (for a config change's old → new values)."""
        self.expanded = False
        """Whether the detail shows long payload blocks in full."""
        self.shown: str | None = None
        """The approval id in the detail pane."""
        self.ended: dict[str, v.ApprovalView] = {}
        """Approvals resolved while this console watched, by id (to say how they ended)."""
        self._asking: tuple[str, ConfirmDialog] | None = None
        self.diffs: dict[str, str | None] = {}
        """Approval id -> its `approval.show` diff (None: its kind has none)."""

    def compose(self) -> ComposeResult:
        yield Static(EMPTY, id="approvals-empty", markup=False)
        yield Static("", id="approvals-notice", markup=False)
        yield DataTable(id="approvals-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="approval-detail-box"):
            yield Static("", id="approval-detail")

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#approvals-table", DataTable)

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.table.add_column(label, key=key)
        super().on_mount()
        self.set_interval(1.0, self.tick)
        self.read_config()

    def on_resynced(self) -> None:
        super().on_resynced()
        self.read_config()

    def on_config_changed(self, _: ConfigChanged) -> None:
        self.read_config()

    # drawing

    def redraw(self) -> None:
        table, keep = self.table, self.highlighted()
        table.clear()
        for approval in self.pending():
            table.add_row(*self.cells(approval), key=approval.approval_id)
        self._after_change(keep)

    def pending(self) -> list[v.ApprovalView]:
        return sorted(self.state.approvals.values(), key=lambda a: str(a.created_at))

    def cells(self, approval: v.ApprovalView) -> tuple[str, ...]:
        now = self.console.clock()
        return (
            approval.approval_id,
            approval.agent_id,
            approval.request_type,
            words.age(approval, now),
            words.countdown(approval, now, self.timeout_ms),
            words.summary(approval.payload),
        )

    def tick(self) -> None:
        """Advance every age and countdown by the clock; no call to choird."""
        now = self.console.clock()
        for approval in self.pending():
            key = approval.approval_id
            if key in self.table.rows:
                self.table.update_cell(key, "age", words.age(approval, now))
                left = words.countdown(approval, now, self.timeout_ms)
                self.table.update_cell(key, "left", left)

    def highlighted(self) -> str | None:
        table = self.table
        if not table.row_count:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        except Exception:  # the cursor is past the rows while they are redrawn
            return None
        return None if key.value is None else str(key.value)

    def _after_change(self, keep: str | None) -> None:
        table = self.table
        empty = table.row_count == 0
        self.query_one("#approvals-empty").display = empty
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep))
        self.shown = self.highlighted()
        self.show_detail()

    def show_detail(self) -> None:
        detail = self.query_one("#approval-detail", Static)
        approval = self.state.approvals.get(self.shown or "")
        if approval is None:
            detail.update("")
            return
        if approval.approval_id not in self.diffs:
            self.read_diff(approval.approval_id)
        detail.update(self.render_detail(approval, self.diffs.get(approval.approval_id)))

    def say(self, notice: str) -> None:
        """Show `notice` above the table until the next one (empty hides it)."""
        widget = self.query_one("#approvals-notice", Static)
        widget.update(notice)
        widget.display = bool(notice)

    def render_detail(self, approval: v.ApprovalView, diff: str | None = None) -> Text:
        text = Text()
        diffed = bool(diff)
        for title, lines in words.detail_blocks(approval, self.running_config, diffed=diffed):
            text.append(f"{title}\n", "bold")
            shown, hidden = words.collapse(lines, self.expanded)
            for line in shown:
                text.append(f"  {line}\n", _DIFF_STYLES.get(line[:1], ""))
            if hidden:
                text.append(f"  … {hidden} more lines (e expands)\n", "dim italic")
            text.append("\n")
        if diff:
            text.append("diff\n", "bold")
            shown, hidden = words.collapse(diff.splitlines(), self.expanded)
            text.append_text(diff_text(shown))
            if hidden:
                text.append(f"… {hidden} more lines (e expands)\n", "dim italic")
        return text

    # live news

    def on_approval_changed(self, message: ApprovalChanged) -> None:
        approval, table = message.data, self.table
        key = approval.approval_id
        keep = self.highlighted()
        if approval.status == "pending":
            if key not in table.rows:
                table.add_row(*self.cells(approval), key=key)
        else:
            if key in table.rows:
                table.remove_row(key)
            self._resolved_elsewhere(approval)
        self._after_change(keep if keep != key else None)

    def _resolved_elsewhere(self, approval: v.ApprovalView) -> None:
        """Note how an approval the operator had open ended; close its dialog unanswered."""
        key = approval.approval_id
        self.ended[key] = approval
        while len(self.ended) > KEPT_ENDED:
            del self.ended[next(iter(self.ended))]
        asking = self._asking is not None and self._asking[0] == key
        if self.shown == key or asking:
            self.say(f"{key} was {words.resolution(approval)} meanwhile: nothing left to answer.")
        if self._asking is not None and asking and self.app.screen is self._asking[1]:
            self._asking[1].dismiss(False)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        value = event.row_key.value
        self.shown = None if value is None else str(value)
        self.show_detail()

    # actions

    def action_expand(self) -> None:
        self.expanded = not self.expanded
        self.show_detail()

    def action_answer(self, how: str) -> None:
        approval_id = self.highlighted()
        if approval_id is None:
            self.notify("No pending approval to answer.", severity="warning")
            return
        self.answer(approval_id, how)

    @work(group="approval-answer", exclusive=True)
    async def answer(self, approval_id: str, how: str) -> None:
        """Confirm, then `approval.approve|reject`: never for one already resolved."""
        approval = self.state.approvals.get(approval_id)
        if approval is None:
            self.notify(self._already(approval_id), severity="warning")
            return
        verb, _, ctl = ANSWERED[how]
        restarts = (
            " choird restarts the agents the change needs (its own changes wait for its next "
            "start)."
            if how == "restart"
            else ""
        )
        dialog = ConfirmDialog(
            f"{verb} {approval_id} ({approval.request_type}) from {approval.agent_id}?",
            f"{words.summary(approval.payload, 70)}\n"
            f"The agent is told at once.{restarts} choirctl: choirctl {ctl.format(id=approval_id)}",
            yes=verb,
            danger=how == "reject",
        )
        self._asking = (approval_id, dialog)
        try:
            confirmed = await self.app.push_screen_wait(dialog)
        finally:
            self._asking = None
        if not confirmed:
            if approval_id not in self.state.approvals:
                self.notify(self._already(approval_id), severity="warning")
            return
        await self._send(approval_id, how)

    async def _send(self, approval_id: str, how: str) -> None:
        if approval_id not in self.state.approvals:
            self.notify(self._already(approval_id), severity="warning")
            return
        _, said, ctl = ANSWERED[how]
        title = f"approval {ctl.split()[1]}"
        try:
            verb = (
                OperatorVerb.APPROVAL_REJECT if how == "reject" else OperatorVerb.APPROVAL_APPROVE
            )
            choice = {"restart": True} if how == "restart" else {}
            await self.bridge.ask(
                verb, v.ApprovalView, approval_id=approval_id, by=RESOLVER, **choice
            )
        except ConflictError as error:
            self.notify(f"{error.message}: nothing to do.", severity="warning")
            return
        except ChoirError as error:
            self.notify(error.message, title=title, severity="error", timeout=8)
            return
        self.say("")
        self.notify(f"{approval_id} {said}; the agent is told.", title=title)

    def _already(self, approval_id: str) -> str:
        ended = self.ended.get(approval_id)
        how = words.resolution(ended) if ended else "resolved"
        return f"{approval_id} was already {how} elsewhere: nothing to do."

    @work(group="approval-diff")
    async def read_diff(self, approval_id: str) -> None:
        """`approval.show`'s diff of `approval_id`, then the detail drawn again with it."""
        self.diffs[approval_id] = None  # asked once, even when the call fails
        try:
            shown = await self.bridge.ask(
                OperatorVerb.APPROVAL_SHOW, v.ApprovalView, approval_id=approval_id
            )
        except ChoirError:
            return
        self.diffs[approval_id] = shown.diff
        if shown.diff and self.shown == approval_id and self.is_attached:
            with contextlib.suppress(NoMatches):
                self.show_detail()

    @work(group="approvals-config", exclusive=True)
    async def read_config(self) -> None:
        """The running config, for the timeout and config-change diffs."""
        if not self.bridge.connected:
            return  # the resync reads it once connected
        try:
            shown = await self.bridge.ask(OperatorVerb.CONFIG_SHOW, a.ConfigShown)
        except ChoirError:
            return  # not connected: the next resync reads it
        self.running_config = shown.config
        timeout = self.running_config.get("approval_timeout_ms")
        self.timeout_ms = int(timeout) if timeout is not None else None
        if self.is_attached:  # the console may have closed while the call ran
            with contextlib.suppress(NoMatches):  # ...and already removed the widgets
                self.tick()
                self.show_detail()

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "Approvals: approve the highlighted approval",
                "choirctl approval approve <id>",
                lambda: self.action_answer("approve"),
            ),
            PaletteCommand(
                "Approvals: approve the highlighted approval and restart what it needs",
                "choirctl approval approve <id> --restart",
                lambda: self.action_answer("restart"),
            ),
            PaletteCommand(
                "Approvals: reject the highlighted approval",
                "choirctl approval reject <id>",
                lambda: self.action_answer("reject"),
            ),
        ]


def diff_text(lines: list[str]) -> Text:
    """Diff lines coloured by rich's diff lexer (pygments), as one `Text`."""
    code = "".join(f"{line}\n" for line in lines)
    return Syntax(code, "diff", theme="ansi_dark").highlight(code)
