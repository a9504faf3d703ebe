"""The Gateways tab: the console DM and each Telegram bot, what `choirctl gateway status` shows.

One row per gateway — state in colour (a rejected or revoked token in red), its bot, last
update, queued and failed sends, last error — and under the table the highlighted gateway's
DMs: who may talk there and the agent each reaches now. It is read with `gateway.status` on
mount, after a resync, when a session starts or ends (DM bindings change only then) and with
each `status` the bridge reads (every 5 s: a bot's polling state and sends change on their own).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static

from choir.errors import ChoirError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.messages import SessionChanged, StatusUpdated
from tui.views.base import ChoirView
from tui.widgets.health import GATEWAY_WORDS

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")

EMPTY: Final = 'No gateways configured: add one under "gateways" in config.json.'
STATE_STYLES: Final = {
    "running": "#7ec16e",
    "connecting": "#e5c07b",
    "starting": "#e5c07b",
    "backing_off": "bold #e5c07b",
    "invalid_token": "bold #e06c75",
    "no_token": "bold #e06c75",
    "pending_restart": "#e5c07b",
    "stopped": "dim",
}
"""A state's colour: up green, on its way amber, needing the operator red."""


def state_text(state: str) -> Text:
    return Text(GATEWAY_WORDS.get(state, state), STATE_STYLES.get(state, ""))


class GatewaysView(ChoirView):
    """Gateways with their state, bot, sends and errors; the highlighted one's DMs below."""

    VIEW_ID = "gateways"
    TITLE = "Gateways"

    DEFAULT_CSS = """
    GatewaysView #gateways-empty { height: auto; padding: 1 2; color: $text-muted; }
    GatewaysView #gateways-table { height: auto; max-height: 50%; }
    GatewaysView #gateways-detail { height: 1fr; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("f", "refresh", "Refresh")]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.answer: a.GatewayStatus | None = None
        """The last `gateway.status` answer."""

    def compose(self) -> ComposeResult:
        yield Static(EMPTY, id="gateways-empty", markup=False)
        yield DataTable(id="gateways-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="gateways-detail", markup=False)

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#gateways-table", DataTable)

    def on_mount(self) -> None:
        for name in ("gateway", "type", "state", "bot", "last update", "sends", "error"):
            self.table.add_column(name, key=name)
        super().on_mount()
        self.read()

    def on_resynced(self) -> None:
        super().on_resynced()
        self.read()

    def on_session_changed(self, _: SessionChanged) -> None:
        self.read()

    def on_status_updated(self, _: StatusUpdated) -> None:
        self.read()

    def redraw(self) -> None:
        table = self.table
        keep = self.highlighted()
        table.clear()
        gateways = self.answer.gateways if self.answer else []
        for gateway in gateways:
            table.add_row(*_row(gateway), key=gateway.name)
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep))
        self.query_one("#gateways-empty").display = self.answer is not None and not gateways
        self._draw_detail()

    def highlighted(self) -> str | None:
        table = self.table
        if not table.row_count:
            return None
        row = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return None if row.value is None else str(row.value)

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self._draw_detail()

    def _draw_detail(self) -> None:
        name = self.highlighted()
        found = [g for g in (self.answer.gateways if self.answer else []) if g.name == name]
        detail = self.query_one("#gateways-detail", Static)
        detail.update(detail_text(found[0], self.answer) if found and self.answer else "")

    @work(group="gateways-read", exclusive=True)
    async def read(self) -> None:
        if not self.bridge.connected:
            return  # the resync reads it once connected
        try:
            answer = await self.bridge.ask(OperatorVerb.GATEWAY_STATUS, a.GatewayStatus)
        except ChoirError:
            return  # not connected (the resync reads it again), or an older choird
        self.answer = answer
        if self.is_attached:  # the console may have closed while the call ran
            with contextlib.suppress(NoMatches):  # ...and already removed the table
                self.redraw()

    def action_refresh(self) -> None:
        self.read()


def _row(gateway: a.GatewayDetail) -> tuple[object, ...]:
    sends = "-" if gateway.queued is None else f"{gateway.queued} queued, {gateway.failed} failed"
    failed = bool(gateway.failed)
    return (
        gateway.name,
        gateway.type,
        state_text(gateway.state),
        gateway.bot or "-",
        _moment(gateway.last_update_at) if gateway.type != "console" else "-",
        Text(sends, "bold #e5c07b" if failed else ""),
        Text(_one_line(gateway.last_error or "-", 60), "#e06c75" if gateway.last_error else "dim"),
    )


def detail_text(gateway: a.GatewayDetail, answer: a.GatewayStatus) -> Text:
    """The highlighted gateway: its state in words, pending change, last error and its DMs."""
    text = Text()
    text.append(f"{gateway.name}", "bold")
    text.append(f" ({gateway.type}{' ' + gateway.bot if gateway.bot else ''}) ")
    text.append_text(state_text(gateway.state))
    if gateway.since:
        text.append(f" since {_moment(gateway.since)}", "dim")
    if gateway.state == "invalid_token":
        text.append(
            f"\nThe Bot API rejected its token (invalid or revoked): choirctl secret set "
            f"{gateway.secret or '<its secret>'}, then restart choird (choir restart). "
            "choird runs on.",
            "#e06c75",
        )
    if gateway.pending:
        text.append(
            f"\nconfig apply {gateway.pending} it: takes effect when choird restarts "
            "(choir restart)"
        )
    if gateway.type != "console":
        text.append(f"\nlast poll {_moment(gateway.last_poll_at)}", "dim")
    if gateway.last_error:
        text.append(f"\nlast error {_moment(gateway.last_error_at)}: {gateway.last_error}")
    text.append("\n\nDMs\n", "bold")
    for dm in gateway.dms:
        who = f"user {dm.user_id}{', admin' if dm.admin else ''}"
        text.append(f"  {dm.name:<12} {who:<24} → ")
        if dm.agent_id:
            text.append(f"{dm.agent_id}", "bold #56b6f7")
            text.append(f" (session {dm.session_id})", "dim")
        elif not answer.bindings_known:
            text.append("? (Postgres does not answer)", "dim")
        else:
            default = f" (default agent {dm.default_agent})" if dm.default_agent else ""
            text.append(f"no agent running{default}", "dim")
        text.append("\n")
    if not gateway.dms:
        text.append("  none configured\n", "dim")
    return text


def _moment(iso: str | None) -> str:
    return "-" if iso is None else iso[:19].replace("T", " ")


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
