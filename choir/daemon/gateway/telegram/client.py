"""One bot's python-telegram-bot `Application`, and its errors in choir's words.

The application is built without PTB's `Updater`: choird polls itself (`polling`) so that the
offset is committed only once an update is handled (PTB keeps it in memory). Updates are
fetched as raw JSON and parsed one at a time, so one malformed update cannot block the ones
after it (`Bot.get_updates` parses a batch as a whole).

The token is in the URLs PTB builds and in some of its error messages (a rejected token is
quoted whole): nothing here logs or raises an error text that has not passed `scrub`, and
httpx's per-request log lines (which carry the URL) are kept out of choird's log.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

from telegram import (
    Bot,
    ForceReply,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    LinkPreviewOptions,
    Update,
)
from telegram.constants import ChatAction
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    EndPointNotFound,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import Application, ApplicationBuilder
from telegram.request import HTTPXRequest

from choir.logs import REDACTED

POLL_TIMEOUT_S: Final = 25
"""How long one `getUpdates` waits for an update (Telegram allows up to 50)."""
READ_MARGIN_S: Final = 10.0
"""How much longer than that the HTTP read may take before the poll counts as timed out."""
DEFAULT_API: Final = "https://api.telegram.org"

NO_PREVIEW: Final = LinkPreviewOptions(is_disabled=True)
"""Replies never unfurl links (§19.5 is silent; a chat full of previews is not a chat)."""

# PTB 22 warns (PTBDeprecationWarning) whenever a duration such as a 429's `retry_after` is read
# or built as an int; its documented opt-in to the coming timedelta form silences that. Only
# choird's own process reads it: agents get an environment of their own.
os.environ.setdefault("PTB_TIMEDELTA", "true")

for _noisy in ("httpx", "httpcore"):  # an INFO line per request, URL (and token) included
    logging.getLogger(_noisy).setLevel(logging.WARNING)
logging.getLogger("telegram").setLevel(logging.INFO)  # its DEBUG lines quote the bot's URL


@dataclass(frozen=True)
class Failure:
    """What a failed Bot API call means for the caller."""

    kind: str
    """`token` (rejected: give up), `retry_after` (wait `retry_after_s`), `transient` (back
    off and retry) or `permanent` (this request will never succeed: drop it)."""
    why: str
    """One line, free of the token."""
    retry_after_s: float = 0.0


class BotClient:
    """The Bot API as one configured bot (`gateway`) speaks it."""

    def __init__(self, gateway: str, token: str, api_base_url: str | None, *, secret: str) -> None:
        self.gateway = gateway
        self.secret = secret
        """The name of the token's secret (for messages: never the token)."""
        self._token = token
        base = (api_base_url or DEFAULT_API).rstrip("/")
        self.app: Application[Any, Any, Any, Any, Any, Any] = (
            ApplicationBuilder()
            .token(token)
            .base_url(f"{base}/bot")
            .base_file_url(f"{base}/file/bot")
            .updater(None)
            .build()
        )
        self._poll = HTTPXRequest(
            connection_pool_size=1, read_timeout=POLL_TIMEOUT_S + READ_MARGIN_S
        )
        self.username = ""

    @property
    def bot(self) -> Bot:
        bot: Bot = self.app.bot
        return bot

    @property
    def bot_id(self) -> int:
        return self.bot.id

    async def connect(self) -> None:
        """Initialise the application: `getMe` proves the token (InvalidToken if rejected);
        a webhook left on the bot is removed, as PTB's own polling does (getUpdates is refused
        while one is set), its pending updates kept."""
        await self.app.initialize()
        await self.bot.delete_webhook(drop_pending_updates=False)
        await self._poll.initialize()
        self.username = self.bot.username

    async def close(self) -> None:
        await self._poll.shutdown()
        await self.app.shutdown()
        # an application whose getMe failed is not initialized, and its shutdown does nothing:
        # the connection getMe opened is closed here (idempotent)
        await self.bot.request.shutdown()

    async def fetch(self, offset: int | None, timeout_s: int = POLL_TIMEOUT_S) -> list[Any]:
        """The next updates from `offset` (long polling), as raw JSON items (the parameters
        ride the query string, which the Bot API accepts for every method)."""
        query = (
            {"timeout": timeout_s} if offset is None else {"timeout": timeout_s, "offset": offset}
        )
        result = await self._poll.post(
            f"{self.bot.base_url}/getUpdates?{urlencode(query)}",
            read_timeout=timeout_s + READ_MARGIN_S,
        )
        return result if isinstance(result, list) else []

    def parse(self, item: Any) -> Update:
        """One update as PTB's model; ValueError naming the problem when it is malformed."""
        if not isinstance(item, dict) or not isinstance(item.get("update_id"), int):
            raise ValueError("no update_id")
        try:
            update = Update.de_json(item, self.bot)
        except Exception as error:  # PTB raises whatever the bad field made it raise
            raise ValueError(f"{type(error).__name__}: {self.scrub(str(error))}") from None
        if update is None:
            raise ValueError("empty update")
        return update

    async def send_text(self, chat_id: int, text: str) -> None:
        """One message, as plain text: no parse mode, so no character can fail it."""
        await self.bot.send_message(chat_id, text, link_preview_options=NO_PREVIEW)

    async def send_buttons(self, chat_id: int, text: str, buttons: list[tuple[str, str]]) -> int:
        """One plain-text message with a row of inline buttons (label, callback data); its
        message id."""
        message = await self.bot.send_message(
            chat_id, text, link_preview_options=NO_PREVIEW, reply_markup=_keyboard(buttons)
        )
        return message.message_id

    async def send_prompt(self, chat_id: int, text: str, placeholder: str) -> int:
        """A message the user's app answers with a reply to it (ForceReply); its message id."""
        markup = ForceReply(selective=False, input_field_placeholder=placeholder)
        message = await self.bot.send_message(
            chat_id, text, link_preview_options=NO_PREVIEW, reply_markup=markup
        )
        return message.message_id

    async def edit_text(
        self, chat_id: int, message_id: int, text: str, buttons: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Replace a message's text; its inline buttons become `buttons` (none: they go)."""
        await self.bot.edit_message_text(
            text,
            chat_id=chat_id,
            message_id=message_id,
            link_preview_options=NO_PREVIEW,
            reply_markup=_keyboard(buttons) if buttons else None,
        )

    async def answer_callback(self, callback_id: str, text: str) -> None:
        """End the button's spinner with a short notice."""
        await self.bot.answer_callback_query(callback_id, text=text)

    async def fetch_file(self, file_id: str, limit: int) -> bytes:
        """A user's file by its id (`getFile`, then the file URL); `FileTooBig` when Telegram
        says or the answer shows it is over `limit` bytes."""
        file = await self.bot.get_file(file_id)
        if (file.file_size or 0) > limit:
            raise FileTooBig(file.file_size or 0)
        # PTB reads a `file_path` that names a file on this host instead of downloading it
        # (the local Bot API server's mode): only a URL on the bot's own file base is taken
        if not (file.file_path or "").startswith(self.bot.base_file_url + "/"):
            raise ValueError("the Bot API answered getFile without a downloadable file path")
        data = bytes(await file.download_as_bytearray())
        if len(data) > limit:
            raise FileTooBig(len(data))
        return data

    async def send_file(self, method: str, chat_id: int, name: str, data: bytes) -> None:
        """Upload `data` as a photo, voice message, video or document named `name`."""
        upload = InputFile(data, filename=name)
        if method == "photo":
            await self.bot.send_photo(chat_id, upload)
        elif method == "voice":
            await self.bot.send_voice(chat_id, upload)
        elif method == "video":
            await self.bot.send_video(chat_id, upload, supports_streaming=True)
        else:
            await self.bot.send_document(chat_id, upload)

    async def typing(self, chat_id: int) -> None:
        await self.bot.send_chat_action(chat_id, ChatAction.TYPING)

    def scrub(self, text: str) -> str:
        """`text` with the token taken out."""
        return text.replace(self._token, REDACTED) if self._token else text

    def failure(self, error: BaseException) -> Failure:
        """What `error` from a Bot API call means, in one token-free line."""
        why = f"{type(error).__name__}: {self.scrub(str(error))}"
        if isinstance(error, InvalidToken | EndPointNotFound):
            return Failure("token", "the Bot API rejected the bot's token (401 Unauthorized)")
        if isinstance(error, RetryAfter):
            return Failure("retry_after", why, _retry_after_s(error))
        if isinstance(error, TimedOut | Conflict):
            return Failure("transient", why)
        if isinstance(error, BadRequest | Forbidden | ChatMigrated):
            return Failure("permanent", why)
        if isinstance(error, NetworkError | TelegramError):
            return Failure("transient", why)  # 5xx and connection failures come as these
        return Failure("transient", why)


class FileTooBig(Exception):
    """A user's file over the download limit."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def _keyboard(buttons: Sequence[tuple[str, str]]) -> InlineKeyboardMarkup:
    """One row of inline buttons (label, callback data)."""
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(label, callback_data=data) for label, data in buttons]]
    )


def _retry_after_s(error: RetryAfter) -> float:
    """`retry_after` in seconds (a timedelta with PTB_TIMEDELTA, an int without)."""
    value = error.retry_after
    return value if isinstance(value, int | float) else value.total_seconds()
