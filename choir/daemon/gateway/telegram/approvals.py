"""Approvals as Telegram messages with [Approve] [Reject] buttons (§19.6).

Each approval an agent requests becomes one message in the DM its session is bound to and one in
each admin DM whose config asks for every approval (`approvals: "all"`), each copy's buttons
carrying callback data signed for its own chat (`callback_data`). A press is checked (its
chat, the HMAC, the expiry) and decided through the operator verbs `approval.approve` /
`approval.reject` — the path choirctl takes, the DM's scope included (a regular DM answers
only its bound agent's). A config change that takes effect only with a restart gets a third
button, [Approve + restart] (`approval.approve` with the restart choice, as choirctl's
`--restart`); its plain [Approve] is then refused, the chat told why and how to choose. Anything
else a press may be —
forged, replayed, expired, from another chat, already decided — changes nothing and is
answered "no longer valid".

Presses are handled in a task of their own, never behind the chat's queued replies (`outbox`)
or the agent's turn: the answer to the press and the edit of the message go straight to the
Bot API. Every outcome, wherever it was decided (a button, `/approve`, choirctl, the console,
the timeout), reaches `ApprovalService`'s subscribers once; from there the chat is told as
§19.6 words it and the message is edited to say who decided and when, its buttons gone — in
every chat that has a copy, whichever copy (or none) decided it.
`/approve` or `/reject` sent as a reply to the message answers its approval (`shown_in`).

Which messages show which approval is known in memory only (every copy, like the first): after
a choird restart, an older message's buttons still work (the key is kept in the home), and a
press registers that copy again.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from choir.commands.model import DmScope
from choir.commands.text import cut, scalar
from choir.daemon.gateway.commands import VerbCall
from choir.daemon.gateway.telegram.callback_data import KEY_BYTES, Action, sign, verify
from choir.daemon.gateway.telegram.client import BotClient
from choir.daemon.gateway.telegram.outbox import Outbox
from choir.daemon.proposals.steps import APPLIED_KINDS, CONFIG_CHANGE, TOOL
from choir.errors import ChoirError, UsageError
from choir.logs import get_logger
from choir.store.approvals.pending import ApprovalRow

log = get_logger("choird.telegram")

KEY_FILE: Final = "telegram-callback.key"
"""In the home, 0600: the HMAC key of the buttons' callback data (never in config, env or a
container)."""
NO_LONGER_VALID: Final = "no longer valid"
SUMMARY_WIDTH: Final = 300


@dataclass(frozen=True)
class Chat:
    """A DM's private chat on one bot."""

    client: BotClient
    outbox: Outbox
    dm: str
    scope: DmScope
    chat_id: int


@dataclass(frozen=True)
class Stepped:
    """A step of an apply, as its approval's chats are told it."""

    approval_id: str
    line: str


@dataclass(frozen=True)
class Card:
    """A message that shows an approval."""

    chat: Chat
    message_id: int
    text: str


NeedsRestart = Callable[[ApprovalRow], Awaitable[bool]]
"""Whether a pending approval takes effect only with a restart (a restart-only config change)."""
Where = Callable[[str | None], Awaitable[list[Chat]]]
"""The chats an approval of a session goes to: its bound DM's (when a Telegram DM), then the
admin DMs that take every approval."""


class ApprovalCards:
    """Sends approval messages, decides presses, and edits the messages once decided."""

    def __init__(
        self,
        call: VerbCall,
        key: bytes,
        where: Where,
        timeout_ms: Callable[[], int],
        *,
        needs_restart: NeedsRestart | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._call = call
        self._needs_restart = needs_restart
        self._key = key
        self._where = where
        self._timeout_ms = timeout_ms
        self._now = now
        self._cards: dict[str, list[Card]] = {}
        self._events: asyncio.Queue[ApprovalRow | Stepped] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._worker = asyncio.get_running_loop().create_task(
            self._work(), name="telegram-approvals"
        )

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)

    def changed(self, row: ApprovalRow) -> None:
        """An approval was requested or resolved (`ApprovalService`'s listeners): handled in
        order, so an outcome never overtakes its request's message."""
        self._events.put_nowait(row)

    def progressed(self, approval_id: str, line: str) -> None:
        """An approved proposal's apply finished (or undid) a step: a line in each chat that
        shows the approval, in order with its decision and its end."""
        self._events.put_nowait(Stepped(approval_id, line))

    async def press(
        self,
        chat: Chat,
        bound_agent: str | None,
        callback_id: str,
        data: str,
        message_id: int | None,
        text: str,
    ) -> None:
        """A button pressed in `chat` on message `message_id` (showing `text`)."""
        verified = verify(self._key, data, chat.chat_id, self._now(), bot=chat.client.gateway)
        if (
            verified is None
            or verified.action not in DONE
            or (chat.scope == "regular" and bound_agent is None)
        ):
            log.info("telegram approval button refused", fields={"dm": chat.dm})
            await self._answer(chat, callback_id, NO_LONGER_VALID)
            return
        approval_id = verified.approval_id
        # a message sent before a restart is known only from its press: edited once decided
        card = Card(chat, message_id, text) if message_id is not None else None
        added = card is not None and self._register(approval_id, card)
        request: dict[str, Any] = {"approval_id": approval_id, "by": chat.dm}
        if chat.scope == "regular":
            request["agent_id"] = bound_agent or ""
        if verified.action == "restart":
            request["restart"] = True
        verb = "reject" if verified.action == "reject" else "approve"
        try:
            await self._call(f"approval.{verb}", request)
        except UsageError as error:  # still pending: e.g. it needs the restart choice
            if added and card is not None:
                self._forget(approval_id, card)
            chat.outbox.send(chat.chat_id, error.message)
            await self._answer(chat, callback_id, cut(error.message, ANSWER_WIDTH))
            return
        except ChoirError as error:
            if added and card is not None:
                self._forget(approval_id, card)
            log.info(
                "telegram approval button refused",
                fields={"dm": chat.dm, "approval_id": approval_id, "why": error.message},
            )
            if verb == "approve" and await self._pending(approval_id, request.get("agent_id")):
                # refused, not decided (e.g. only an admin may allow it): say why
                chat.outbox.send(chat.chat_id, error.message)
                await self._answer(chat, callback_id, cut(error.message, ANSWER_WIDTH))
                return
            await self._answer(chat, callback_id, NO_LONGER_VALID)
            return
        except Exception:
            if added and card is not None:
                self._forget(approval_id, card)
            log.exception("telegram approval not decided", fields={"approval_id": approval_id})
            await self._answer(chat, callback_id, "not decided: see choirctl logs choird")
            return
        await self._answer(chat, callback_id, DONE[verified.action])

    def shown_in(self, chat_id: int, message_id: int) -> str | None:
        """The undecided approval the message shows, if it is one of its messages."""
        for approval_id, cards in self._cards.items():
            if any((c.chat.chat_id, c.message_id) == (chat_id, message_id) for c in cards):
                return approval_id
        return None

    # -- the worker -------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            event = await self._events.get()
            try:
                if isinstance(event, Stepped):
                    self._stepped(event)
                elif event.status == "pending":
                    await self._requested(event)
                else:
                    await self._resolved(event)
            except Exception:
                which = event.approval_id if isinstance(event, Stepped) else event.id
                log.exception("telegram approval message failed", fields={"approval_id": which})

    def _stepped(self, step: Stepped) -> None:
        for card in self._cards.get(step.approval_id, []):
            card.chat.outbox.send(card.chat.chat_id, progress_text(step))

    async def _requested(self, row: ApprovalRow) -> None:
        expires = row.created_at + timedelta(milliseconds=self._timeout_ms())
        expires_at = int(expires.timestamp()) + 1
        # side by side: a chat held back by a 429 never delays another chat's copy
        chats = await self._where(row.session_id)
        await asyncio.gather(*(self._send(row, chat, expires_at) for chat in chats))

    async def _send(self, row: ApprovalRow, chat: Chat, expires_at: int) -> None:
        """The approval's message in `chat`, its buttons signed for that chat alone."""
        restart = row.request_type == CONFIG_CHANGE and self._needs_restart is not None
        restart = restart and await self._restart_needed(row)
        buttons = [
            (
                label,
                sign(self._key, action, row.id, chat.chat_id, expires_at, bot=chat.client.gateway),
            )
            for label, action in (RESTART_BUTTONS if restart else BUTTONS)
        ]
        text = request_text(row, restart=restart)

        async def send() -> int:
            return await chat.client.send_buttons(chat.chat_id, text, buttons)

        message_id = await chat.outbox.tried(chat.chat_id, send, "approval message")
        if message_id is not None:
            self._register(row.id, Card(chat, message_id, text))

    async def _restart_needed(self, row: ApprovalRow) -> bool:
        assert self._needs_restart is not None
        try:
            return await self._needs_restart(row)
        except Exception:  # the plain buttons then: a plain approval says what it needs
            log.exception("restart need not known", fields={"approval_id": row.id})
            return False

    def _forget(self, approval_id: str, card: Card) -> None:
        """`card` does not show the approval after all (its press was refused)."""
        cards = self._cards.get(approval_id, [])
        if card in cards:
            cards.remove(card)
        if not cards:
            self._cards.pop(approval_id, None)

    def _register(self, approval_id: str, card: Card) -> bool:
        """Remember that `card` shows the approval (once: a press may have come first);
        whether it was new."""
        cards = self._cards.setdefault(approval_id, [])
        place = (card.chat.chat_id, card.message_id)
        if any((c.chat.chat_id, c.message_id) == place for c in cards):
            return False
        cards.append(card)
        return True

    async def _resolved(self, row: ApprovalRow) -> None:
        """Every copy edited and its chat told the outcome (§19.6): whoever sees the request
        in a chat sees its end there too — for a proposal choird applies, also the apply's end."""
        applying = row.status == "approved" and row.request_type in APPLIED_KINDS
        cards = list(self._cards.get(row.id, [])) if applying else self._cards.pop(row.id, [])
        await asyncio.gather(*(self._decided(row, card) for card in cards))

    async def _decided(self, row: ApprovalRow, card: Card) -> None:
        card.chat.outbox.send(card.chat.chat_id, outcome_text(row))
        if row.status in ("applied", "failed") or row.outcome is not None:
            return  # the message already says who approved it and when (a tool: phase 1 ended)
        edited = f"{card.text}\n\n{decided_line(row)}"

        async def edit() -> None:
            await card.chat.client.edit_text(card.chat.chat_id, card.message_id, edited)

        await card.chat.outbox.tried(card.chat.chat_id, edit, "approval message edit")

    async def _pending(self, approval_id: str, bound: str | None) -> bool:
        """Whether the approval is still pending (a refusal, not a decision, left it so) and
        is the pressing DM's to see (`bound`: a regular DM's agent; None: an admin DM)."""
        try:
            shown = await self._call("approval.show", {"approval_id": approval_id})
        except ChoirError:
            return False
        return (
            isinstance(shown, dict)
            and shown.get("status") == "pending"
            and (bound is None or shown.get("agent_id") == bound)
        )

    async def _answer(self, chat: Chat, callback_id: str, text: str) -> None:
        try:
            await chat.client.answer_callback(callback_id, text)
        except Exception as error:  # the spinner ends by itself after a while
            log.info(
                "telegram callback not answered",
                fields={"dm": chat.dm, "error": chat.client.failure(error).why},
            )


BUTTONS: Final[tuple[tuple[str, Action], ...]] = (("Approve", "approve"), ("Reject", "reject"))
RESTART_BUTTONS: Final[tuple[tuple[str, Action], ...]] = (
    ("Approve", "approve"), ("Approve + restart", "restart"), ("Reject", "reject"),
)  # fmt: skip
"""A config change that takes effect only with a restart: the restart is the approver's choice."""
DONE: Final[dict[Action, str]] = {
    "approve": "Approved", "reject": "Rejected", "restart": "Approved; restarting what it needs",
}  # fmt: skip
ANSWER_WIDTH: Final = 200
"""Telegram's limit on a callback answer's text."""


# -- texts (pure) -------------------------------------------------------------------------


def summary_of(row: ApprovalRow) -> str:
    """One line saying what was proposed: its summary or description (a tool: its name too)."""
    payload = row.payload
    text = next(
        (
            value
            for key in ("summary", "description", "intended_behavior")
            if isinstance(value := payload.get(key), str) and value.strip()
        ),
        None,
    )
    if text is None:
        text = scalar(payload)
    manifest = payload.get("manifest")
    llm = manifest.get("llm") if isinstance(manifest, dict) else None
    name = llm.get("name") if isinstance(llm, dict) else None
    if isinstance(name, str) and name:
        text = f"{name}: {text}"
    return cut(text, SUMMARY_WIDTH).rstrip(". ")


def request_text(row: ApprovalRow, *, restart: bool = False) -> str:
    if restart:
        return (
            f"{row.agent_id} asks for approval ({row.request_type}): {summary_of(row)}.\n"
            "It takes effect only with a restart: Approve + restart applies it and restarts "
            "what it needs (choird's own changes wait for its next start).\n"
            f"No buttons? Send /approve {row.id} restart or /reject {row.id}"
        )
    return (
        f"{row.agent_id} asks for approval ({row.request_type}): {summary_of(row)}.\n"
        f"No buttons? Send /approve {row.id} or /reject {row.id}"
    )


def progress_text(step: Stepped) -> str:
    """One apply step in the approval's chats: `ap-…: merge: done (commit 1a2b3c4d5e6f)`."""
    return f"Applying {step.approval_id}: {step.line}"


def outcome_text(row: ApprovalRow) -> str:
    """What §19.6 tells the chat once the approval is decided."""
    summary = summary_of(row)
    if row.status == "rejected" and row.resolved_by == "timeout":  # §19.6: silence rejects
        return f"Approval timed out: {summary}. Rejected automatically."
    if row.status == "approved" and row.request_type == TOOL:  # §8.10: a human implements it
        if row.outcome is not None:
            return f"Approved: {summary}. {row.outcome}"
        return f"Approved: {summary}. Committing its manifest and a stub for a human to write."
    if row.status == "approved" and row.request_type in APPLIED_KINDS:
        steps = (
            "config load, config apply"
            if row.request_type == CONFIG_CHANGE
            else "commit, merge, build, update"
        )
        return f"Approved: {summary}. Applying it: {steps}."
    outcomes: dict[str, str] = {
        "approved": f"Approved: {summary}. Executing.",
        "applied": f"Applied: {summary}. {row.outcome or ''}".strip(),
        "rejected": f"Rejected: {summary}.",
        "failed": f"Approved, but applying it failed: {summary}. {row.outcome or ''}".strip(),
    }
    return outcomes.get(row.status, f"{row.status}: {summary}.")


def decided_line(row: ApprovalRow) -> str:
    """Who decided and when, under the approval's message."""
    at = row.resolved_at or datetime.now(UTC)
    when = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if row.status == "rejected" and row.resolved_by == "timeout":
        return f"Timed out at {when}: rejected automatically."
    verb = "Rejected" if row.status == "rejected" else "Approved"
    return f"{verb} by {row.resolved_by} at {when}."


# -- the key ------------------------------------------------------------------------------


def load_key(home: Path) -> bytes:
    """choird's callback key, made on first use: random, in the home with mode 0600, so a
    restarted choird still honours the buttons it sent before."""
    path = home / KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_bytes()
        if len(key) == KEY_BYTES:
            return key
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC, 0o600)  # damaged: a new key
        os.fchmod(fd, 0o600)
    key = secrets.token_bytes(KEY_BYTES)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key
