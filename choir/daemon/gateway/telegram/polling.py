"""One bot's life in choird: connect, then long-poll forever, its offset in Postgres (§19.2).

    connecting ──getMe ok──▶ polling ◀──▶ backing_off      (network, 5xx, 429: wait, retry)
        │ token rejected        │ token revoked
        ▼                       ▼
    invalid_token (the bot stops; choird runs on)           stopped (choird is stopping)

Each update is handed to `handle` in order; its offset is stored only after `handle` returned,
and `handle` returns once what the update asked for is durable (a message in the inbox) or
under way (a command), so a choird that dies in between sees the update again at its next start
and the inbox drops the message it already has: nothing is lost or doubled. A malformed update
is logged (its id, never its content) and skipped. An update whose handling fails (Postgres
away) is not confirmed: it is fetched and tried again after a pause, given up (logged) after
`HANDLE_TRIES`. No error of the Bot API ends the loop but a rejected token.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from telegram import Update

from choir.daemon.gateway.telegram.client import POLL_TIMEOUT_S, BotClient
from choir.logs import get_logger
from choir.store.gateway.offsets import load_offset, save_offset
from choir.store.postgres.pool import Pool

log = get_logger("choird.telegram")

BACKOFF_S: Final = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Waits after consecutive failures to reach the Bot API; the last one repeats."""

HANDLE_TRIES: Final = 5
"""Tries of one update whose handling fails (the database away) before it is given up."""

Handle = Callable[[Update], Awaitable[None]]


class BotState(StrEnum):
    CONNECTING = "connecting"
    POLLING = "polling"
    BACKING_OFF = "backing_off"
    INVALID_TOKEN = "invalid_token"
    STOPPED = "stopped"


class BotPoller:
    """Connects one bot and polls its updates into `handle`."""

    def __init__(self, client: BotClient, pool: Pool, handle: Handle) -> None:
        self.client = client
        self._pool = pool
        self._handle = handle
        self._state = BotState.CONNECTING
        self.state_since = _now()
        """When the bot entered its current state (`gateway.status`)."""
        self.last_error: str | None = None
        """Why the Bot API cannot be used right now (None once it answers again)."""
        self.last_failure: tuple[str, datetime] | None = None
        """The latest failure and when, kept after the bot recovered (`gateway.status`)."""
        self.last_poll_at: datetime | None = None
        """When a getUpdates last succeeded."""
        self.last_update_at: datetime | None = None
        """When the last update arrived."""
        self.offset: int | None = None
        self._failures = 0
        self._retries: dict[int, int] = {}

    @property
    def state(self) -> BotState:
        return self._state

    @state.setter
    def state(self, state: BotState) -> None:
        if state != self._state:
            self._state, self.state_since = state, _now()

    @property
    def gateway(self) -> str:
        return self.client.gateway

    async def run(self) -> None:
        """Connect, then poll until cancelled or the token is rejected."""
        try:
            if await self._connect():
                self.offset = await self._load_offset()
                log.info(
                    "telegram bot polling",
                    fields={"gateway": self.gateway, "bot": self.client.username,
                            "offset": self.offset},
                )  # fmt: skip
                while await self._poll_once():
                    pass
        finally:
            if self.state != BotState.INVALID_TOKEN:
                self.state = BotState.STOPPED

    async def _connect(self) -> bool:
        while True:
            try:
                await self.client.connect()
                return True
            except Exception as error:
                if not await self._failed("connect", error):
                    return False

    async def _poll_once(self) -> bool:
        """One getUpdates and its updates; False once the bot must stop. Until a poll has
        answered (after the connect, after a failure) it is a short one, so the bot shows
        `polling` as soon as Telegram answers, not when the first long poll ends."""
        timeout_s = POLL_TIMEOUT_S if self.state == BotState.POLLING else 0
        try:
            items = await self.client.fetch(self.offset, timeout_s)
        except Exception as error:
            return await self._failed("getUpdates", error)
        self.last_poll_at = _now()
        if items:
            self.last_update_at = self.last_poll_at
        if self.state != BotState.POLLING:
            if self.last_error is not None:
                log.info("telegram bot reached again", fields={"gateway": self.gateway})
            self.state, self.last_error, self._failures = BotState.POLLING, None, 0
        for item in items:
            if not await self._one(item):
                break  # fetched again from the same offset after a pause
        return True

    async def _one(self, item: Any) -> bool:
        """Handle one update and store the offset past it; False to try it again later."""
        update_id = item.get("update_id") if isinstance(item, dict) else None
        if not isinstance(update_id, int):
            log.warning("telegram update without an id ignored", fields={"gateway": self.gateway})
            return True
        if self.offset is not None and update_id < self.offset:
            return True  # confirmed before: a Bot API that repeats itself is not believed
        try:
            update = self.client.parse(item)
        except ValueError as error:
            log.warning(
                "malformed telegram update skipped",
                fields={"gateway": self.gateway, "update_id": update_id, "why": str(error)},
            )
        else:
            if not await self._handled(update, update_id):
                return False
        await self._store_offset(update_id + 1)
        return True

    async def _handled(self, update: Update, update_id: int) -> bool:
        """Whether the update was handled or given up; False: try it again after a pause (the
        database was away, say: the message must not be confirmed before it is stored)."""
        try:
            await self._handle(update)
        except Exception as error:
            self._retries[update_id] = tries = self._retries.get(update_id, 0) + 1
            fields = {"gateway": self.gateway, "update_id": update_id, "tries": tries}
            if tries < HANDLE_TRIES:
                log.warning("telegram update not handled; trying again", fields={
                    **fields, "error": f"{type(error).__name__}: {self.client.scrub(str(error))}"
                })  # fmt: skip
                await asyncio.sleep(BACKOFF_S[min(tries - 1, len(BACKOFF_S) - 1)])
                return False
            log.exception("telegram update given up", fields=fields)
        self._retries.pop(update_id, None)
        return True

    async def _failed(self, what: str, error: BaseException) -> bool:
        """Log `error` and wait before the next try; False when the bot must stop."""
        failure = self.client.failure(error)
        self.last_error = failure.why
        self.last_failure = (failure.why, _now())
        if failure.kind == "token":
            self.state = BotState.INVALID_TOKEN
            log.error(
                f"telegram bot {self.gateway}: {failure.why}; set the right token with "
                f"`choirctl secret set {self.client.secret}` and restart choird (`choir "
                "restart`; the other bots and choird keep running)",
                fields={"gateway": self.gateway, "call": what},
            )
            return False
        self.state = BotState.BACKING_OFF
        wait = failure.retry_after_s or BACKOFF_S[min(self._failures, len(BACKOFF_S) - 1)]
        self._failures += 1
        if self._failures <= 3 or self._failures % 20 == 0:  # a long outage, not a log flood
            log.warning(
                "telegram bot cannot reach the Bot API; retrying",
                fields={"gateway": self.gateway, "call": what, "error": failure.why,
                        "retry_in_s": wait, "failures": self._failures},
            )  # fmt: skip
        await asyncio.sleep(wait)
        return True

    async def _load_offset(self) -> int | None:
        """The stored offset; retried while the database is away (polling without it could
        hand out updates a previous choird handled)."""
        for attempt in itertools.count():
            try:
                async with self._pool.acquire() as conn:
                    return await load_offset(conn, self.gateway, self.client.bot_id)
            except Exception as error:
                if attempt % 20 == 0:
                    log.warning(
                        "telegram offset not readable yet; polling waits for the database",
                        fields={"gateway": self.gateway, "error": type(error).__name__},
                    )
                await asyncio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
        raise AssertionError("unreachable")

    async def _store_offset(self, offset: int) -> None:
        self.offset = offset
        try:
            async with self._pool.acquire() as conn:
                await save_offset(conn, self.gateway, self.client.bot_id, offset)
        except Exception as error:  # the database is away: the inbox drops a repeat anyway
            log.warning(
                "telegram offset not stored",
                fields={"gateway": self.gateway, "offset": offset,
                        "error": type(error).__name__},
            )  # fmt: skip


def _now() -> datetime:
    return datetime.now(UTC)
