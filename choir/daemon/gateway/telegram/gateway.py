"""choird's Telegram bots (§19): their DMs' messages to the bound agents, replies back.

One `Application` per configured bot (`client`), each polled by a task of its own
(`polling`). The bot's configured DMs are its allowlist: an update from anyone else is
dropped with no reply, logged with the user's id and never its content. A DM's line is what
the console DM makes of it (`gateway.route`): a message goes through the durable inbox to the
agent whose running session holds the DM (§19.4), named `tg-<bot>-<update id>` so that an
update seen twice is accepted once; a `/…` command runs through the one command layer
(`DmCommands`, `choir.commands`) with the DM's scope. The agent's replies (`agent_replied`
events, delivered as heartbeats make them durable) go to the chat of the DM its session is
bound to, as plain text cut at Telegram's limit (`outbox`), with "typing…" shown meanwhile;
what a killed choird had not sent goes first when the bots start (`reply_cursor`).
Approvals the agents request are messages with buttons (`approvals`), and each core job a
live card (`cards`, unless the DM's `job_cards` is false); a press (a callback query) is
handled in a task of its own, never queued behind the chat's messages. Files go both ways
through the agent's `.choirtmp/` (§19.5): what a user sends is stored in `recv/` and announced
as a message with an attachment (`receive`); what the agent leaves in `send/` is uploaded to
the chat (`deliver`). The cards and the approval messages hear what adopted agents did as
choird came back, before the bots started, through `gateway.held`; replies need not (their
cursor).

Bots and DMs are read at start (config.json's `gateways` and `dms` are restart-required).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from telegram import CallbackQuery, Message, Update

from choir.commands.dm import Invocation, Seat, Usage, parse
from choir.commands.model import DmScope
from choir.config import ChoirConfig, DmConfig, TelegramGateway
from choir.daemon.agents.ingest import Durable
from choir.daemon.gateway.commands import ANSWERS, DmCommands, ReplyCategory, VerbCall
from choir.daemon.gateway.route import accept_message, run_command
from choir.daemon.gateway.telegram.approvals import ApprovalCards, Chat, load_key
from choir.daemon.gateway.telegram.cards import CODES, JobCards
from choir.daemon.gateway.telegram.client import BotClient
from choir.daemon.gateway.telegram.deliver import RECONCILE_S, Destination, SendFolders
from choir.daemon.gateway.telegram.files import Incoming, incoming
from choir.daemon.gateway.telegram.outbox import Outbox, Typing
from choir.daemon.gateway.telegram.polling import BotPoller, BotState
from choir.daemon.gateway.telegram.receive import Received, receive
from choir.daemon.gateway.telegram.reply_cursor import CATCH_UP_RETRY_S, owed, sent
from choir.daemon.gateway.telegram.status import NO_TOKEN, RUNNING, BotStatus, latest
from choir.daemon.operator.approvals.verbs import restart_plan_of
from choir.daemon.operator.context import OperatorContext
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol.log.committed import CommittedEvent
from choir.store.approvals.pending import ApprovalRow
from choir.store.inbox import InboxMessage
from choir.store.sessions import SessionRow

log = get_logger("choird.telegram")

ID_PREFIX: Final = "tg-"
"""Message ids of Telegram DMs: `tg-<gateway>-<update id>`."""

DRAIN_S: Final = 5.0
"""How long a stopping choird lets queued replies leave."""

LABELS: Final = {
    "core_report": "Core job report: ",
    "core_question": "Core job asks: ",
    "core_update": "Core job update: ",
}
"""How a reply that is not the edge's own answer is introduced."""

UNSUPPORTED: Final = (
    "Only text, files, photos, voice messages, audio and video reach the agent: this message "
    "was not delivered."
)


@dataclass(frozen=True)
class Dm:
    name: str
    config: DmConfig

    @property
    def scope(self) -> DmScope:
        return "admin" if self.config.admin else "regular"

    @property
    def chat_id(self) -> int:
        return int(self.config.user_id)


@dataclass
class Bot:
    """One configured bot and what runs for it."""

    gateway: str
    client: BotClient
    dms: dict[str, Dm]
    """Its allowlist: user id -> DM."""
    outbox: Outbox
    typing: Typing
    poller: BotPoller | None = None
    task: asyncio.Task[None] | None = None

    def status(self) -> BotStatus:
        """How the bot is doing, for `gateway.status` and `status` (read-only)."""
        sends = self.outbox.stats()
        poller = self.poller
        if poller is None:
            return BotStatus("stopped", queued=sends.queued, failed=sends.failed)
        send_error = (
            (sends.last_error, sends.last_error_at)
            if sends.last_error is not None and sends.last_error_at is not None
            else None
        )
        why, at = latest(poller.last_failure, send_error)
        return BotStatus(
            state=RUNNING if poller.state == BotState.POLLING else poller.state.value,
            since=poller.state_since,
            username=self.client.username or None,
            last_poll_at=poller.last_poll_at,
            last_update_at=poller.last_update_at,
            queued=sends.queued,
            failed=sends.failed,
            last_error=why,
            last_error_at=at,
        )


class TelegramGateways:
    """Every configured Telegram bot, started with choird and stopped with it."""

    def __init__(self, ctx: OperatorContext, commands: DmCommands, call: VerbCall) -> None:
        self._ctx = ctx
        self._commands = commands
        self._call = call
        self._cards: ApprovalCards | None = None
        self._jobs: JobCards | None = None
        self.bots: dict[str, Bot] = {}
        self._dm_of: dict[str, tuple[Bot, Dm]] = {}
        self._targets: dict[str, tuple[Bot, int] | None] = {}
        """Which bot and chat each session's replies go to (None: not a Telegram DM)."""
        self._replies: asyncio.Queue[Durable] = asyncio.Queue()
        self._relayed: dict[str, int] = {}
        """Each session's last reply queued for its DM: a reply told twice goes once."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._detach: Callable[[], None] | None = None
        self._relaying: asyncio.Task[None] | None = None
        self._folders = SendFolders(self._destination)
        self._watching: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start polling every bot (in the background: a bot that cannot connect is retried
        or, with a rejected token, given up and logged; choird never waits for Telegram)."""
        config = self._ctx.config
        secrets = self._ctx.stage.running.loaded.secrets
        for name, gateway in sorted(config.gateways.items()):
            if not isinstance(gateway, TelegramGateway):
                continue
            if gateway.secret not in secrets.names():
                log.error(
                    f"telegram bot {name}: its token secret {gateway.secret!r} is not set; set "
                    f"it with `choirctl secret set {gateway.secret}` and restart choird "
                    "(`choir restart`)",
                    fields={"gateway": name},
                )
                self._ctx.telegram_bots[name] = _without_token(gateway.secret)
                continue
            token = secrets.get(gateway.secret).get_secret_value()
            client = BotClient(name, token, gateway.base_url, secret=gateway.secret)
            outbox = Outbox(client)
            bot = Bot(name, client, _allowlist(config, name), outbox, Typing(client, outbox))
            for dm in bot.dms.values():
                self._dm_of[dm.name] = (bot, dm)
            bot.poller = BotPoller(client, self._ctx.pool, self._handler(bot))
            bot.task = asyncio.get_running_loop().create_task(
                bot.poller.run(), name=f"telegram-{name}"
            )
            self.bots[name] = bot
            self._ctx.telegram_bots[name] = bot.status
        if self.bots:
            detach_replies = self._ctx.services.replicator.subscribe(self._replies.put_nowait)
            detach_inbox = self._ctx.services.inbox.subscribe_undelivered(self._undelivered)
            key = load_key(self._ctx.home.root)
            self._cards = cards = ApprovalCards(
                self._call,
                key,
                self._approval_chats,
                lambda: self._ctx.config.approval_timeout_ms,
                needs_restart=self._needs_restart,
            )
            cards.start()
            approvals, news = self._ctx.services.approvals, self._ctx.news
            # those asked or decided as adopted agents came back, before the bots started, too
            detach_asked = (
                news.asked.subscribe(cards.changed)
                if news
                else approvals.subscribe_requests(cards.changed)
            )
            detach_decided = (news.decided if news else approvals).subscribe(cards.changed)
            detach_steps = approvals.subscribe_progress(cards.progressed)
            detach_jobs = self._job_cards(key)

            def detach() -> None:
                detach_replies()
                detach_inbox()
                detach_asked()
                detach_decided()
                detach_steps()
                detach_jobs()

            self._detach = detach
            self._relaying = asyncio.get_running_loop().create_task(
                self._relay_replies(), name="telegram-replies"
            )
            self._watching = asyncio.get_running_loop().create_task(
                self._watch_folders(), name="telegram-send-folders"
            )
            self._ctx.admin_notices.append(self.notify_admins)

    async def _needs_restart(self, row: ApprovalRow) -> bool:
        """Whether a config change takes effect only with a restart (its approval's third
        button)."""
        plan = await asyncio.to_thread(restart_plan_of, self._ctx, row)
        return plan is not None and plan.needed

    def notify_admins(self, text: str) -> None:
        """Send `text` to every admin DM of every bot (the recovery inbox's restart notice)."""
        for bot in self.bots.values():
            for dm in bot.dms.values():
                if dm.config.admin:
                    bot.outbox.send(dm.chat_id, text)

    async def close(self) -> None:
        if self._detach is not None:
            self._detach()
        if self._watching is not None:
            self._watching.cancel()
            await asyncio.gather(self._watching, return_exceptions=True)
        await self._folders.close()
        for task in [*(b.task for b in self.bots.values() if b.task), *self._tasks]:
            task.cancel()
        if self._relaying is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._relay_rest()
        if self._cards is not None:
            await self._cards.close()
        if self._jobs is not None:
            await self._jobs.close()
        for bot in self.bots.values():
            await bot.outbox.drain(DRAIN_S)
            await bot.outbox.close()
            await bot.typing.close()
            if bot.task is not None:
                await asyncio.gather(bot.task, return_exceptions=True)
            with contextlib.suppress(Exception):
                await bot.client.close()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _job_cards(self, key: bytes) -> Callable[[], None]:
        """Start the live core-job cards, fed by the replicated events, the lanes' reports and
        the sessions' ends — those of adopted agents from before the bots started (`held`) —;
        the callable that stops feeding them."""
        services = self._ctx.services
        self._jobs = jobs = JobCards(
            self._call,
            key,
            self._cards_chat,
            pool=self._ctx.pool,
            chat_named=self._dm_chat,
            lanes=services.status.lanes,
        )
        jobs.start()
        news = self._ctx.news
        stops = [
            (news.replicated if news else services.replicator).subscribe(jobs.replicated),
            services.status.subscribe(jobs.reported),
            (news.ended if news else services.sessions).subscribe(jobs.session_ended),
        ]

        def detach() -> None:
            for stop in stops:
                stop()

        return detach

    async def _cards_chat(self, session_id: str) -> Chat | None:
        """The chat of a session's job cards: its DM's, unless that DM turned cards off."""
        chat = await self._chat_of(session_id)
        if chat is None or not self._dm_of[chat.dm][1].config.job_cards:
            return None
        return chat

    def _dm_chat(self, dm_name: str) -> Chat | None:
        """The chat of a Telegram DM by its name, if it still is one with job cards (the
        cards a previous choird left are edited in it)."""
        found = self._dm_of.get(dm_name)
        if found is None or not found[1].config.job_cards:
            return None
        bot, dm = found
        return Chat(bot.client, bot.outbox, dm.name, dm.scope, dm.chat_id)

    @staticmethod
    def _state_of(bot: Bot) -> Callable[[], str]:
        """The bot's state for `status`: `running` while it polls (what the console's header
        counts as up, as for the console DM), else the poller's own (`backing_off`…)."""

        def state() -> str:
            if bot.poller is None:
                return "stopped"
            return "running" if bot.poller.state == BotState.POLLING else bot.poller.state.value

        return state

    # -- inbound ---------------------------------------------------------------------------

    def _handler(self, bot: Bot) -> Callable[[Update], Awaitable[None]]:
        return lambda update: self._on_update(bot, update)

    async def _on_update(self, bot: Bot, update: Update) -> None:
        if update.callback_query is not None:
            self._on_press(bot, update, update.callback_query)
            return
        message = update.message
        if message is None:
            log.debug("telegram update of an unhandled kind ignored", fields=_about(bot, update))
            return
        user = message.from_user
        dm = bot.dms.get(str(user.id)) if user is not None else None
        if dm is None or message.chat.type != "private":
            log.info(
                "telegram update from outside the allowlist dropped",
                fields={**_about(bot, update), "user_id": user.id if user else None,
                        "chat_type": message.chat.type},
            )  # fmt: skip
            return
        await self._from_dm(bot, dm, message, update.update_id)

    def _on_press(self, bot: Bot, update: Update, query: CallbackQuery) -> None:
        """A button pressed: decided in a task of its own (never behind the chat's queue)."""
        dm = bot.dms.get(str(query.from_user.id))
        if dm is None or self._cards is None or self._jobs is None:
            log.info(
                "telegram update from outside the allowlist dropped",
                fields={**_about(bot, update), "user_id": query.from_user.id},
            )
            return
        # the signature is checked against the presser's own DM, whatever chat the message
        # claims: a button signed for another chat fails, and only a message of this chat
        # is ever edited
        message = query.message
        shown = message if isinstance(message, Message) and message.chat.id == dm.chat_id else None
        chat = Chat(bot.client, bot.outbox, dm.name, dm.scope, dm.chat_id)
        cards, jobs, data = self._cards, self._jobs, query.data or ""

        async def press() -> None:
            try:
                session = await self._bound_session(dm.name)
            except Exception:  # the database away: the button's spinner ends by itself
                log.exception("telegram approval button not handled", fields={"dm": dm.name})
                return
            if data[:1] in CODES:  # a job card's
                bound = session.session_id if session else None
                await jobs.press(chat, bound, query.id, data)
                return
            agent = session.agent_id if session else _default_agent(self._ctx.config, dm.name)
            await cards.press(
                chat,
                agent,
                query.id,
                data,
                shown.message_id if shown else None,
                (shown.text or "") if shown else "",
            )

        self._spawn(press())

    async def _approval_chats(self, session_id: str | None) -> list[Chat]:
        """The chats an approval goes to: its session's DM, then each admin DM that takes
        every approval (`approvals: "all"`, whatever DM the agent is bound to, if any), once."""
        bound = await self._chat_of(session_id)
        chats = [bound] if bound is not None else []
        for bot, dm in self._dm_of.values():
            if dm.config.approvals == "all" and (bound is None or dm.name != bound.dm):
                chats.append(Chat(bot.client, bot.outbox, dm.name, dm.scope, dm.chat_id))
        return chats

    async def _chat_of(self, session_id: str | None) -> Chat | None:
        """The Telegram chat of the DM a session is bound to, if it is one."""
        if session_id is None:
            return None
        row = await self._ctx.sessions.get(session_id)
        found = self._dm_of.get(str(row.resource_bindings.get("dm") or ""))
        if found is None:
            return None
        bot, dm = found
        return Chat(bot.client, bot.outbox, dm.name, dm.scope, dm.chat_id)

    async def _from_dm(self, bot: Bot, dm: Dm, message: Message, update_id: int) -> None:
        text = message.text
        if text is None:
            file = incoming(message)
            if file is None:
                bot.outbox.send(dm.chat_id, UNSUPPORTED)
            else:
                await self._file(bot, dm, message, file, update_id)
            return
        session = await self._bound_session(dm.name)
        replied = message.reply_to_message
        if (
            replied is not None
            and self._jobs is not None
            and self._jobs.prompted(dm.chat_id, replied.message_id)
        ):  # the answer to a job card's [Inject…] prompt
            chat = Chat(bot.client, bot.outbox, dm.name, dm.scope, dm.chat_id)
            bound = session.session_id if session else None
            await self._jobs.reply(chat, bound, replied.message_id, text)
            return
        parsed = parse(text, dm.scope)
        if parsed is None:
            await self._message(bot, dm, session, text, f"{ID_PREFIX}{bot.gateway}-{update_id}")
        else:
            await self._command(bot, dm, session, self._replied(parsed, dm, message))

    async def _file(
        self, bot: Bot, dm: Dm, message: Message, file: Incoming, update_id: int
    ) -> None:
        """A user's file: stored in the bound agent's `.choirtmp/recv/`, then announced."""
        session = await self._bound_session(dm.name)
        workspace = self._workspace_of(session) if session else None
        if session is None or workspace is None:
            bot.outbox.send(dm.chat_id, await self._not_running(dm))
            return
        got = await receive(bot.client, update_id, file, message.caption, workspace)
        if not isinstance(got, Received):
            bot.outbox.send(dm.chat_id, got)
            return
        message_id = f"{ID_PREFIX}{bot.gateway}-{update_id}"
        await self._message(bot, dm, session, got.text, message_id, [got.path])

    def _workspace_of(self, session: SessionRow) -> Path | None:
        """The host directory of the session's workspace (what the agent sees as /workspace)."""
        workspace = self._ctx.config.workspaces.get(
            str(session.resource_bindings.get("workspace") or "")
        )
        return Path(workspace.path) if workspace is not None else None

    async def _message(
        self,
        bot: Bot,
        dm: Dm,
        session: SessionRow | None,
        text: str,
        message_id: str,
        attachments: list[str] | None = None,
    ) -> None:
        if session is None:
            bot.outbox.send(dm.chat_id, await self._not_running(dm))
            return
        self._targets[session.session_id] = (bot, dm.chat_id)
        fresh = await accept_message(
            self._ctx.services.inbox,
            self._ctx.push,
            session.session_id,
            session.agent_id,
            message_id,
            text,
            attachments or (),
        )
        if fresh:
            bot.typing.start(dm.chat_id, message_id)

    async def _command(
        self, bot: Bot, dm: Dm, session: SessionRow | None, parsed: Invocation | Usage
    ) -> None:
        agent_id = session.agent_id if session else _default_agent(self._ctx.config, dm.name)

        def say(text: str, category: ReplyCategory) -> None:
            bot.outbox.send(dm.chat_id, text)

        if isinstance(parsed, Invocation):
            if session is None and _needs_session(parsed):
                say(await self._not_running(dm), "command_error")
                return
            if agent_id is None and _needs_agent(parsed, dm.scope):
                say(_NO_AGENT, "command_error")
                return
            parsed = _bound_here(parsed, dm)
        seat = Seat(dm.name, dm.scope, agent_id or "", session.session_id if session else "")
        if run_command(
            parsed, seat, push=self._ctx.push, commands=self._commands, say=say, spawn=self._spawn
        ):
            say("injected: the agent sees it at its next safe point", "command")

    def _replied(self, parsed: Invocation | Usage, dm: Dm, message: Message) -> Invocation | Usage:
        """`/approve` or `/reject` without an id, sent as a reply to an approval's message,
        answers that approval (§19.6's fallback where buttons do not render)."""
        replied = message.reply_to_message
        if (
            not isinstance(parsed, Invocation)
            or parsed.command.name not in ANSWERS
            or "approval_id" in parsed.given
            or replied is None
            or self._cards is None
        ):
            return parsed
        approval_id = self._cards.shown_in(dm.chat_id, replied.message_id)
        if approval_id is None:
            return parsed
        return Invocation(parsed.command, {**parsed.given, "approval_id": approval_id})

    async def _bound_session(self, dm: str) -> SessionRow | None:
        """The running session that holds the DM (§19.4: one agent per DM)."""
        for row in await self._ctx.sessions.active():
            if row.resource_bindings.get("dm") == dm:
                return row
        return None

    async def _not_running(self, dm: Dm) -> str:
        agent_id = _default_agent(self._ctx.config, dm.name)
        if agent_id is None:
            return _NO_AGENT
        hint = (
            f"send /start {agent_id} to start it here"
            if dm.scope == "admin"
            else "ask the operator to start it"
        )
        try:
            await self._ctx.running_session(agent_id, hint=hint)
        except ChoirError as error:
            return error.message
        return f"{agent_id} runs bound to another DM: talk to it there"

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- outbound --------------------------------------------------------------------------

    async def _watch_folders(self) -> None:
        """Keep a watcher on `.choirtmp/send/` of each session bound to a Telegram DM."""
        while True:
            try:
                self._folders.reconcile(await self._ctx.sessions.active())
            except Exception as error:  # the database away: the watchers stay as they are
                log.debug("send folders not matched", fields={"error": type(error).__name__})
            await asyncio.sleep(RECONCILE_S)

    def _destination(self, session: SessionRow) -> Destination | None:
        found = self._dm_of.get(str(session.resource_bindings.get("dm") or ""))
        workspace = self._workspace_of(session)
        if found is None or workspace is None:
            return None
        bot, dm = found
        return Destination(bot.client, bot.outbox, dm.chat_id, workspace)

    async def _relay_replies(self) -> None:
        for pause in (*CATCH_UP_RETRY_S, None):  # what a killed choird owed goes first
            try:
                await self._catch_up()
                break
            except Exception:  # the database away: new replies wait, in order, meanwhile
                log.exception("telegram replies owed from before the start not relayed")
                if pause is not None:
                    await asyncio.sleep(pause)
        while True:
            durable = await self._replies.get()
            try:
                await self._relay(durable)
            except Exception:
                log.exception(
                    "telegram replies not relayed", fields={"session": durable.session_id}
                )

    async def _relay_rest(self) -> None:
        """At stop: what is already durable still goes out (bounded by the outbox drain)."""
        assert self._relaying is not None
        self._relaying.cancel()
        await asyncio.gather(self._relaying, return_exceptions=True)
        while not self._replies.empty():
            with contextlib.suppress(Exception):
                await self._relay(self._replies.get_nowait())

    async def _relay(self, durable: Durable) -> None:
        replies = [c for c in durable.events if c.event.kind == "agent_replied"]
        if not replies:
            return
        target = await self._target(durable.session_id)
        if target is None:
            return
        bot, chat_id = target
        for committed in replies:
            self._send_reply(bot, chat_id, durable.session_id, committed)

    async def _catch_up(self) -> None:
        for bot in self.bots.values():
            for dm in bot.dms.values():
                bound = await self._bound_session(dm.name)
                session = bound.session_id if bound is not None else None
                now = datetime.now(UTC)
                for session_id, committed in await owed(
                    self._ctx.pool, bot.gateway, dm.chat_id, session, now
                ):
                    self._send_reply(bot, dm.chat_id, session_id, committed)

    def _send_reply(self, bot: Bot, chat_id: int, session_id: str, at: CommittedEvent) -> None:
        """One reply to the chat, unless already queued; its cursor written once it left."""
        event = at.event
        if event.kind != "agent_replied" or at.rev <= self._relayed.get(session_id, 0):
            return
        self._relayed[session_id] = at.rev
        done = sent(self._ctx.pool, bot.gateway, chat_id, session_id, at.rev)
        bot.outbox.send(chat_id, LABELS.get(event.category, "") + event.text, done)
        if event.category in ("reply", "error"):
            bot.typing.answered(chat_id, event.in_reply_to)

    def _undelivered(self, message: InboxMessage, why: str) -> None:
        """A message whose session ended before the agent read it: its sender is told."""
        if not message.message_id.startswith(ID_PREFIX):
            return
        target = self._targets.get(message.session_id)
        if target is not None:
            bot, chat_id = target
            bot.typing.answered(chat_id, message.message_id)
            bot.outbox.send(
                chat_id,
                f"Your message was not delivered: {why}. Send it again once "
                f"{message.agent_id} runs.",
            )

    async def _target(self, session_id: str) -> tuple[Bot, int] | None:
        if session_id not in self._targets:
            row = await self._ctx.sessions.get(session_id)
            found = self._dm_of.get(str(row.resource_bindings.get("dm") or ""))
            self._targets[session_id] = (found[0], found[1].chat_id) if found else None
        return self._targets[session_id]


_NO_AGENT: Final = (
    "no agent is bound to this DM: an admin DM starts one here with /start <agent-id>"
)


def _without_token(secret: str) -> Callable[[], BotStatus]:
    """The status of a bot never started: its token secret is not set."""
    status = BotStatus(
        NO_TOKEN,
        since=datetime.now(UTC),
        last_error=f"its token secret {secret!r} is not set: choirctl secret set {secret}, "
        "then restart choird (choir restart)",
    )
    return lambda: status


def _allowlist(config: ChoirConfig, gateway: str) -> dict[str, Dm]:
    """The DMs configured on `gateway`, by Telegram user id."""
    return {
        dm.user_id: Dm(name, dm) for name, dm in sorted(config.dms.items()) if dm.gateway == gateway
    }


def _default_agent(config: ChoirConfig, dm: str) -> str | None:
    """The agent whose default DM this is (the one a command names when none runs here)."""
    return next((a for a, agent in sorted(config.agents.items()) if agent.defaults.dm == dm), None)


def _needs_session(invocation: Invocation) -> bool:
    command = invocation.command
    return command.name == "inject" or any(p.dm_fill == "session" for p in command.params)


def _needs_agent(invocation: Invocation, scope: DmScope) -> bool:
    """Whether the command acts on the DM's bound agent (none here to act on)."""
    for param in invocation.command.params:
        fill = param.dm_fill
        if fill == "bound" or (fill == "bound_or_named" and param.name not in invocation.given):
            return True
        if fill == "scoped" and scope == "regular":
            return True
    return False


def _bound_here(invocation: Invocation, dm: Dm) -> Invocation:
    """`/start <agent>` binds the agent to the DM that sent it unless it names one (§19.4)."""
    if invocation.command.name != "agent start":
        return invocation
    overrides = dict(invocation.given.get("overrides") or {})
    overrides.setdefault("dm", dm.name)
    return Invocation(invocation.command, {**invocation.given, "overrides": overrides})


def _about(bot: Bot, update: Update) -> dict[str, Any]:
    return {"gateway": bot.gateway, "update_id": update.update_id}
