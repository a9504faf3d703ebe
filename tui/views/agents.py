"""The Agents tab: every configured agent — state, runtime, image, uptime, session, bindings.

The table is `state.agents` (`agent.list`, re-read by the bridge when a session starts or ends);
the highlighted row is the console's selected agent. Uptimes tick locally once a second from
`started_at`. A detail line shows `agent.status` of the selected agent (pid, heartbeat, skill,
config lag, image, the tools its model is not offered and why), read in a worker when the
selection or the listing changes. An agent with core jobs held after a crash says how many in its
state, and its detail line names the command that decides each; a crashed agent's says why and
when, and that `s` resumes it.

Actions are choirctl's verbs: `s` start (`choirctl agent start`; an agent with an encrypted
memory is asked for its key file first, as the palette's start asks: escape starts nothing),
`x` stop and `r` restart (`choirctl agent stop|restart`, after a confirmation), `z` roll back
to the previous image (`choirctl agent rollback`, after a confirmation; its steps on a result
screen).
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static

from choir.commands.text import progress_line
from choir.ctl.memory.key import read_memory_key
from choir.errors import ChoirError, UsageError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.dialogs import ConfirmDialog, TextPrompt
from tui.dialogs.result import ResultScreen, as_lines
from tui.messages import AgentsUpdated, LaneReported
from tui.views.base import ChoirView, PaletteCommand
from tui.widgets.format import age, bindings_text, image_text, runtime_text, state_text
from tui.widgets.tables import Cell, sync_rows

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
    from choir.protocol.operator import items as i
    from choir.protocol.operator import views as v
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")
    i = LazyModule("choir.protocol.operator.items")
    v = LazyModule("choir.protocol.operator.views")


COLUMNS: Final = (
    ("agent", "agent"),
    ("state", "state"),
    ("runtime", "runtime"),
    ("image", "image"),
    ("uptime", "uptime"),
    ("session", "session"),
    ("cfg", "cfg"),
    ("bindings", "bindings"),
)


class AgentsView(ChoirView):
    """The agents table, a detail line for the selected one, and start/stop/restart."""

    VIEW_ID = "agents"
    TITLE = "Agents"

    DEFAULT_CSS = """
    AgentsView #agent-detail { height: auto; max-height: 10; padding: 0 1; color: $text-muted; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "start", "Start"),
        Binding("x", "stop", "Stop"),
        Binding("r", "restart", "Restart"),
        Binding("z", "rollback", "Roll back"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._details: dict[str, a.AgentStatus] = {}
        """agent id -> its last `agent.status` answer."""
        self._held: dict[str, int] = {}
        """session id -> how many of its core jobs were held at its last lane report."""

    def compose(self) -> ComposeResult:
        table: DataTable[Any] = DataTable(id="agents-table", cursor_type="row", zebra_stripes=True)
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Static("", id="agent-detail")

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(1.0, self._tick_uptimes)

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#agents-table", DataTable)

    # drawing

    def redraw(self) -> None:
        rows = [(agent_id, self._cells(agent)) for agent_id, agent in self.state.agents.items()]
        sync_rows(self.table, [key for _, key in COLUMNS], rows)
        self._move_cursor_to_selection()
        self._draw_detail()

    def _cells(self, agent: v.AgentSummary) -> list[Cell]:
        details = self._details.get(agent.agent_id)
        return [
            Text(agent.agent_id, style="bold"),
            self._state(agent),
            runtime_text(agent),
            image_text(details.image if details else None),
            self._uptime(agent),
            agent.session_id or "—",
            str(agent.config_version or "—"),
            bindings_text(agent.bindings),
        ]

    def _state(self, agent: v.AgentSummary) -> Text:
        """The agent's state, and how many of its core jobs a crash left held."""
        text = state_text(agent.state)
        held = self.state.held_jobs(self.state.session_of(agent.agent_id) or "")
        if held:
            text.append(f", {len(held)} held", style="bold #e06c75")
        return text

    def _uptime(self, agent: v.AgentSummary) -> str:
        started = agent.started_at
        if agent.state != "running" or not started:
            return "—"
        return age(datetime.fromisoformat(started), self.console.clock())

    def _tick_uptimes(self) -> None:
        table = self.table
        for agent_id, agent in self.state.agents.items():
            if agent.state == "running" and agent_id in table.rows:
                table.update_cell(agent_id, "uptime", self._uptime(agent))

    def _move_cursor_to_selection(self) -> None:
        selected = self.selected_agent
        if selected is None or selected not in self.state.agents:
            return
        index = list(self.state.agents).index(selected)
        if self.table.cursor_row != index:
            self.table.move_cursor(row=index)

    def _draw_detail(self) -> None:
        agent_id = self.selected_agent
        widget = next(self.query("#agent-detail").results(Static), None)
        if widget is None:  # a detail read finishing while the console closes
            return
        if agent_id is None:
            widget.update("No agents configured: add one with choirctl agent init.")
            return
        detail = self._details.get(agent_id) or self.state.agents.get(agent_id)
        widget.update(detail_text(detail, self.console.clock()) if detail else Text(""))

    # news

    def on_agents_updated(self, _: AgentsUpdated) -> None:
        self.redraw()
        self._read_detail()

    def on_agent_selected(self) -> None:
        self.redraw()
        self._read_detail()

    def on_lane_reported(self, message: LaneReported) -> None:
        session_id = message.data.session_id
        held = len(self.state.held_jobs(session_id))
        held_changed = held != self._held.get(session_id, 0)
        self._held[session_id] = held
        agent_id = self.state.agent_of(session_id)
        if held_changed and agent_id is not None and agent_id in self.table.rows:
            self.table.update_cell(agent_id, "state", self._state(self.state.agents[agent_id]))
        if session_id == self.selected_session and (message.data.lane == "edge" or held_changed):
            self._read_detail()

    @on(DataTable.RowHighlighted, "#agents-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.console.select_agent(str(event.row_key.value))

    @work(exclusive=True, group="agent-detail")
    async def _read_detail(self) -> None:
        agent_id = self.selected_agent
        if agent_id is None or not self.bridge.connected:
            return  # (not connected: the resync reads it)
        try:
            verb = OperatorVerb.AGENT_STATUS
            self._details[agent_id] = await self.bridge.ask(verb, a.AgentStatus, agent_id=agent_id)
        except ChoirError:
            return
        if agent_id == self.selected_agent and self.is_attached:  # the console may have closed
            with contextlib.suppress(NoMatches):  # ...and already removed the table
                self._refresh_detail(agent_id)

    def _refresh_detail(self, agent_id: str) -> None:
        self._draw_detail()
        agent = self.state.agents.get(agent_id)
        if agent is not None and agent_id in self.table.rows:
            image = image_text(self._details[agent_id].image)
            self.table.update_cell(agent_id, "image", image)

    # actions

    @work(exclusive=True, group="agent-action")
    async def action_start(self) -> None:
        agent_id = self.selected_agent
        if agent_id is None:
            return
        payload: dict[str, Any] = {"agent_id": agent_id}
        agent = self.state.agents.get(agent_id)
        if agent is not None and agent.encrypted_memories:
            key = await self._memory_key(agent_id, agent.encrypted_memories)
            if key is None:
                return
            if key:
                payload["memory_key"] = key
        self.notify(f"starting {agent_id}…", title="agent.start")
        if await self.act("agent.start", f"{agent_id} started", **payload) is not None:
            self.bridge.refresh_agents()

    async def _memory_key(self, agent_id: str, classes: list[str]) -> str | None:
        """The key of `agent_id`'s encrypted memories as the start sends it (hex), asked for as
        the palette's start asks (a key file on this machine, read and checked here: a bad one
        never reaches choird); "" to start without it (the memories stay locked); None when
        the operator cancels or the file holds no key (nothing is started)."""
        prompt = TextPrompt(
            f"Start {agent_id}: memory key file (a path on this machine)? Its "
            f"{', '.join(classes)} memory is encrypted (enter: none, it stays locked)",
            allow_empty=True,
            strict=False,
        )
        path = await self.app.push_screen_wait(prompt)
        if path is None or not path:
            return path
        try:
            return read_memory_key(Path(path), "memory key file").hex()
        except UsageError as error:
            self.notify(error.message, title="agent.start", severity="error", markup=False)
            return None

    @work(exclusive=True, group="agent-action")
    async def action_stop(self) -> None:
        await self._confirmed(
            "agent.stop",
            "Stop {agent}?",
            "It finishes its current step, writes its session summary and exits "
            "(choirctl agent stop {agent}).",
            "Stop",
            "{agent} stopped",
        )

    @work(exclusive=True, group="agent-action")
    async def action_restart(self) -> None:
        await self._confirmed(
            "agent.restart",
            "Restart {agent}?",
            "It stops gracefully and starts again in the same session with the same bindings "
            "(choirctl agent restart {agent}).",
            "Restart",
            "{agent} restarted",
        )

    @work(exclusive=True, group="agent-action")
    async def action_rollback(self) -> None:
        agent_id = self.selected_agent
        if agent_id is None:
            return
        dialog = ConfirmDialog(
            f"Roll back {agent_id}?",
            "It is stopped and started again, same session, on the newest image older than the "
            f"one it runs (choirctl agent rollback {agent_id}).",
            yes="Roll back",
            danger=True,
        )
        if not await self.app.push_screen_wait(dialog):
            return
        screen = ResultScreen(f"choirctl agent rollback {agent_id}", status="working…")
        await self.app.push_screen(screen)
        try:
            async for item in self.bridge.items(OperatorVerb.AGENT_ROLLBACK, agent_id=agent_id):
                if isinstance(item, i.Progress):
                    screen.add([progress_line(item.model_dump(mode="json"))])
                    continue
                screen.add(as_lines(item.result))
                screen.finish("done")
                self.bridge.refresh_agents()
                return
        except ChoirError as error:
            screen.finish(error.message)
            return
        screen.finish("choird closed the stream before answering: see the Logs tab")

    async def _confirmed(self, verb: str, question: str, detail: str, yes: str, done: str) -> None:
        agent_id = self.selected_agent
        if agent_id is None:
            return
        words = {"agent": agent_id}
        dialog = ConfirmDialog(
            question.format(**words), detail.format(**words), yes=yes, danger=True
        )
        if not await self.app.push_screen_wait(dialog):
            return
        self.notify(f"{verb} {agent_id}…", title=verb)
        answer = await self.act(verb, done.format(**words), long_running=True, agent_id=agent_id)
        if answer is None:
            return
        self.bridge.refresh_agents()
        stopped = answer.stopped if isinstance(answer, a.AgentRestarted) else answer
        summary = stopped.summary if isinstance(stopped, a.AgentStopped) else None
        if summary and summary.warn:  # the stop went on without its session summary (§11.8)
            self.notify(f"{agent_id}: no session summary — {summary.detail}", severity="warning")

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "Agents: start the selected agent", "choirctl agent start", self.action_start
            ),
            PaletteCommand(
                "Agents: stop the selected agent", "choirctl agent stop", self.action_stop
            ),
            PaletteCommand(
                "Agents: restart the selected agent", "choirctl agent restart", self.action_restart
            ),
            PaletteCommand(
                "Agents: roll back the selected agent to its previous image",
                "choirctl agent rollback",
                self.action_rollback,
            ),
        ]


def detail_text(status: v.AgentSummary, now: datetime) -> Text:
    """One or two lines of `agent.status` (or the `agent.list` row until it is read): pid,
    heartbeat, skill, config lag, image."""
    text = Text()
    text.append(f"{status.agent_id} ", style="bold")
    text.append_text(state_text(status.state))
    if status.pid:
        text.append(f"  pid {status.pid}")
    detailed = status if isinstance(status, a.AgentStatus) else None
    if detailed and detailed.last_heartbeat_at:
        beat = datetime.fromisoformat(detailed.last_heartbeat_at)
        text.append(f"  heartbeat {age(beat, now)} ago")
    if detailed and detailed.link:
        text.append(f"  via {detailed.link}")
    if detailed and detailed.skill:
        text.append(f"  skill {detailed.skill}")
    if detailed and detailed.config_behind:
        text.append(
            f"  config v{detailed.config_version} (latest v"
            f"{detailed.config_version_latest}: restart to catch up)",
            style="#e5c07b",
        )
    if detailed and detailed.image:
        text.append(f"\nimage {image_text(detailed.image)}")
    for why, names in detailed.unavailable_by_reason() if detailed else ():
        text.append("\nnot offered: ", style="#e5c07b")
        text.append(f"{', '.join(names)} ({why})")
    outage = status.interrupted
    if outage:  # why it is down, since when, and what brings it back
        text.append(f"\n{outage.status} at {_clock(outage.ended_at)}: ", style="bold #e06c75")
        text.append(outage.reason)
        text.append("\n")
        step = "resume it" if outage.resumes else "start a new session"
        text.append(f"press s to {step}, or run {outage.hint}")
    for held in status.held_jobs:
        text.append(f"\ncore job {held.job_name} {held.state}: ", style="bold #e06c75")
        text.append(f"decide with {held.hint}")
    return text


def _clock(iso: str | None) -> str:
    """A timestamp as local `HH:MM:SS`; `?` when absent."""
    return datetime.fromisoformat(iso).astimezone().strftime("%H:%M:%S") if iso else "?"
