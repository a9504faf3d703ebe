"""What every DM does with a line from its user (§19.2, §19.3): the console's and Telegram's.

A message goes to the agent bound to the DM through the durable inbox (`Inbox.accept`: stored
before it is acknowledged, pushed after); a command is `/inject` (pushed to edge), a usage
error or refusal (one reply), or an operator verb run by `DmCommands` in a task of its own.
The front ends differ only in where replies go and how a message is named.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from choir.commands.dm import Invocation, Seat, Usage, as_message, refusal
from choir.daemon.gateway.commands import DmCommands, Say
from choir.daemon.gateway.inbox import Inbox
from choir.protocol import InjectPush, UserMessagePush, WireModel

PushFn = Callable[[str, WireModel], None]
"""Push a ServerPush model to a session's agent (the daemon's PushHub, in JSON form)."""
Spawn = Callable[[Coroutine[Any, Any, None]], None]
"""Run a command's work in a task the front end owns (and cancels when it closes)."""


async def accept_message(
    inbox: Inbox,
    push: PushFn,
    session_id: str,
    agent_id: str,
    message_id: str,
    text: str,
    attachments: Sequence[str] = (),
) -> bool:
    """Store the message (with the workspace paths of its `attachments`) for the session's
    agent, then push it; False when `message_id` was accepted before (nothing pushed again: a
    front end may offer the same message twice)."""
    message = UserMessagePush(
        message_id=message_id, text=as_message(text), attachments=list(attachments)
    )
    return await inbox.accept(session_id, agent_id, message, lambda: push(session_id, message))


def run_command(
    parsed: Invocation | Usage,
    seat: Seat,
    *,
    push: PushFn,
    commands: DmCommands | None,
    say: Say,
    spawn: Spawn,
) -> bool:
    """Push `/inject` (True), or answer a usage error or refusal, or run the command in a task
    that says its answer; False for all but `/inject`."""
    if isinstance(parsed, Invocation) and parsed.command.name == "inject":
        push(seat.session_id, InjectPush(text=parsed.given["text"]))
        return True
    if isinstance(parsed, Usage):
        say(parsed.message, "command_error")
    elif (why := refusal(parsed, seat.scope)) is not None:
        say(f"refused: {why}", "command_error")
    elif commands is None:
        say("commands are not served by this DM", "command_error")
    else:
        spawn(commands.run(parsed, seat, say))
    return False
