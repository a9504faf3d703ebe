"""A local Telegram Bot API server for tests: real HTTP (aiohttp), the real protocol.

python-telegram-bot is pointed at it through the bot's `api_base_url` (design notes,
"Telegram"), so the gateway runs its production code against it:

    async with BotApiServer(TOKEN) as api:
        config["gateways"]["tg"] = {"type": "telegram", "secret": "tg", "api_base_url": api.url}
        api.user_says(USER, "hello")                     # an update from a user
        [reply] = await api.wait_sent(USER, 1)           # what the bot sent to that chat

It serves `getMe`, `getUpdates` (long polling: `offset` confirms earlier updates, `timeout`
waits for new ones), `sendMessage` (inline keyboards included), `editMessageText` (which,
as on Telegram, drops a keyboard it is not given), `editMessageReplyMarkup`,
`sendChatAction`, `answerCallbackQuery`, `deleteWebhook`, `getWebhookInfo`, `close`,
`logOut`; other methods answer 404 as Telegram does. A message's `reply_markup` may be an
inline keyboard or a ForceReply. `user_presses` is a user pressing an
inline button (a callback query), `answers` what the bot answered to each. Requests may be
form-encoded (what python-telegram-bot sends), multipart or JSON.
A wrong token answers 401 Unauthorized.

Files: `user_sends` is a user sending a document, photo, voice message, audio or video (its
bytes kept here), served back through `getFile` and the file route
(`/file/bot<token>/<file_path>`), which refuse a file over the cloud Bot API's 20 MB as Telegram
does ("file is too big"). `sendDocument`, `sendPhoto`, `sendVoice` and `sendVideo` take
multipart uploads, recorded whole in `uploads` (an empty file, a photo over 10 MB or any file
over 50 MB is refused as Telegram refuses it).

Tests read what the bot did (`sent`, `actions`, `calls`, `offsets`) and inject what Telegram
may do (`fail` a method — in one chat or any — with a 429 and `retry_after`, a 5xx or a 400;
`slow` a method down; `inject` a malformed update). `violations` counts the messages (sends
and edits) that broke Telegram's rate limits (`Limits`: per chat about one a second beyond a
small burst, 30 a second in all); each is counted, not refused. `sendMessage` enforces
Telegram's rules that a gateway can break: 4,096 UTF-16 code units at most, no empty text,
and balanced entities when a `parse_mode` is given ("can't parse entities").
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web
from aiohttp.web_request import FileField

MAX_TEXT = 4096
"""Telegram's limit on a message's text, in UTF-16 code units (after entity parsing)."""

BOT_ID = 7000001

MB = 1024 * 1024
DOWNLOAD_LIMIT = 20 * MB
"""The cloud Bot API's `getFile` limit."""
UPLOAD_LIMIT = 50 * MB
PHOTO_LIMIT = 10 * MB


@dataclass(frozen=True)
class Call:
    """One request the bot made: its method (as Telegram spells it) and its parameters."""

    method: str
    params: dict[str, Any]
    at: float


@dataclass(frozen=True)
class Sent:
    """A message the bot sent (or its text as last edited)."""

    chat_id: int
    message_id: int
    text: str
    params: dict[str, Any]

    @property
    def buttons(self) -> list[tuple[str, str]]:
        """The inline keyboard's buttons, (label, callback data), row after row."""
        markup = self.params.get("reply_markup") or {}
        rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
        return [(b["text"], b.get("callback_data", "")) for row in rows or [] for b in row]


@dataclass(frozen=True)
class Upload:
    """A file the bot uploaded: how (`sendPhoto`…), its name and its bytes."""

    chat_id: int
    message_id: int
    method: str
    filename: str
    content: bytes
    params: dict[str, Any]


@dataclass(frozen=True)
class _File:
    """A file a user sent, as `getFile` describes it."""

    file_id: str
    path: str
    content: bytes


@dataclass(frozen=True)
class Answer:
    """The bot's answer to a callback query."""

    callback_id: str
    text: str
    at: float


@dataclass
class Fault:
    """What the next `count` calls of `method` answer instead of the real thing."""

    method: str
    status: int
    description: str
    retry_after: int | None = None
    count: int = 1
    chat_id: int | None = None
    """Only calls to this chat (None: any)."""


@dataclass(frozen=True)
class Limits:
    """Telegram's flood limits as this server counts them (Telegram does not publish exact
    ones: "avoid more than one message per second in a chat", "no more than 30 per second")."""

    chat_per_s: float = 1.0
    chat_burst: float = 5.0
    """A chat's messages beyond this burst must keep to `chat_per_s` (a token bucket)."""
    global_per_s: int = 30
    """At most this many messages in any one second, over every chat."""


PACED = frozenset(
    {"sendmessage", "editmessagetext", "editmessagereplymarkup", "senddocument", "sendphoto",
     "sendvoice", "sendvideo", "sendaudio", "sendanimation", "sendmediagroup"}
)  # fmt: skip
"""Methods that put a message in a chat, which Telegram's rate limits count (chat actions
and callback answers are not messages)."""


@dataclass
class _Flood:
    """The rate-limit accounting."""

    limits: Limits
    tokens: dict[int, tuple[float, float]] = field(default_factory=dict)
    """chat id -> (tokens, as of)."""
    window: list[float] = field(default_factory=list)
    """Times of the messages of the last second."""
    violations: list[tuple[int, str]] = field(default_factory=list)
    """(chat id, which limit) of each message over a limit."""

    def count(self, chat_id: int, now: float) -> None:
        tokens, at = self.tokens.get(chat_id, (self.limits.chat_burst, now))
        tokens = min(self.limits.chat_burst, tokens + (now - at) * self.limits.chat_per_s)
        if tokens < 1:
            self.violations.append((chat_id, "chat"))
        else:
            tokens -= 1
        self.tokens[chat_id] = (tokens, now)
        self.window = [t for t in self.window if t > now - 1.0]
        if len(self.window) >= self.limits.global_per_s:
            self.violations.append((chat_id, "global"))
        else:
            self.window.append(now)


@dataclass
class _State:
    updates: list[dict[str, Any]] = field(default_factory=list)
    """Updates not yet confirmed by an offset past them."""
    sent: dict[int, list[Sent]] = field(default_factory=lambda: defaultdict(list))
    actions: list[tuple[int, str]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    offsets: list[int | None] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    delays: dict[str, float] = field(default_factory=dict)
    held: dict[str, asyncio.Event] = field(default_factory=dict)
    answers: list[Answer] = field(default_factory=list)
    uploads: dict[int, list[Upload]] = field(default_factory=lambda: defaultdict(list))
    files: dict[str, _File] = field(default_factory=dict)
    downloads: list[str] = field(default_factory=list)


class BotApiServer:
    """The Bot API of one bot (`token`) on a free loopback port."""

    def __init__(
        self, token: str, *, username: str = "choir_test_bot", limits: Limits | None = None
    ) -> None:
        self.token = token
        self.username = username
        self._state = _State()
        self._flood = _Flood(limits or Limits())
        self._changed = asyncio.Condition()
        self._update_ids = itertools.count(1001)
        self._callback_ids = itertools.count(1)
        self._message_ids: dict[int, itertools.count[int]] = defaultdict(lambda: itertools.count(1))
        self._runner: web.AppRunner | None = None
        self._closing = False
        self._notifying: set[asyncio.Task[None]] = set()
        self.injected: dict[int, dict[str, Any]] = {}
        """Every update queued, by id (`inject(injected[n], update_id=n)` offers it again, as
        a Telegram that never heard it confirmed would)."""
        self.url = ""
        """The base URL to configure as the bot's `api_base_url` (no trailing slash)."""

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=UPLOAD_LIMIT + MB)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True  # long polls in flight answer now, not at their timeout
        async with self._changed:
            self._changed.notify_all()
        for held in self._state.held.values():
            held.set()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what the tests inject -------------------------------------------------------------

    def user_says(
        self, user_id: int, text: str, *, first_name: str = "Ada", reply_to: Sent | None = None
    ) -> int:
        """A private-chat text message from `user_id` (a reply to `reply_to`); its update id."""
        user = {"id": user_id, "is_bot": False, "first_name": first_name}
        message: dict[str, Any] = {
            "message_id": next(self._message_ids[user_id]),
            "date": int(time.time()),
            "chat": {"id": user_id, "type": "private", "first_name": first_name},
            "from": user,
            "text": text,
        }
        if reply_to is not None:
            message["reply_to_message"] = self._message(
                reply_to.chat_id, reply_to.message_id, reply_to.text
            )
        if text.startswith("/"):
            command = text.split()[0]
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(command)}]
        return self.inject({"message": message})

    def user_presses(
        self, user_id: int, message: Sent, data: str, *, first_name: str = "Ada"
    ) -> str:
        """`user_id` presses a button with callback `data` under `message` (any data: a
        client can send what it likes); the callback query's id."""
        callback_id = f"cb-{next(self._callback_ids)}"
        shown = self._message(message.chat_id, message.message_id, message.text)
        if message.params.get("reply_markup"):
            shown["reply_markup"] = message.params["reply_markup"]
        user = {"id": user_id, "is_bot": False, "first_name": first_name}
        query = {"id": callback_id, "from": user, "chat_instance": f"ci-{message.chat_id}",
                 "message": shown, "data": data}  # fmt: skip
        self.inject({"callback_query": query})
        return callback_id

    def user_sends(
        self,
        user_id: int,
        kind: str,
        content: bytes,
        *,
        file_name: str | None = None,
        mime_type: str | None = None,
        caption: str | None = None,
        size_known: bool = True,
    ) -> int:
        """A private-chat message from `user_id` carrying a file: `kind` is `document`,
        `photo` (sent at two sizes, a thumbnail first, as Telegram does), `voice`, `audio`,
        `video` or `video_note` (without `file_size` unless `size_known`); its update id."""
        number = len(self._state.files) + 1
        folder = {"photo": "photos", "document": "documents"}.get(kind, kind)
        meta: dict[str, Any] = {**self._file(f"{kind}-{number}", folder, content)}
        if not size_known:
            del meta["file_size"]
        if file_name is not None:
            meta["file_name"] = file_name
        if mime_type is not None:
            meta["mime_type"] = mime_type
        message = self._from(user_id)
        if kind == "photo":
            thumb = self._file(f"thumb-{number}", "thumbnails", content[:16])
            message["photo"] = [
                {**thumb, "width": 90, "height": 60},
                {**meta, "width": 1280, "height": 853},
            ]
        else:
            if kind in ("voice", "audio", "video", "video_note"):
                meta["duration"] = 3
            if kind == "video":
                meta.update(width=640, height=360)
            if kind == "video_note":
                meta["length"] = 240
            message[kind] = meta
        if caption is not None:
            message["caption"] = caption
        return self.inject({"message": message})

    def _file(self, file_id: str, folder: str, content: bytes) -> dict[str, Any]:
        path = f"{folder}/file_{len(self._state.files)}"
        self._state.files[file_id] = _File(file_id, path, content)
        return {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_size": len(content)}

    def _from(self, user_id: int, first_name: str = "Ada") -> dict[str, Any]:
        return {
            "message_id": next(self._message_ids[user_id]),
            "date": int(time.time()),
            "chat": {"id": user_id, "type": "private", "first_name": first_name},
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
        }

    def inject(self, update: dict[str, Any], *, update_id: int | None = None) -> int:
        """Queue any update (malformed ones too); its update id (None: the next one)."""
        number = next(self._update_ids) if update_id is None else update_id
        self.injected[number] = update
        self._state.updates.append({"update_id": number, **update})
        self._notify()
        return number

    def fail(
        self,
        method: str,
        status: int,
        description: str = "",
        *,
        retry_after: int | None = None,
        count: int = 1,
        chat_id: int | None = None,
    ) -> None:
        """The next `count` calls of `method` (to `chat_id`: to that chat only) answer
        `status` (a 429 with `retry_after`)."""
        if not description:
            description = {
                429: f"Too Many Requests: retry after {retry_after}",
                500: "Internal Server Error",
                502: "Bad Gateway",
            }.get(status, "Bad Request")
        self._state.faults.append(Fault(method, status, description, retry_after, count, chat_id))

    def hold(self, method: str) -> None:
        """Calls of `method` wait until `release` (a Telegram that does not answer)."""
        self._state.held[method.lower()] = asyncio.Event()

    def release(self, method: str) -> None:
        held = self._state.held.pop(method.lower(), None)
        if held is not None:
            held.set()

    def faults_left(self, method: str) -> int:
        """Calls of `method` still to be refused by `fail`."""
        return sum(f.count for f in self._state.faults if f.method.lower() == method.lower())

    def slow(self, method: str, seconds: float) -> None:
        """Calls of `method` answer after `seconds` (0 turns it off)."""
        self._state.delays[method] = seconds

    # -- what the tests read ---------------------------------------------------------------

    def sent(self, chat_id: int) -> list[Sent]:
        return list(self._state.sent[chat_id])

    def texts(self, chat_id: int) -> list[str]:
        return [message.text for message in self._state.sent[chat_id]]

    @property
    def all_sent(self) -> dict[int, list[Sent]]:
        return {chat: list(messages) for chat, messages in self._state.sent.items() if messages}

    @property
    def actions(self) -> list[tuple[int, str]]:
        """`sendChatAction` calls: (chat id, action)."""
        return list(self._state.actions)

    @property
    def answers(self) -> list[Answer]:
        """`answerCallbackQuery` calls, in order."""
        return list(self._state.answers)

    def uploads(self, chat_id: int) -> list[Upload]:
        """Files uploaded to `chat_id`, in order."""
        return list(self._state.uploads[chat_id])

    @property
    def downloads(self) -> list[str]:
        """The `file_path` of every file downloaded, in order."""
        return list(self._state.downloads)

    async def wait_uploads(self, chat_id: int, count: int, *, within: float = 20) -> list[Upload]:
        """The first `count` files uploaded to `chat_id`, once there are that many."""
        await self.wait_for(lambda: len(self._state.uploads[chat_id]) >= count, within=within)
        return self.uploads(chat_id)[:count]

    def answer_to(self, callback_id: str) -> Answer | None:
        return next((a for a in self._state.answers if a.callback_id == callback_id), None)

    @property
    def calls(self) -> list[Call]:
        return list(self._state.calls)

    @property
    def violations(self) -> list[tuple[int, str]]:
        """Messages over Telegram's rate limits: (chat id, `chat` or `global`), in order."""
        return list(self._flood.violations)

    def sends(self, chat_id: int | None = None) -> list[Call]:
        """Calls that put a message in a chat (to `chat_id`: that chat only), failed ones too."""
        return [
            c
            for c in self._state.calls
            if c.method.lower() in PACED
            and (chat_id is None or _int(c.params.get("chat_id")) == chat_id)
        ]

    @property
    def offsets(self) -> list[int | None]:
        """The `offset` of every `getUpdates`, in order."""
        return list(self._state.offsets)

    @property
    def pending_updates(self) -> list[int]:
        """Update ids not yet confirmed by the bot."""
        return [update["update_id"] for update in self._state.updates]

    async def wait_sent(self, chat_id: int, count: int, *, within: float = 20) -> list[Sent]:
        """The first `count` messages sent to `chat_id`, once there are that many."""
        await self.wait_for(lambda: len(self._state.sent[chat_id]) >= count, within=within)
        return self.sent(chat_id)[:count]

    async def wait_for(self, condition: Any, *, within: float = 20) -> None:
        """Until `condition()` holds; AssertionError after `within` s."""
        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(condition)
        except TimeoutError:
            raise AssertionError(f"not within {within} s; sent: {self.all_sent}") from None

    # -- the protocol ----------------------------------------------------------------------

    def _notify(self) -> None:
        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        task = asyncio.get_running_loop().create_task(notify())
        self._notifying.add(task)  # a task nobody holds may be collected before it runs
        task.add_done_callback(self._notifying.discard)

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"].lower()
        params = await _params(request)
        self._state.calls.append(Call(request.match_info["method"], params, time.monotonic()))
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        chat_id = _int(params.get("chat_id"))
        if method in PACED and chat_id is not None:
            self._flood.count(chat_id, time.monotonic())
        delay = self._state.delays.get(_KNOWN.get(method, method), 0)
        if delay:
            await asyncio.sleep(delay)
        held = self._state.held.get(method)
        if held is not None:
            await held.wait()
        fault = self._fault(method, chat_id)
        if fault is not None:
            extra = {"retry_after": fault.retry_after} if fault.retry_after is not None else None
            self._notify()  # waiters on `calls` see the refused call
            return _error(fault.status, fault.description, extra)
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        answer: web.Response = await handler(params)
        self._notify()
        return answer

    def _fault(self, method: str, chat_id: int | None) -> Fault | None:
        for fault in self._state.faults:
            if fault.method.lower() == method and fault.chat_id in (None, chat_id):
                fault.count -= 1
                if fault.count <= 0:
                    self._state.faults.remove(fault)
                return fault
        return None

    async def _m_getme(self, params: dict[str, Any]) -> web.Response:
        return _ok(
            {
                "id": BOT_ID,
                "is_bot": True,
                "first_name": "choir",
                "username": self.username,
                "can_join_groups": False,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            }
        )

    async def _m_getupdates(self, params: dict[str, Any]) -> web.Response:
        offset = _int(params.get("offset"))
        self._state.offsets.append(offset)
        if offset is not None:  # confirms every update before it, as Telegram does
            self._state.updates = [u for u in self._state.updates if u["update_id"] >= offset]
            self._notify()  # waiters on `pending_updates` see it before the long poll ends
        timeout = float(params.get("timeout") or 0)
        limit = _int(params.get("limit")) or 100
        with _suppress_timeout():
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(lambda: bool(self._state.updates) or self._closing)
        return _ok(self._state.updates[:limit])

    async def _m_sendmessage(self, params: dict[str, Any]) -> web.Response:
        text = str(params.get("text", ""))
        problem = _text_problem(text, params.get("parse_mode")) or _markup_problem(params)
        if problem is not None:
            return _error(400, problem)
        chat_id = int(params["chat_id"])
        message_id = next(self._message_ids[chat_id])
        self._state.sent[chat_id].append(Sent(chat_id, message_id, text, params))
        return _ok(self._message(chat_id, message_id, text))

    async def _m_editmessagetext(self, params: dict[str, Any]) -> web.Response:
        text = str(params.get("text", ""))
        problem = _text_problem(text, params.get("parse_mode"))
        if problem is not None:
            return _error(400, problem)
        problem = _markup_problem(params)
        if problem is not None:
            return _error(400, problem)
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        messages = self._state.sent[chat_id]
        for index, message in enumerate(messages):
            if message.message_id == message_id:
                if message.text == text and message.params.get("reply_markup") == params.get(
                    "reply_markup"
                ):
                    return _error(400, _NOT_MODIFIED)
                messages[index] = Sent(chat_id, message_id, text, params)
                return _ok(self._message(chat_id, message_id, text))
        return _error(400, "Bad Request: message to edit not found")

    async def _m_editmessagereplymarkup(self, params: dict[str, Any]) -> web.Response:
        problem = _markup_problem(params)
        if problem is not None:
            return _error(400, problem)
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        messages = self._state.sent[chat_id]
        for index, message in enumerate(messages):
            if message.message_id == message_id:
                kept = {k: v for k, v in message.params.items() if k != "reply_markup"}
                if params.get("reply_markup"):
                    kept["reply_markup"] = params["reply_markup"]
                if kept == message.params:
                    return _error(400, _NOT_MODIFIED)
                messages[index] = Sent(chat_id, message_id, message.text, kept)
                return _ok(self._message(chat_id, message_id, message.text))
        return _error(400, "Bad Request: message to edit not found")

    async def _m_sendchataction(self, params: dict[str, Any]) -> web.Response:
        self._state.actions.append((int(params["chat_id"]), str(params["action"])))
        return _ok(True)

    async def _m_answercallbackquery(self, params: dict[str, Any]) -> web.Response:
        callback_id = str(params.get("callback_query_id", ""))
        if not callback_id.startswith("cb-") or self.answer_to(callback_id) is not None:
            return _error(400, "Bad Request: query is too old and response timeout expired")
        self._state.answers.append(
            Answer(callback_id, str(params.get("text", "")), time.monotonic())
        )
        return _ok(True)

    async def _m_deletewebhook(self, params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _m_getwebhookinfo(self, params: dict[str, Any]) -> web.Response:
        pending = len(self._state.updates)
        return _ok({"url": "", "has_custom_certificate": False, "pending_update_count": pending})

    async def _m_close(self, params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _m_logout(self, params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _m_getfile(self, params: dict[str, Any]) -> web.Response:
        file = self._state.files.get(str(params.get("file_id", "")))
        if file is None:
            return _error(400, "Bad Request: invalid file_id")
        if len(file.content) > DOWNLOAD_LIMIT:
            return _error(400, "Bad Request: file is too big")
        return _ok(
            {"file_id": file.file_id, "file_unique_id": f"u-{file.file_id}",
             "file_size": len(file.content), "file_path": file.path}
        )  # fmt: skip

    async def _download(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        path = request.match_info["path"]
        file = next((f for f in self._state.files.values() if f.path == path), None)
        if file is None or len(file.content) > DOWNLOAD_LIMIT:
            return _error(404, "Not Found")
        self._state.downloads.append(path)
        return web.Response(body=file.content, content_type="application/octet-stream")

    async def _m_senddocument(self, params: dict[str, Any]) -> web.Response:
        return self._upload("sendDocument", "document", params)

    async def _m_sendphoto(self, params: dict[str, Any]) -> web.Response:
        return self._upload("sendPhoto", "photo", params)

    async def _m_sendvoice(self, params: dict[str, Any]) -> web.Response:
        return self._upload("sendVoice", "voice", params)

    async def _m_sendvideo(self, params: dict[str, Any]) -> web.Response:
        return self._upload("sendVideo", "video", params)

    def _upload(self, method: str, media: str, params: dict[str, Any]) -> web.Response:
        part = params.get(media)
        if not isinstance(part, FileField):
            return _error(400, f"Bad Request: there is no {media} in the request")
        content = part.file.read()
        if not content:
            return _error(400, "Bad Request: file must be non-empty")
        if len(content) > UPLOAD_LIMIT:
            return _error(413, "Request Entity Too Large")
        if media == "photo" and len(content) > PHOTO_LIMIT:
            return _error(400, "Bad Request: PHOTO_INVALID_DIMENSIONS")
        chat_id = int(params["chat_id"])
        message_id = next(self._message_ids[chat_id])
        kept = {k: v for k, v in params.items() if k != media}
        upload = Upload(chat_id, message_id, method, part.filename, content, kept)
        self._state.uploads[chat_id].append(upload)
        message = self._message(chat_id, message_id, "")
        del message["text"]
        described = {"file_id": f"up-{message_id}", "file_unique_id": f"uu-{message_id}",
                     "file_size": len(content)}  # fmt: skip
        if media == "photo":
            message["photo"] = [{**described, "width": 1, "height": 1}]
        elif media == "document":
            message["document"] = {**described, "file_name": part.filename}
        elif media == "voice":
            message["voice"] = {**described, "duration": 1}
        else:
            message["video"] = {**described, "width": 1, "height": 1, "duration": 1}
        return _ok(message)

    def _message(self, chat_id: int, message_id: int, text: str) -> dict[str, Any]:
        return {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private"},
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "choir"},
            "text": text,
        }


_KNOWN = {
    name.lower(): name
    for name in (
        "getMe", "getUpdates", "sendMessage", "editMessageText", "editMessageReplyMarkup",
        "sendChatAction", "answerCallbackQuery", "deleteWebhook", "getWebhookInfo",
        "getFile", "sendDocument", "sendPhoto", "sendVoice", "sendVideo",
    )
}  # fmt: skip
"""`slow` takes Telegram's spelling; method names are case-insensitive on the wire."""


class _suppress_timeout:
    """Long polling ends quietly at its timeout."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> bool:
        return exc_type is TimeoutError


def _text_problem(text: str, parse_mode: Any) -> str | None:
    """What Telegram answers 400 for in a message's text, or None."""
    if not text.strip():
        return "Bad Request: message text is empty"
    if len(text.encode("utf-16-le")) // 2 > MAX_TEXT:
        return "Bad Request: message is too long"
    if parse_mode and any(text.count(mark) % 2 for mark in ("*", "_", "`")):
        return "Bad Request: can't parse entities: can't find end of the entity"
    return None


_NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)


def _markup_problem(params: dict[str, Any]) -> str | None:
    """What Telegram answers 400 for in an inline keyboard, or None."""
    markup = params.get("reply_markup")
    if markup is None or (isinstance(markup, dict) and markup.get("force_reply") is True):
        return None
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list):
        return "Bad Request: can't parse reply keyboard markup JSON object"
    for row in rows:
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                return "Bad Request: BUTTON_DATA_INVALID"
    return None


async def _params(request: web.Request) -> dict[str, Any]:
    """A request's parameters, whichever way they were sent; JSON-valued fields decoded."""
    if request.content_type == "application/json":
        body = await request.json()
        return dict(body) if isinstance(body, dict) else {}
    form = await request.post()
    params: dict[str, Any] = {**request.query}
    for key, value in form.items():
        params[key] = _decoded(value) if isinstance(value, str) else value
    return params


def _decoded(value: str) -> Any:
    """python-telegram-bot JSON-encodes objects and lists inside form fields."""
    if value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _int(value: Any) -> int | None:
    return None if value in (None, "") else int(value)


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(status: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)
