"""What a bot sends, in order per chat, each reply whole (§19.2) and cut to Telegram's size.

One queue and one sender task per chat: a chat's messages leave in the order they were queued,
and a chat that Telegram slows down (429 `retry_after`) or that keeps failing waits alone — the
other chats' senders go on. A failed send is retried (`retry_after`, or a backoff for network
errors and 5xx) at most `ATTEMPTS` times; a send Telegram refuses for good (400, 403) is logged
— never its text — and dropped.

The typing indicator (`Typing`) runs beside it: "typing…" every few seconds while the agent
works on a message from the chat, until it answers (or `TYPING_CAP_S` passes).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from choir.daemon.gateway.telegram.chunks import chunks
from choir.daemon.gateway.telegram.client import BotClient
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


@dataclass(frozen=True)
class OutboxStats:
    """What `gateway.status` shows of a bot's sends (never a message's text)."""

    queued: int
    """Messages waiting to leave or being sent (a retry's wait included)."""
    failed: int
    """Messages given up since choird started."""
    last_error: str | None
    """Why the latest one was given up (one token-free line)."""
    last_error_at: datetime | None


class Outbox:
    """Ordered, retried sends of one bot, a queue per chat."""

    def __init__(self, client: BotClient) -> None:
        self._client = client
        self._queues: dict[int, asyncio.Queue[str]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self.failed = 0
        """Messages given up since start."""
        self._sending = 0
        self._last_error: tuple[str, datetime] | None = None

    def stats(self) -> OutboxStats:
        """Queued and failed sends, and the latest failure."""
        queued = self._sending + sum(queue.qsize() for queue in self._queues.values())
        why, at = self._last_error or (None, None)
        return OutboxStats(queued, self.failed, why, at)

    def send(self, chat_id: int, text: str) -> None:
        """Queue `text` for the chat, cut into messages of Telegram's size."""
        queue = self._queues.get(chat_id)
        if queue is None:
            queue = self._queues[chat_id] = asyncio.Queue()
            self._senders[chat_id] = asyncio.get_running_loop().create_task(
                self._sender(chat_id, queue), name=f"telegram-send-{chat_id}"
            )
        for chunk in chunks(text):
            queue.put_nowait(chunk)

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
                    fields={"gateway": self._client.gateway,
                            "messages": sum(q.qsize() for q in self._queues.values())},
                )  # fmt: skip

    async def close(self) -> None:
        for task in self._senders.values():
            task.cancel()
        await asyncio.gather(*self._senders.values(), return_exceptions=True)

    async def _sender(self, chat_id: int, queue: asyncio.Queue[str]) -> None:
        while True:
            text = await queue.get()
            self._sending += 1
            try:
                await self._deliver(chat_id, text)
            finally:
                self._sending -= 1
                queue.task_done()

    async def _deliver(self, chat_id: int, text: str) -> None:
        for attempt in range(ATTEMPTS):
            try:
                await self._client.send_text(chat_id, text)
                return
            except Exception as error:
                failure = self._client.failure(error)
                if failure.kind in ("permanent", "token") or attempt == ATTEMPTS - 1:
                    self.failed += 1
                    self._last_error = (failure.why, datetime.now(UTC))
                    log.error(
                        "telegram message not delivered",
                        fields={"gateway": self._client.gateway, "chat_id": chat_id,
                                "chars": len(text), "attempts": attempt + 1,
                                "error": failure.why},
                    )  # fmt: skip
                    return
                await asyncio.sleep(failure.retry_after_s or RETRY_S[attempt])


class Typing:
    """ "typing…" in chats whose user waits for the agent's answer."""

    def __init__(self, client: BotClient) -> None:
        self._client = client
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
