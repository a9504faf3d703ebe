"""The Cores tab: the selected agent's core jobs — state, step, skill, latest CoreEvent.

Rows are the session's `core:*` lanes (`state.lanes`, from REPORT_STATUS). The latest event of
each job comes from the event follower's batches (`core_started`, `core_event_emitted`,
`core_stopped`), so it needs no extra call. A job held after a crash shows `held: unknown
outcome of <tool>`, and the caption names the command that decides it.

`c` cancels the highlighted job after a confirmation (`choirctl session cancel`). `i` injects an
instruction: operator instructions reach edge (`/inject`, as `choirctl chat` sends it, §19),
and edge hands them to the job with `choir.core.inject` (§12.8), so the text names the job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from tui.dialogs import ConfirmDialog, TextPrompt
from tui.messages import EventsArrived, LaneReported
from tui.views.base import ChoirView, PaletteCommand
from tui.widgets.caption import Caption
from tui.widgets.event_text import clip, core_event_text
from tui.widgets.lane_state import lane_text
from tui.widgets.tables import Cell, sync_rows

if TYPE_CHECKING:
    from choir.protocol.operator.views import EventView, LaneView

COLUMNS: Final = (
    ("job", "job"),
    ("state", "state"),
    ("step", "step"),
    ("skill", "skill"),
    ("latest event", "latest"),
)
FINISHED: Final = frozenset({"CORE_COMPLETED", "CORE_TERMINATED"})
CORE_EVENT_TYPES: Final = frozenset({"core_event_emitted", "core_started", "core_stopped"})
REDRAW_HZ: Final = 5


def inject_text(job_name: str, instruction: str) -> str:
    """What `i` sends through the console DM: edge relays it to the job."""
    return f"/inject for core job {job_name}: {instruction}"


def latest_event(event: EventView) -> tuple[str, str] | None:
    """(job name, what it said) for the core events of a batch; None for other events."""
    payload = event.payload
    kind = event.event_type
    if kind == "core_event_emitted":
        inner = payload.get("event") or {}
        return str(payload.get("job_name")), f"{inner.get('kind')}: {core_event_text(inner)}"
    if kind == "core_started":
        job = payload.get("job") or {}
        return str(job.get("job_name")), f"started: {job.get('task_spec', '')}"
    if kind == "core_stopped":
        return str(payload.get("job_name")), f"{payload.get('outcome')}: {payload.get('report')}"
    return None


def job_name_of_lane(job: LaneView) -> str:
    return job.lane.removeprefix("core:")


class CoresView(ChoirView):
    """One row per core job of the selected agent's session; inject and cancel."""

    VIEW_ID = "cores"
    TITLE = "Cores"

    DEFAULT_CSS = """
    CoresView #cores-caption { height: 1; padding: 0 1; color: $text-muted; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("i", "inject", "Inject"),
        Binding("c", "cancel", "Cancel job"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._latest: dict[str, str] = {}
        """job name -> its latest event, for the session in `_session`."""
        self._session: str | None = None
        self._redraw_due = False

    def compose(self) -> ComposeResult:
        yield Caption(id="cores-caption")
        table: DataTable[Any] = DataTable(id="cores-table", cursor_type="row")
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        yield table

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#cores-table", DataTable)

    def jobs(self) -> list[LaneView]:
        lanes = self.state.session_lanes(self.selected_session)
        return [lane for lane in lanes if lane.lane.startswith("core:")]

    def redraw(self) -> None:
        session_id = self.selected_session
        if session_id != self._session:
            self._session, self._latest = session_id, {}
        jobs = self.jobs()
        caption = self.query_one("#cores-caption", Caption)
        if session_id is None:
            caption.show(f"{self.selected_agent or 'No agent'} is not running: no core jobs.")
        else:
            running = sum(job.state not in FINISHED for job in jobs)
            line = f"session {session_id}: {len(jobs)} core jobs, {running} running"
            held = self.state.held_jobs(session_id)
            if held:  # after a crash: what the operator runs to let them go on
                line += f"; {len(held)} held — decide with {held[0].hint}"
            caption.show(line)
        rows = [(job_name_of_lane(job), self._cells(job)) for job in jobs]
        sync_rows(self.table, [key for _, key in COLUMNS], rows)

    def _cells(self, job: LaneView) -> list[Cell]:
        step = job.step
        name = job_name_of_lane(job)
        held = job.held
        return [
            Text(name, style="bold"),
            Text(held.state, style="bold #e06c75") if held else lane_text(job.state),
            "—" if step is None else str(step),
            job.skill or "—",
            clip(self._latest.get(name, "—"), 120),
        ]

    def on_lane_reported(self, message: LaneReported) -> None:
        if message.data.session_id == self.selected_session:
            self.redraw()

    def on_events_arrived(self, message: EventsArrived) -> None:
        if message.session_id != self.selected_session:
            return
        changed = False
        for event in message.events:
            if event.event_type in CORE_EVENT_TYPES:
                latest = latest_event(event)
                if latest is not None:
                    self._latest[latest[0]] = latest[1]
                    changed = True
        if changed and not self._redraw_due:
            self._redraw_due = True  # at most REDRAW_HZ redraws however many events arrive
            self.set_timer(1 / REDRAW_HZ, self._due_redraw)

    def _due_redraw(self) -> None:
        self._redraw_due = False
        self.redraw()

    def _highlighted_job(self) -> str | None:
        table = self.table
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return None if row_key.value is None else str(row_key.value)

    @work(exclusive=True, group="core-action")
    async def action_cancel(self) -> None:
        job, session_id = self._highlighted_job(), self.selected_session
        if job is None or session_id is None:
            self.notify("no core job selected", severity="warning")
            return
        dialog = ConfirmDialog(
            f"Cancel core job {job}?",
            f"Its locks are released and it reports 'cancelled' to edge "
            f"(choirctl session cancel {session_id} {job}).",
            yes="Cancel job",
            danger=True,
        )
        if await self.app.push_screen_wait(dialog):
            await self.act(
                "session.cancel",
                f"cancel of {job} sent: the job stops at its next safe point",
                session_id=session_id,
                job_name=job,
            )

    @work(exclusive=True, group="core-action")
    async def action_inject(self) -> None:
        job, agent_id = self._highlighted_job(), self.selected_agent
        if job is None or agent_id is None:
            self.notify("no core job selected", severity="warning")
            return
        instruction = await self.app.push_screen_wait(
            TextPrompt(f"Instruction for core job {job} (edge relays it):")
        )
        if instruction:
            await self.act(
                "chat.send",
                f"instruction for {job} sent to edge",
                agent_id=agent_id,
                text=inject_text(job, instruction),
            )

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "Cores: cancel the highlighted job", "choirctl session cancel", self.action_cancel
            ),
            PaletteCommand(
                "Cores: inject into the highlighted job",
                "choirctl chat: /inject for core job <name>: …",
                self.action_inject,
            ),
        ]
