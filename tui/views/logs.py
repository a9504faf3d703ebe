"""The Logs tab: choird's or the selected agent's log, then new lines as they are written.

The `logs` streaming verb sends the file's current lines, then follows it like `tail -f`
(`choirctl logs <source>`). Lines are choir's JSON log records; by default each is shown as
`time level logger message key=value…`, `j` shows them raw. Textual's `Log` widget appends
plain lines cheaply (over a million a second here), bounded by `MAX_LINES`; the raw lines are
kept (same bound) so switching the format redraws what is there. `p` pauses scrolling (the tail
keeps coming), `s` switches between choird and the selected agent. Nothing is read before the
tab is first shown.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Final

import orjson
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Log, Static

from choir.errors import ChoirError, UnavailableError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.views.base import ChoirView, PaletteCommand

if TYPE_CHECKING:
    from choir.protocol.operator import items as i
else:  # the models (and pydantic) load with the first answer: the console paints first
    i = LazyModule("choir.protocol.operator.items")


Payload = dict[str, Any]

MAX_LINES: Final = 20_000
"""Lines kept on screen (and raw, for the format switch)."""
RETRY_S: Final = 0.5
CHOIRD: Final = "choird"
_HEAD: Final = frozenset({"timestamp", "level", "source", "logger", "message"})


def human_line(raw: str) -> str:
    """`12:00:01.250 INFO    choird.approvals approval requested  approval_id=ap-1`; a line that is
    not a JSON record is shown as it is."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    if not isinstance(record, dict):
        return raw
    clock = str(record.get("timestamp") or "")[11:23]
    head = f"{clock} {record.get('level', '')!s:<7} {record.get('logger', '')}"
    fields = " ".join(
        f"{key}={_value(value)}"
        for key, value in record.items()
        if key not in _HEAD and value is not None
    )
    return f"{head} {record.get('message', '')}" + (f"  {fields}" if fields else "")


def _value(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


class LogsView(ChoirView):
    """A live log tail; `s` switches source, `j` raw JSON, `p` pause scrolling, `c` clear."""

    VIEW_ID = "logs"
    TITLE = "Logs"

    DEFAULT_CSS = """
    LogsView #logs-title { height: 1; padding: 0 1; color: $text-muted; }
    LogsView #logs-log { height: 1fr; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "switch_source", "choird/agent"),
        Binding("j", "toggle_raw", "Raw JSON"),
        Binding("p", "toggle_pause", "Pause"),
        Binding("c", "clear", "Clear"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.want_agent = False
        """Whether the tail follows the selected agent (else choird)."""
        self.source: str | None = None
        """The log followed now: `choird` or an agent id."""
        self.raw = False
        """Show JSON records as written instead of one readable line each."""
        self.lines: deque[str] = deque(maxlen=MAX_LINES)
        """The raw lines shown, for redrawing in the other format."""
        self.live = False
        """Whether the file's current contents were all shown (now following)."""
        self.shown_once = False
        """Whether the tab was ever shown (the tail starts then)."""

    def compose(self) -> ComposeResult:
        yield Static("", id="logs-title", markup=False)
        yield Log(id="logs-log", max_lines=MAX_LINES)

    @property
    def log_widget(self) -> Log:
        return self.query_one("#logs-log", Log)

    def on_show(self) -> None:
        self.shown_once = True
        self.redraw()

    def redraw(self) -> None:
        if not self.shown_once:
            return  # a log is read only once somebody looks at it
        source = (self.selected_agent or CHOIRD) if self.want_agent else CHOIRD
        if source != self.source:
            self.source = source
            self.lines.clear()
            self.log_widget.clear()
            self.live = False
            self.tail(source)
        self.draw_title()

    def draw_title(self) -> None:
        state = "following" if self.live else "reading"
        if not self.log_widget.auto_scroll:
            state = "paused (p resumes)"
        other = "the selected agent" if self.source == CHOIRD else CHOIRD
        form = "raw JSON" if self.raw else "readable"
        self.query_one("#logs-title", Static).update(
            f"{self.source} log · {state} · {form} · s: {other}"
        )

    # the tail

    @work(group="logs-tail", exclusive=True)
    async def tail(self, source: str) -> None:
        """Follow `source`'s log; after choird comes back, read it again from the start."""
        while True:
            try:
                await self._follow(source)
                return
            except UnavailableError:
                await asyncio.sleep(RETRY_S)
                await self.bridge.wait_connected()
                self.lines.clear()
                self.log_widget.clear()
            except ChoirError as error:
                self.log_widget.write_line(f"-- {error.message} --")
                return

    async def _follow(self, source: str) -> None:
        async for item in self.bridge.items(OperatorVerb.LOGS, source=source, follow=True):
            match item:
                case i.LogLines(lines=lines):
                    self.add(lines)
                case i.LogSnapshotEnd():
                    self.live = True
                    self.draw_title()
                case i.LogRotated():
                    self.add(["-- the log was archived; following the new file --"])

    def add(self, lines: Iterable[str]) -> None:
        batch = list(lines)
        self.lines.extend(batch)
        self.log_widget.write_lines(batch if self.raw else [human_line(line) for line in batch])

    # actions

    def action_switch_source(self) -> None:
        if not self.want_agent and self.selected_agent is None:
            self.notify("No agent selected: pick one in the Agents tab.", severity="warning")
            return
        self.want_agent = not self.want_agent
        self.redraw()

    def action_toggle_raw(self) -> None:
        self.raw = not self.raw
        log = self.log_widget
        log.clear()
        log.write_lines(self.lines if self.raw else [human_line(line) for line in self.lines])
        self.draw_title()

    def action_toggle_pause(self) -> None:
        log = self.log_widget
        log.auto_scroll = not log.auto_scroll
        if log.auto_scroll:
            log.scroll_end(animate=False)
        self.draw_title()

    def action_clear(self) -> None:
        self.lines.clear()
        self.log_widget.clear()

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "Logs: switch between choird and the selected agent",
                "choirctl logs choird | choirctl logs <agent-id>",
                self.action_switch_source,
            )
        ]
