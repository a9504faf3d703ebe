"""The Chat tab: the console DM with the selected agent (`choirctl chat` in a pane).

What the operator types goes out with `chat.send`; what the agent says (replies, core job
completion reports, errors, notices) arrives on the `chat.replies` stream, which choird serves
from the moment it becomes durable (~100 ms). choird keeps an agent's recent replies, so opening

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")

the tab late or reconnecting misses nothing: the stream is reopened and replies already shown
(by their session and event revision) are skipped.

`/inject <text>` reaches edge at its next safe point (§12.8). There is no operator verb that
injects into one core job, by design: "all core communication flows through edge", so
`/inject job-a stop after the tests` goes to edge, which relays it to job-a. The transcript keeps
the operator's own lines too (choird has no record of them), per agent, bounded.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from typing import TYPE_CHECKING, ClassVar, Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Input, RichLog, Static

from choir.errors import ChoirError, UnavailableError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.views.base import ChoirView, PaletteCommand

if TYPE_CHECKING:
    from choir.protocol.operator import answers as a
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")

Line = tuple[str, str]
"""(category, text): `you`, `injected`, `reply`, `core_report`, `error`, `notice`, `command`
(choird's answer to a `/…` command; `command_progress` a long one's steps, `command_error` its
refusal)."""

KEPT_LINES: Final = 500
"""Transcript lines kept per agent (the RichLog keeps the same)."""
KEPT_SEEN: Final = 1000
"""Reply ids remembered per agent; far more than choird keeps (`console.KEPT_REPLIES`)."""
RETRY_S: Final = 0.5
"""Pause before reopening a broken replies stream."""
INJECT: Final = "/inject"
LABELS: Final = {
    "you": ("you  ", "bold cyan"),
    "injected": ("inject ", "bold magenta"),
    "reply": ("", ""),
    "core_report": ("[core report] ", "bold green"),
    "error": ("[error] ", "bold red"),
    "notice": ("[notice] ", "yellow"),
    "command": ("choird  ", "bold blue"),
    "command_progress": ("choird  ", "blue"),
    "command_error": ("choird  ", "bold red"),
}
NO_AGENT: Final = "No agent selected: pick one in the Agents tab (or [ and ])."
HINT: Final = "enter sends · /inject <text> steers edge at its next safe point · /help"


def _identity(reply: a.ChatReply) -> tuple[str, int]:
    """What tells a reply apart when a reopened stream repeats it: the event carrying it, or
    (a command's answer, an undelivered message's error: no event) what it answers and its seq."""
    if reply.rev is not None:
        return reply.session_id, reply.rev
    return str(reply.in_reply_to), reply.seq


def line_text(category: str, text: str, agent_id: str) -> Text:
    """One transcript line: a label by category, the agent's name before its replies."""
    label, style = LABELS.get(category, ("", ""))
    out = Text()
    if category == "reply":
        out.append(f"{agent_id}  ", "bold")
    else:
        out.append(label, style)
    out.append(text)
    return out


class ChatView(ChoirView):
    """The selected agent's console DM: a transcript and an input line."""

    VIEW_ID = "chat"
    TITLE = "Chat"

    DEFAULT_CSS = """
    ChatView #chat-title { height: 1; padding: 0 1; color: $text-muted; }
    ChatView #chat-log { height: 1fr; padding: 0 1; }
    ChatView #chat-input { dock: bottom; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+l", "clear", "Clear"),
        Binding("escape", "leave_input", "Leave input", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.agent_id: str | None = None
        """Whose DM the tab shows (follows the selection)."""
        self.transcripts: dict[str, deque[Line]] = defaultdict(lambda: deque(maxlen=KEPT_LINES))
        """agent id -> its transcript, the operator's lines included."""
        self.seen: dict[str, dict[tuple[str, int], None]] = defaultdict(dict)
        """agent id -> the (session_id, rev) of each reply shown: a reopened stream repeats
        choird's kept replies, and a restarted choird numbers `seq` from 1 again, so replies
        are told apart by the event that carries them."""

    def compose(self) -> ComposeResult:
        yield Static(NO_AGENT, id="chat-title", markup=False)
        yield RichLog(id="chat-log", wrap=True, markup=False, max_lines=KEPT_LINES, min_width=20)
        yield Input(placeholder="message the agent", id="chat-input")

    @property
    def log_widget(self) -> RichLog:
        return self.query_one("#chat-log", RichLog)

    def focus_main(self) -> None:
        """Shown: the input line has the keys (escape hands them back to the tabs)."""
        self.query_one("#chat-input", Input).focus()

    def redraw(self) -> None:
        """Show the selected agent's transcript; follow its replies if it changed."""
        agent_id = self.selected_agent
        title = self.query_one("#chat-title", Static)
        title.update(f"chat with {agent_id} · {HINT}" if agent_id else NO_AGENT)
        self.query_one("#chat-input", Input).placeholder = (
            f"message {agent_id}" if agent_id else "select an agent first"
        )
        if agent_id == self.agent_id:
            return
        self.agent_id = agent_id
        self.log_widget.clear()
        if agent_id is None:
            self.workers.cancel_group(self, "chat-replies")
            return
        for category, text in self.transcripts[agent_id]:
            self.log_widget.write(line_text(category, text, agent_id), expand=True)
        self.follow(agent_id)

    def add(self, agent_id: str, category: str, text: str) -> None:
        self.transcripts[agent_id].append((category, text))
        if agent_id == self.agent_id:
            self.log_widget.write(line_text(category, text, agent_id), expand=True)

    # the replies stream

    @work(group="chat-replies", exclusive=True)
    async def follow(self, agent_id: str) -> None:
        """The agent's replies (choird's kept ones first); reopened after choird comes back."""
        while True:
            try:
                await self._read(agent_id)
            except UnavailableError:
                await asyncio.sleep(RETRY_S)  # let the bridge notice before waiting on it
                await self.bridge.wait_connected()
            except ChoirError as error:
                self.add(agent_id, "error", error.message)
                return

    async def _read(self, agent_id: str) -> None:
        seen = self.seen[agent_id]
        replies = self.bridge.items(OperatorVerb.CHAT_REPLIES, agent_id=agent_id, after_seq=0)
        async for reply in replies:
            event = _identity(reply)
            if event in seen:
                continue
            seen[event] = None
            if len(seen) > KEPT_SEEN:
                del seen[next(iter(seen))]  # the oldest: choird no longer keeps it
            text = reply.text
            for path in reply.attachments:
                text += f"\n  attachment: {path}"
            self.add(agent_id, reply.category or "reply", text)

    # sending

    @on(Input.Submitted, "#chat-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        if self.agent_id is None:
            self.notify(NO_AGENT, severity="warning", markup=False)
            return
        event.input.clear()
        self.send(self.agent_id, text)

    @work(group="chat-send")
    async def send(self, agent_id: str, text: str) -> None:
        """`chat.send`; the transcript shows the line, or choird's refusal."""
        injected = text == INJECT or text.startswith(INJECT + " ")
        shown = text[len(INJECT) :].strip() if injected else text
        self.add(agent_id, "injected" if injected else "you", shown or text)
        try:
            await self.bridge.ask(OperatorVerb.CHAT_SEND, a.ChatSent, agent_id=agent_id, text=text)
        except ChoirError as error:
            self.add(agent_id, "error", error.message)

    def action_leave_input(self) -> None:
        """Focus the transcript, so digits switch tabs again (enter in it types once more)."""
        self.log_widget.focus()

    def action_clear(self) -> None:
        if self.agent_id is not None:
            self.transcripts[self.agent_id].clear()
        self.log_widget.clear()

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "Chat: clear the transcript",
                "the console's own transcript (choirctl chat prints as it goes)",
                self.action_clear,
            )
        ]
