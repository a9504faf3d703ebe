"""The Events tab: one live timeline of the selected agent's session — edge and every core job.

Events arrive as `EventsArrived` batches from the app's follower (one `session.events` follow
stream, coalesced to ≤ 30 batches a second) and go straight into the `Timeline`'s ring. Older
revisions, a jump into history, and the full payload of a row are read from choird on demand,
in workers: the ring holds one line per event, not the events.

Keys: `/` filter (`lane=edge type=tool`), `p` pause/resume, `g` jump to a revision, `enter`
expand the row (`a` then shows a huge payload whole), `end` back to the live tail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Input, Static

from choir.artifact_read import event_range, whole_event
from choir.errors import ChoirError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.bridge import shown
from tui.dialogs import TextPrompt
from tui.messages import EventsArrived
from tui.views.base import ChoirView, PaletteCommand
from tui.widgets.caption import Caption
from tui.widgets.event_text import DETAIL_CHARS, detail
from tui.widgets.timeline import EventFilter, Row, Timeline, row_of

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
    from choir.protocol.operator import views as v
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")
    v = LazyModule("choir.protocol.operator.views")


Payload = dict[str, Any]

PAGE: Final = 1000
"""Events read per page from choird (its most per answer)."""


class EventsView(ChoirView):
    """The event timeline, its filter, a status line and the expanded event."""

    VIEW_ID = "events"
    TITLE = "Events"

    DEFAULT_CSS = """
    EventsView #event-filter { display: none; height: 3; }
    EventsView.-filtering #event-filter { display: block; }
    EventsView #event-detail { display: none; height: 45%; border-top: solid $primary; }
    EventsView.-expanded #event-detail { display: block; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter"),
        Binding("p", "pause", "Pause/resume"),
        Binding("g", "jump", "Jump to rev"),
        Binding("a", "show_all", "Whole payload", show=False),
        Binding("escape", "close", "Close", show=False),
    ]

    def __init__(self, *, id: str | None = None, capacity: int | None = None) -> None:
        super().__init__(id=id)
        self.session_id: str | None = None
        """The session the timeline shows."""
        self._capacity = capacity
        self._expanded: v.EventView | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: lane=edge,core:fix type=tool  (enter)", id="event-filter")
        if self._capacity is None:
            yield Timeline(id="timeline")
        else:
            yield Timeline(id="timeline", capacity=self._capacity)
        yield Caption(id="event-status")
        with VerticalScroll(id="event-detail"):
            yield Static("", id="event-detail-text", markup=False)

    @property
    def timeline(self) -> Timeline:
        return self.query_one(Timeline)

    # news

    def redraw(self) -> None:
        session_id = self.selected_session or self._last_session()
        if session_id != self.session_id:
            self.session_id = session_id
            self.timeline.clear()
        self._draw_status()

    def _last_session(self) -> str | None:
        """A stopped agent's last session, so its history stays browsable."""
        agent = self.state.agents.get(self.selected_agent or "")
        return agent.session_id if agent and agent.session_id else None

    def on_events_arrived(self, message: EventsArrived) -> None:
        if message.session_id != self.session_id:
            if not message.restart:
                return
            self.session_id = message.session_id
            self.timeline.clear()
        self.ingest(message.events)

    def ingest(self, events: list[v.EventView]) -> None:
        """Add a batch of events (rev order) to the timeline."""
        self.timeline.append([row_of(event) for event in events])
        self._draw_status()

    def _draw_status(self) -> None:
        timeline = self.timeline
        parts = [f"session {self.session_id or '—'}", f"{len(timeline.rows)} shown"]
        if timeline.first_rev is not None:
            parts.append(f"revs {timeline.first_rev}-{timeline.last_rev}")
        if timeline.paused:
            parts.append(f"PAUSED ({timeline.held} new) — p resumes")
        elif timeline.detached:
            parts.append(f"history ({timeline.held} newer not shown) — end returns to live")
        elif timeline.follow:
            parts.append("following")
        self.query_one("#event-status", Caption).show(" · ".join(parts))

    # keys

    def action_filter(self) -> None:
        self.add_class("-filtering")
        self.query_one("#event-filter", Input).focus()

    @on(Input.Submitted, "#event-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.timeline.set_filter(EventFilter.parse(event.value))
        if not event.value.strip():
            self.remove_class("-filtering")
        self.timeline.focus()
        self._draw_status()

    def action_pause(self) -> None:
        self.timeline.set_paused(not self.timeline.paused)
        self._draw_status()

    def action_close(self) -> None:
        if self.has_class("-expanded"):
            self.remove_class("-expanded")
        elif self.has_class("-filtering"):
            self.remove_class("-filtering")
        self.timeline.focus()

    def action_show_all(self) -> None:
        if self._expanded is None:
            return
        if self._expanded.artifact:  # a preview: read the whole event back first
            self._show_whole(self._expanded)
        else:
            self._show_detail(self._expanded, everything=True)

    @work(exclusive=True, group="events-expand")
    async def _show_whole(self, event: v.EventView) -> None:
        if self.session_id is None:
            return
        try:
            whole = await whole_event(self.bridge.call, self.session_id, event.rev)
        except ChoirError as error:
            self.notify(error.message, title="session.artifact", severity="error")
            return
        whole_shown = event.model_copy(update={"payload": shown(whole)})  # decoded here
        self._show_detail(whole_shown, everything=True)

    @work(exclusive=True, group="events-jump")
    async def action_jump(self) -> None:
        answer = await self.app.push_screen_wait(
            TextPrompt("Jump to which revision?", placeholder="a revision number")
        )
        if answer is None:
            return
        if not answer.isdigit() or int(answer) < 1:
            self.notify(f"{answer!r} is not a revision: type a number ≥ 1", severity="error")
            return
        rev = int(answer)
        if not self.timeline.jump(rev):
            rows = await self._read(from_rev=max(rev - PAGE // 2, 1), limit=PAGE)
            if rows is not None:
                self.timeline.replace(rows, detached=True, at_rev=rev)
        self._draw_status()

    # paging from choird

    @on(Timeline.NeedOlder)
    @work(group="events-page")
    async def _older(self, message: Timeline.NeedOlder) -> None:
        first = max(message.before_rev - PAGE, 1)
        rows = await self._read(from_rev=first, limit=message.before_rev - first)
        self.timeline.prepend(rows or [])
        self._draw_status()

    @on(Timeline.NeedLive)
    @work(exclusive=True, group="events-page")
    async def _live(self) -> None:
        rows = await self._read(from_rev=None, limit=PAGE)
        if rows is not None:
            self.timeline.replace(rows, detached=False)
        self._draw_status()

    @on(Timeline.Expand)
    @work(exclusive=True, group="events-expand")
    async def _expand(self, message: Timeline.Expand) -> None:
        events = await self._events(from_rev=message.rev, limit=1)
        if events:
            self._expanded = events[0]
            self._show_detail(events[0], everything=False)

    def _show_detail(self, event: v.EventView, *, everything: bool) -> None:
        text, left_out = detail(event, everything=everything)
        if left_out:
            text += f"\n… {left_out} more characters (a shows the whole event)"
        self.query_one("#event-detail-text", Static).update(text)
        self.add_class("-expanded")

    async def _read(self, *, from_rev: int | None, limit: int) -> list[Row] | None:
        events = await self._events(from_rev=from_rev, limit=limit)
        return None if events is None else [row_of(event) for event in events]

    async def _events(self, *, from_rev: int | None, limit: int) -> list[v.EventView] | None:
        if self.session_id is None or limit < 1:
            return None
        try:
            if from_rev is not None:  # answers are bounded by bytes: read on until `limit`
                events = await event_range(self.bridge.call, self.session_id, from_rev, limit)
                return [v.EventView.model_validate(event) for event in events]
            answer = await self.bridge.ask(
                OperatorVerb.SESSION_EVENTS,
                a.SessionEvents,
                session_id=self.session_id,
                from_rev=from_rev,
                limit=limit,
            )
        except ChoirError as error:
            self.notify(error.message, title="session.events", severity="error")
            return None
        return answer.events

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand("Events: pause or resume", "freeze the timeline", self.action_pause),
            PaletteCommand(
                "Events: jump to a revision", "choirctl session events --from-rev", self.action_jump
            ),
            PaletteCommand("Events: filter", "by lane and type", self.action_filter),
        ]


__all__ = ["DETAIL_CHARS", "EventsView"]
