"""A DM's commands (§19.3), run through choird's operator verbs — never re-implemented here.

`DmCommands.run` takes a parsed command (`choir.commands.dm`) and the DM it came from, calls
the command's operator verb in-process (`call`: the operator API's own route table, payload
validation included) and says the answer back as readable lines (`say`). A refusal from the verb
is the reply; so is an unexpected failure (logged). Nothing here is sent to the agent or stored
as one of its events.

`/approve` and `/reject` without an id answer the only pending approval; with several, the reply
is a numbered list (so is `/approvals`) and a later `/approve <n>` picks from the list this DM
was last shown. A regular DM only sees and answers its bound agent's approvals.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, Literal

from choir.commands.dm import Invocation, Seat, help_lines, payload
from choir.commands.text import (
    approval_lines,
    event_lines,
    knowledge_lines,
    progress_line,
    readable,
    status_lines,
)
from choir.errors import ChoirError, ConflictError, UsageError
from choir.logs import get_logger

log = get_logger("choird.commands")

Answer = dict[str, Any] | AsyncIterator[dict[str, Any]]
VerbCall = Callable[[str, dict[str, Any]], Awaitable[Answer]]
"""Run an operator verb with a payload (`OperatorApi`'s route table)."""
ReplyCategory = Literal["command", "command_progress", "command_error"]
"""A command's answer, a step of a long one, or its refusal or failure (its last reply)."""
Say = Callable[[str, ReplyCategory], None]
"""Reply with a text in a category."""

ANSWERS: Final = ("approval approve", "approval reject", "approval extend")


class DmCommands:
    """Runs DM commands over the operator verbs; remembers each DM's numbered approvals."""

    def __init__(self, call: VerbCall) -> None:
        self._call = call
        self._listed: dict[tuple[str, str], list[str]] = {}
        """(dm, bound agent) -> the approval ids it was last shown, by number."""

    async def run(self, invocation: Invocation, seat: Seat, say: Say) -> None:
        """Run the command and say its answer; every failure is a one-line reply."""
        try:
            say("\n".join(await self._answer(invocation, seat, say)), "command")
        except ChoirError as error:
            say(error.message, "command_error")
        except Exception:
            log.exception("a DM command failed", fields={"command": invocation.command.name})
            failed = f"/{invocation.command.dm} failed inside choird: see choirctl logs choird"
            say(failed, "command_error")

    async def _answer(self, invocation: Invocation, seat: Seat, say: Say) -> list[str]:
        cmd = invocation.command
        if cmd.name == "help":
            return help_lines(seat.scope)
        request = payload(invocation, seat)
        if cmd.name in ANSWERS:
            picked = await self._pick(seat, request.get("approval_id"), cmd.dm or "")
            if isinstance(picked, list):
                return picked
            request["approval_id"] = picked
        assert cmd.verb is not None
        answer = await self._call(cmd.verb, request)
        if not isinstance(answer, dict):
            answer = await _followed(answer, say)
        if cmd.done is not None:
            return [cmd.done.format(**request)]
        if cmd.shows == "approvals":
            return self._numbered(seat, answer["approvals"], "no pending approvals")
        if cmd.shows == "events":
            return event_lines(answer["events"])
        if cmd.shows == "status":
            return status_lines(answer)
        if cmd.shows == "knowledge":
            return knowledge_lines(answer)
        return readable(answer)

    async def _pick(self, seat: Seat, given: str | None, verb: str) -> str | list[str]:
        """The approval a `/approve`/`/reject` means, or the lines to reply instead."""
        listed = self._listed.get((seat.dm, seat.agent_id), [])
        if given is not None and given.isdigit() and len(given) < 4:
            number = int(given)
            if not 1 <= number <= len(listed):
                raise UsageError(f"no approval numbered {number}: /approvals lists pending ones")
            return listed[number - 1]
        if given is not None:
            return given
        scope = {"agent_id": seat.agent_id} if seat.scope == "regular" else {}
        answer = await self._call("approval.list", scope)
        assert isinstance(answer, dict)
        pending = answer["approvals"]
        if len(pending) == 1:
            return str(pending[0]["approval_id"])
        if not pending:
            raise ConflictError("no pending approvals to answer")
        return [*self._numbered(seat, pending, ""), f"send /{verb} <number> to answer one"]

    def _numbered(self, seat: Seat, approvals: list[dict[str, Any]], empty: str) -> list[str]:
        self._listed[(seat.dm, seat.agent_id)] = [str(a["approval_id"]) for a in approvals]
        return approval_lines(approvals) or [empty]


async def _followed(items: AsyncIterator[dict[str, Any]], say: Say) -> dict[str, Any]:
    """Say each progress item of a long verb as it comes; its result."""
    result: dict[str, Any] = {}
    async for item in items:
        if item.get("kind") == "result":
            result = dict(item.get("result") or {})
        elif item.get("log") is None:  # build output stays in choirctl logs
            say(progress_line(item), "command_progress")
    return result
