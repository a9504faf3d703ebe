"""The console DM (design notes, "Embedded defaults"): talk to an agent without a Telegram bot.

`choirctl chat` and the TUI's chat pane use it through the operator API. Like any DM (§19) it is
bound to one agent at a time: messages go to the agent whose running session holds the DM, as a
`user_message` push; what the agent says back are committed `agent_replied` events, delivered
here as soon as heartbeats make them durable (~100 ms).

A `/…` line is a command (§19.3, `choir.commands`): `/inject …` is pushed to edge, the others run
through the operator verbs (`gateway.commands`) in a task of their own, and their answers join
the same replies stream, answering the command's id: category `command`, `command_progress` for
the steps of a long one, `command_error` for a usage error, a refusal or a failure. They are
never sent to the agent, never stored as its events. A command the DM's scope may not run is
refused, never run.

A message is stored in the inbox (`daemon.inbox`) before `chat.send` answers, so it survives a
crash of the agent or of choird and is delivered once; if its session ends without reading it,
its sender gets an `error` reply saying so.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Final

from choir.commands.dm import Invocation, Seat, Usage, parse
from choir.commands.model import DmScope
from choir.daemon.agents.ingest import Durable
from choir.daemon.gateway.commands import DmCommands, ReplyCategory
from choir.daemon.gateway.inbox import Inbox
from choir.daemon.gateway.route import PushFn, accept_message, run_command
from choir.protocol import CommittedEvent
from choir.store.inbox import InboxMessage
from choir.store.sessions import SessionRow

ID_PREFIX: Final = "console-"
"""Message ids of the console DM (the inbox holds every DM's)."""

KEPT_REPLIES: Final = 100
"""Replies kept per agent for a chat window opened after they were sent."""

COMMAND_PREFIX: Final = "command-"
"""Ids of commands: their replies answer them (`in_reply_to`)."""


class ConsoleDm:
    """Routes console messages to agents and fans their replies out to open chat windows;
    runs the DM's commands through `commands` (None: only `/inject` is served)."""

    def __init__(self, commands: DmCommands | None = None) -> None:
        self._commands = commands
        self._tasks: set[asyncio.Task[None]] = set()
        self._recent: dict[str, deque[dict[str, Any]]] = defaultdict(
            lambda: deque(maxlen=KEPT_REPLIES)
        )
        self._readers: dict[str, set[asyncio.Queue[dict[str, Any]]]] = defaultdict(set)
        self._seq: dict[str, int] = defaultdict(int)

    def attach(
        self, subscribe: Callable[[Callable[[Durable], None]], Callable[[], None]]
    ) -> Callable[[], None]:
        """Listen to durable events (`EventIngest.subscribe`); returns the detach callable."""
        return subscribe(self._durable)

    def attach_inbox(self, inbox: Inbox) -> Callable[[], None]:
        """Tell senders of console messages their session will never read; returns the detach."""
        return inbox.subscribe_undelivered(self._undelivered)

    def _undelivered(self, message: InboxMessage, why: str) -> None:
        if not message.message_id.startswith(ID_PREFIX):
            return
        text = f"Your message was not delivered: {why}. Send it again once {message.agent_id} runs."
        self._publish(
            message.agent_id,
            {
                "agent_id": message.agent_id,
                "session_id": message.session_id,
                "rev": None,
                "lane": "edge",
                "category": "error",
                "text": text,
                "attachments": [],
                "in_reply_to": message.message_id,
                "artifact": None,
            },
        )

    async def send(
        self,
        session: SessionRow,
        text: str,
        *,
        push: PushFn,
        inbox: Inbox,
        dm: str,
        scope: DmScope,
    ) -> dict[str, Any]:
        """Deliver `text` from DM `dm` (of `scope`) to the agent running `session`: a message,
        stored in `inbox` first, or a command; `push` sends to a session's agent."""
        parsed = parse(text, scope)
        if parsed is not None:
            seat = Seat(dm, scope, session.agent_id, session.session_id)
            return self._command(parsed, seat, push)
        agent_id = session.agent_id
        message_id = f"{ID_PREFIX}{uuid.uuid4().hex[:12]}"
        # durable before it is acknowledged; pushed once the acknowledgement is on its way
        await accept_message(inbox, push, session.session_id, agent_id, message_id, text)
        return {
            "session_id": session.session_id,
            "injected": False,
            "message_id": message_id,
            "after_seq": self._last_seq(agent_id),
            "durable": True,
        }

    def _command(self, parsed: Invocation | Usage, seat: Seat, push: PushFn) -> dict[str, Any]:
        """Push `/inject`; reply to a usage error or refusal; run anything else in a task."""
        command_id = f"{COMMAND_PREFIX}{uuid.uuid4().hex[:12]}"
        after_seq = self._last_seq(seat.agent_id)  # before the command's first reply

        def say(text: str, category: ReplyCategory) -> None:
            self._publish(seat.agent_id, _said(seat, category, text, command_id))

        injected = run_command(
            parsed, seat, push=push, commands=self._commands, say=say, spawn=self._spawn
        )
        if injected:
            return {
                "session_id": seat.session_id,
                "injected": True,
                "message_id": None,
                "after_seq": after_seq,
                "durable": False,  # an injection is pushed only: it rides edge's next safe point
            }
        return {
            "session_id": seat.session_id,
            "injected": False,
            "message_id": command_id,
            "after_seq": after_seq,
            "durable": False,
            "command": parsed.command.name if isinstance(parsed, Invocation) else None,
        }

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def notice(self, agent_ids: list[str], text: str) -> None:
        """Say `text` from choird itself in the console chat of each agent (the recovery
        inbox's restart notice): one `notice` reply, no agent's event."""
        for agent_id in agent_ids:
            said = _said(Seat("console", "admin", agent_id, ""), "notice", text, "")
            self._publish(agent_id, {**said, "in_reply_to": None})

    def close(self) -> None:
        """Cancel the commands still running (choird is stopping)."""
        for task in list(self._tasks):
            task.cancel()

    def _last_seq(self, agent_id: str) -> int:
        """The seq of the agent's latest kept reply (0 if none): a new subscriber's start."""
        seen = self._recent[agent_id]
        return int(seen[-1]["seq"]) if seen else 0

    async def replies(self, agent_id: str, *, after_seq: int = 0) -> AsyncIterator[dict[str, Any]]:
        """The agent's replies: the kept ones after `after_seq`, then live ones as they come.

        `seq` counts an agent's replies across its sessions (revisions restart per session)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._readers[agent_id].add(queue)
        try:
            for reply in list(self._recent[agent_id]):
                if reply["seq"] > after_seq:
                    yield reply
            while True:
                yield await queue.get()
        finally:
            self._readers[agent_id].discard(queue)

    def _durable(self, durable: Durable) -> None:
        for committed in durable.events:
            event = committed.event
            if event.kind != "agent_replied":
                continue
            reply = {
                "agent_id": durable.agent_id,
                "session_id": durable.session_id,
                "rev": committed.rev,
                "lane": committed.lane,
                "category": event.category,
                "text": event.text,
                "attachments": list(event.attachments),
                "in_reply_to": event.in_reply_to,
                "artifact": _ref(committed),
            }
            self._publish(durable.agent_id, reply)

    def _publish(self, agent_id: str, reply: dict[str, Any]) -> None:
        """Number `reply` in the agent's sequence, keep it, and hand it to every reader."""
        self._seq[agent_id] += 1
        reply = {"seq": self._seq[agent_id], **reply}
        self._recent[agent_id].append(reply)
        for queue in self._readers[agent_id]:
            queue.put_nowait(reply)


def _said(seat: Seat, category: str, text: str, command_id: str) -> dict[str, Any]:
    """A command's reply, shaped like the agent's."""
    return {
        "agent_id": seat.agent_id,
        "session_id": seat.session_id,
        "rev": None,
        "lane": None,
        "category": category,
        "text": text,
        "attachments": [],
        "in_reply_to": command_id,
        "artifact": None,
    }


def _ref(committed: CommittedEvent) -> dict[str, Any] | None:
    """The reply's artifact when `text` is only its preview: `session.artifact` reads it whole."""
    artifact = committed.artifact
    return artifact.model_dump(mode="json") if artifact is not None else None


__all__ = ["COMMAND_PREFIX", "ID_PREFIX", "KEPT_REPLIES", "ConsoleDm", "PushFn"]
