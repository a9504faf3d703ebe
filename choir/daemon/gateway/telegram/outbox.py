"""What a bot sends, in order per chat, each reply whole (§19.2), cut to Telegram's size and
paced under its rate limits (§19.7).

One queue and one sender task per chat: a chat's messages leave in the order they were queued,
and a chat that Telegram slows down (429 `retry_after`) or that keeps failing waits alone — the
other chats' senders go on. Every message or edit to a chat, queued here or sent at once (an
approval's message, its edit: `tried`), first waits for the chat's and the bot's budgets
(`pacing.Pacer`: about 1 a second per chat, 25 a second per bot), and a 429 holds back that
chat's budget for `retry_after`. A failed send is retried (`retry_after`, or a backoff for
network errors and 5xx) at most `ATTEMPTS` times; one Telegram refuses for good (400, 403) or
that fails every try is dropped, counted and logged as a WARNING — never its text — and
`stats()` shows the count and the last error to the operator.

The typing indicator (`Typing`) runs beside it: "typing…" every few seconds while the agent
works on a message from the chat, until it answers (or `TYPING_CAP_S` passes). It is a hint:
sent only when the bot's budget has a slot free at that moment and the chat is not held back,
so it never delays a message.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, TypeVar

from choir.daemon.gateway.telegram.chunks import chunks
from choir.daemon.gateway.telegram.client import BotClient
from choir.daemon.gateway.telegram.pacing import Pacer
from choir.logs import get_logger

log = get_logger("choird.telegram")

ATTEMPTS: Final = 5
"""Tries of one message before it is given up (and logged)."""
RETRY_S: Final = (1.0, 2.0, 4.0, 8.0)
"""Waits between tries after a network error or 5xx."""
TYPING_EVERY_S: Final = 4.5
"""Telegram shows "typing…" for 5 s after each sendChatAction."""
TYPING_CAP_S: Final = 600.0
"""Stop showing "typing…" after this long without an answer."""

_T = TypeVar("_T")

Done = Callable[[], Awaitable[None]]
"""What runs once a queued text left (or was given up): a reply's cursor is written."""


@dataclass(frozen=True)
class OutboxStats:
    """What an operator sees of a bot's sends (`choirctl gateway status`)."""

    queued: int
    """Messages waiting to leave (or leaving), over every chat."""
    failed: int
    """Sends given up since choird started."""
    last_error: str | None
    """Why the last one was given up: one line naming the chat, never the message's text."""
    last_error_at: datetime | None
    backoff_s: dict[int, float]
    """Chats Telegram holds back (429), and the seconds each has left."""


class Outbox:
    """Ordered, paced, retried sends of one bot, a queue per chat."""

    def __init__(self, client: BotClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._clock = clock
        self._pacer = Pacer(clock())
        self._gates: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        """Held while a send to the chat waits for its budget: two senders to one chat (the
        queue, an approval) take its tokens one after the other."""
        self._bot_gate = asyncio.Lock()
        """Held while a send waits for the bot's budget: the chats take turns (the lock is
        fair, first come first served)."""
        self._queues: dict[int, asyncio.Queue[tuple[str, Done | None]]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._queued = 0
        self.failed = 0
        """Messages given up since start."""
        self._last_error: str | None = None
        self._last_error_at: datetime | None = None

    def send(self, chat_id: int, text: str, done: Done | None = None) -> None:
        """Queue `text` for the chat, cut into messages of Telegram's size; `done` is awaited
        once the last of them left or was given up (not when choird stops first)."""
        queue = self._queues.get(chat_id)
        if queue is None:
            queue = self._queues[chat_id] = asyncio.Queue()
            self._senders[chat_id] = asyncio.get_running_loop().create_task(
                self._sender(chat_id, queue), name=f"telegram-send-{chat_id}"
            )
        pieces = chunks(text)
        for n, chunk in enumerate(pieces, 1):
            queue.put_nowait((chunk, done if n == len(pieces) else None))
            self._queued += 1

    def stats(self) -> OutboxStats:
        return OutboxStats(
            queued=self._queued,
            failed=self.failed,
            last_error=self._last_error,
            last_error_at=self._last_error_at,
            backoff_s=self._pacer.backoff(self._clock()),
        )

    def may_hint(self, chat_id: int) -> bool:
        """Whether a hint ("typing…") may go to the chat now: it is not held back by a 429
        and the bot's budget has a slot free (taken)."""
        now = self._clock()
        return self._pacer.chat_wait_s(chat_id, now) == 0 and self._pacer.spare(now)

    async def tried(
        self, chat_id: int, request: Callable[[], Awaitable[_T]], what: str
    ) -> _T | None:
        """`request` (a message or an edit to the chat) paced and tried as a queued reply
        is; None once given up (counted and logged)."""
        for attempt in range(ATTEMPTS):
            try:
                return await self._paced(chat_id, request)
            except Exception as error:
                failure = self._client.failure(error)
                if failure.kind in ("permanent", "token") or attempt == ATTEMPTS - 1:
                    self._given_up(chat_id, what, attempt + 1, failure.why)
                    return None
                if failure.kind != "retry_after":  # a 429 is waited out by the chat's budget
                    await asyncio.sleep(RETRY_S[attempt])
        return None

    async def _paced(self, chat_id: int, request: Callable[[], Awaitable[_T]]) -> _T:
        """`request` once the chat's and the bot's budgets allow; a 429 holds the chat back."""
        pacer = self._pacer
        async with self._gates[chat_id]:
            await _until(lambda: pacer.chat_wait_s(chat_id, self._clock()))
            async with self._bot_gate:
                await _until(lambda: pacer.bot_wait_s(self._clock()))
                pacer.sent(chat_id, self._clock())
        try:
            return await request()
        except Exception as error:
            failure = self._client.failure(error)
            if failure.kind == "retry_after":
                pacer.retry_after(chat_id, self._clock(), failure.retry_after_s)
            raise

    def _given_up(self, chat_id: int, what: str, attempts: int, why: str) -> None:
        self.failed += 1
        tries = "1 try" if attempts == 1 else f"{attempts} tries"
        self._last_error = f"{what} to chat {chat_id} dropped after {tries}: {why}"
        self._last_error_at = datetime.now(UTC)
        log.warning(
            f"telegram bot {self._client.gateway}: a {what} to chat {chat_id} was not "
            f"delivered and is dropped after {tries} ({why}); the bot's status counts these",
            fields={"gateway": self._client.gateway, "chat_id": chat_id, "attempts": attempts,
                    "error": why},
        )  # fmt: skip

    async def drain(self, timeout_s: float) -> None:
        """Wait (bounded) until every queued message left."""
        waits = [queue.join() for queue in self._queues.values()]
        if waits:
            try:
                async with asyncio.timeout(timeout_s):
                    await asyncio.gather(*waits)
            except TimeoutError:
                log.warning(
                    "telegram messages left unsent at stop",
                    fields={"gateway": self._client.gateway, "messages": self._queued},
                )

    async def close(self) -> None:
        for task in self._senders.values():
            task.cancel()
        await asyncio.gather(*self._senders.values(), return_exceptions=True)

    async def _sender(self, chat_id: int, queue: asyncio.Queue[tuple[str, Done | None]]) -> None:
        while True:
            text, done = await queue.get()
            try:
                await self._deliver(chat_id, text)
                if done is not None:  # before task_done: a drain at stop waits for it too
                    await done()
            finally:
                self._queued -= 1
                queue.task_done()

    async def _deliver(self, chat_id: int, text: str) -> None:
        async def send() -> None:
            await self._client.send_text(chat_id, text)

        await self.tried(chat_id, send, "message")


async def _until(wait_s: Callable[[], float]) -> None:
    """Sleep until `wait_s()` says 0, asking again after each sleep (a 429 may have come
    meanwhile, or the sleep may have ended early)."""
    wait = wait_s()
    while wait > 0:
        await asyncio.sleep(wait)
        wait = wait_s()


class Typing:
    """ "typing…" in chats whose user waits for the agent's answer."""

    def __init__(self, client: BotClient, outbox: Outbox) -> None:
        self._client = client
        self._outbox = outbox
        self._waiting: dict[int, set[str]] = defaultdict(set)
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def start(self, chat_id: int, message_id: str) -> None:
        """The agent works on `message_id` from the chat: show "typing…" until it answers."""
        self._waiting[chat_id].add(message_id)
        if chat_id not in self._tasks:
            self._tasks[chat_id] = asyncio.get_running_loop().create_task(
                self._show(chat_id), name=f"telegram-typing-{chat_id}"
            )

    def answered(self, chat_id: int, message_id: str | None) -> None:
        """The agent answered `message_id` (None: answered without saying which)."""
        waiting = self._waiting.get(chat_id)
        if waiting is None:
            return
        if message_id is None:
            waiting.clear()
        else:
            waiting.discard(message_id)
        if not waiting:
            self._stop(chat_id)

    def _stop(self, chat_id: int) -> None:
        self._waiting.pop(chat_id, None)
        task = self._tasks.pop(chat_id, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _show(self, chat_id: int) -> None:
        try:
            async with asyncio.timeout(TYPING_CAP_S):
                while self._waiting.get(chat_id):
                    try:
                        if self._outbox.may_hint(chat_id):
                            await self._client.typing(chat_id)
                    except Exception as error:  # only a hint: never retried, never fatal
                        log.debug(
                            "typing indicator not sent",
                            fields={"chat_id": chat_id, "error": self._client.failure(error).why},
                        )
                    await asyncio.sleep(TYPING_EVERY_S)
        except TimeoutError:
            pass
        finally:
            if self._tasks.get(chat_id) is asyncio.current_task():
                self._tasks.pop(chat_id, None)
                self._waiting.pop(chat_id, None)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
