"""Live core-job cards: one Telegram message per core job of a DM's agent, edited as it runs.

Each core job the agent bound to a Telegram DM starts (its `core_started` event made durable)
gets a card in the DM's chat: the job's name, state, step, last progress line and elapsed time,
with [Cancel] and [Inject…] buttons. What moves a card is what choird already hears, pushed,
never polled: the job's replicated events (`model_output` counts its steps,
`core_event_emitted` is its progress, `core_stopped` its outcome), its lane's REPORT_STATUS
(its state, the `StatusBoard`) and the end of its session. A card's own task edits it — at
most once every `EDIT_EVERY_S`, only when its text changed, and after `TICK_S` of quiet so
that the elapsed time moves on — so a busy job costs a chat at most one edit every few
seconds, and a 429 delays only that card. The last edit shows the outcome (done, failed,
cancelled) and the time the job took, and takes the buttons away.

The buttons' callback data is signed like an approval's (`callback_data`): bound to the card,
the chat it was sent to and an expiry. [Cancel] runs `session.cancel` (once per card);
[Inject…] sends a ForceReply prompt, and the user's reply to it runs `session.inject` for the
job — the operator verbs `choirctl session cancel` and `session inject` run. A press of a card
that ended, of another chat, or from a regular DM whose bound session is no longer the card's,
answers "no longer valid".

Cards outlive choird (`card_store`, `choir.store.gateway.job_cards`): a card is stored before
its message is sent, given the message id once Telegram answered, its text and state at each
edit, [Cancel] once pressed, its [Inject…] prompts, and deleted with its final edit. A starting
choird resumes every stored card before any news: it catches it up from its session's event
log after the job's `core_started` (steps, progress, `core_stopped`) and from its session's row
(ended or crashed while choird was down), then edits it again — to its outcome if it ended,
else on as before, since the adopted agent's events and reports arrive again through
replication and status; an event read at the start and then replicated is taken once (its
rev). What adopted agents replicate before the bots start (at once on reconnecting, step 6,
where the gateways start at step 8) is kept for the cards (`gateway.held`) and handled after
the stored cards: a job started while choird was away or coming back gets its card, once. So
does one whose start a previous choird replicated but was killed before it stored the card
(the `telegram.card.before_store` failpoint): a card is sent only once its row is stored, and
with the row its session's card cursor passes the job's start, in the order of the starts; a
starting choird sends the cards of the starts past the cursors, read from the sessions' logs
(`store.gateway.job_cards`). A
card made after its lane reported (a report that came first) shows that report's state, read
from the status board. The key the buttons are
signed with is kept in the home, so a resumed card's buttons verify. Two cases are not
resumed: a card whose DM is gone or moved to another chat, and one whose message id was not
stored — choird killed between Telegram taking the card and the write (the
`telegram.card.after_send` failpoint). That card is dropped, not sent again (Telegram has no
idempotent send: it might show twice); if it shows, it stays as it was and its buttons answer
"no longer valid". A choird killed between a card's final edit and its row's delete
(`telegram.card.before_drop`) leaves a card the next start resumes ended: it makes the same
final edit, Telegram answers "message is not modified" (taken as done) and the row goes. A live
card's [Inject…] prompts awaiting a reply (its newest
`PROMPTS_STORED`) are stored with it, so a reply after a restart still reaches the job. A
card's first write waits for the database (the card is sent once it took, `card_store`), in
the card's own task and after its session's previous card's (the order of the card cursor):
the cards of other sessions, and the worker handling every session's events, go on meanwhile.
A later write that fails (the database away) is logged, the card goes on in memory and in the
chat, and its next edit's write stores it whole again, its live [Inject…] prompts too (a
card's writes apply in the order they were made, so an answered prompt never comes back):
only a restart before that write loses what it missed — the whole card if it was its message
id. A job started in a session whose cards show nowhere (no Telegram DM with cards bound to
it) gets no card, then or ever: its session's card cursor passes it, and a starting choird
passes those its previous one did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from choir.commands.text import cut
from choir.daemon.agents.ingest import Durable
from choir.daemon.agents.status_board import LaneReport
from choir.daemon.gateway.commands import VerbCall
from choir.daemon.gateway.telegram.approvals import NO_LONGER_VALID, Chat
from choir.daemon.gateway.telegram.callback_data import Action, sign, verify
from choir.daemon.gateway.telegram.card_store import CardStore, Resumable, resumable, unsent
from choir.daemon.gateway.telegram.outbox import ATTEMPTS, RETRY_S
from choir.daemon.sessions.state import SessionEnded
from choir.errors import ChoirError
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.protocol import EDGE_LANE, CommittedEvent, CoreEvent, job_name_of
from choir.protocol.log.core_jobs import (
    CoreError,
    CoreFinalResult,
    CoreNeedInfo,
    CorePartialResult,
    CorePlan,
    CoreProgress,
    CoreThoughtSummary,
    CoreToolProposal,
)
from choir.store.gateway.job_cards import (
    CardRow,
    card_answered,
    card_cancelling,
    card_prompted,
    card_shown,
    drop_card,
)
from choir.store.postgres.pool import Pool
from choir.store.sessions import SessionStatus

log = get_logger("choird.telegram")

EDIT_EVERY_S: Final = 3.0
"""Least time between two edits of one card (Telegram allows a chat about one a second)."""
TICK_S: Final = 15.0
"""A quiet job's card is still edited this often, so that its elapsed time moves on."""
VALID_S: Final = 7 * 24 * 3600
"""How long a card's buttons are signed for (a card of a job that ended answers sooner)."""
LINE_WIDTH: Final = 200
"""The progress line and the outcome's report are cut to this many characters."""
PROMPTS_KEPT: Final = 256
"""Inject prompts remembered (the oldest forgotten first)."""
PROMPTS_STORED: Final = 8
"""Inject prompts of one card a restarted choird still takes a reply to (its newest)."""

BUTTONS: Final[tuple[tuple[str, Action], ...]] = (("Cancel", "cancel"), ("Inject…", "inject"))
CODES: Final = frozenset("ci")
"""The first character of a card button's callback data (`callback_data`'s codes)."""
STATES: Final = {
    "CORE_REASONING": "thinking",
    "CORE_WAITING_TOOL": "running a tool",
    "CORE_WAITING_INFO": "waiting for an answer",
}
"""How a REPORT_STATUS state reads on a card; any other is `starting` (before the first step)."""
ENDED: Final = frozenset({"CORE_COMPLETED", "CORE_TERMINATED"})
OUTCOMES: Final = {
    "completed": "done",
    "terminated": "failed",
    "cancelled": "cancelled",
    "session_ended": "stopped with its session",
    "session_crashed": "stopped: its session crashed",
}

Where = Callable[[str], Awaitable[Chat | None]]
"""The chat a session's cards go to: its bound DM's, if that DM is on Telegram and has cards."""
ChatNamed = Callable[[str], Chat | None]
"""A DM's chat by the DM's name (None: no such Telegram DM any more)."""
Lanes = Callable[[str], dict[str, LaneReport]]
"""A session's lanes' latest reports (`StatusBoard.lanes`)."""


@dataclass(eq=False)
class JobCard:
    """One core job's card and what it shows."""

    card_id: str
    chat: Chat
    session_id: str
    job_name: str
    started_at: datetime
    state: str = "starting"
    step: int | None = None
    progress: str = ""
    outcome: str | None = None
    report: str = ""
    ended_at: datetime | None = None
    cancelling: bool = False
    message_id: int | None = None
    shown: str = ""
    """The text last sent to Telegram."""
    agent_id: str = ""
    started_rev: int = 0
    """The rev of the job's `core_started` event."""
    rev: int = 0
    """The rev of the last event the card took in (one seen twice is taken once)."""
    next_edit: float = 0.0
    """Monotonic time before which the card is not edited again."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class JobCards:
    """Sends, edits and answers the cards of every Telegram DM's core jobs."""

    def __init__(
        self,
        call: VerbCall,
        key: bytes,
        where: Where,
        *,
        pool: Pool | None = None,
        chat_named: ChatNamed | None = None,
        lanes: Lanes | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._call = call
        self._key = key
        self._where = where
        self._pool = pool
        self._store = CardStore(pool)
        self._chat_named = chat_named
        self._lanes = lanes
        self._now = now
        self._cards: dict[str, JobCard] = {}
        """card id -> card, while its job runs."""
        self._by_job: dict[tuple[str, str], JobCard] = {}
        """(session id, job name) -> its running card."""
        self._chats: dict[str, Chat | None] = {}
        self._prompts: OrderedDict[tuple[int, int], JobCard] = OrderedDict()
        """(chat id, prompt message id) -> the card whose [Inject…] sent the prompt."""
        self._resumed: set[tuple[str, int]] = set()
        """(session id, rev of `core_started`) of the cards resumed at start, ended ones too,
        and of those sent from the log then (`_send_unsent`): that start replicated again makes
        no second card."""
        self._claims: dict[str, asyncio.Future[None]] = {}
        """session id -> its newest card's first write, resolved once stored (`_claim`)."""
        self._events: asyncio.Queue[Durable | SessionEnded] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._worker = asyncio.get_running_loop().create_task(self._work(), name="telegram-cards")

    async def close(self) -> None:
        tasks = [t for t in (self._worker, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- what choird hears (listeners: synchronous, never blocking) --------------------------

    def replicated(self, durable: Durable) -> None:
        """Events made durable (the replicator's listeners): a session's core-job events are
        handled in order, by the worker."""
        if any(_of_a_job(c) for c in durable.events):
            self._events.put_nowait(durable)

    def reported(self, session_id: str, lane: LaneReport) -> None:
        """A lane's REPORT_STATUS (the status board's listeners): the job's state."""
        card = self._by_job.get((session_id, job_name_of(lane.report.lane) or ""))
        if card is not None:
            _report(card, lane)

    def _reported_before(self, card: JobCard) -> None:
        """The job's state as its lane reported it before the card was made: a report that
        came first (before the job's start was replicated or handled, or before the bots
        started) is not lost."""
        lanes = self._lanes(card.session_id) if self._lanes is not None else {}
        for lane in lanes.values():
            if job_name_of(lane.report.lane) == card.job_name:
                _report(card, lane)

    def session_ended(self, ended: SessionEnded) -> None:
        """A session ended (the sessions service's listeners): its cards end with it."""
        self._events.put_nowait(ended)

    # -- button presses and prompt replies ---------------------------------------------------

    async def press(
        self, chat: Chat, bound_session: str | None, callback_id: str, data: str
    ) -> None:
        """A card's button pressed in `chat`, whose DM's agent runs `bound_session`."""
        verified = verify(self._key, data, chat.chat_id, self._now(), bot=chat.client.gateway)
        card = self._cards.get(verified.approval_id) if verified is not None else None
        if (
            verified is None
            or card is None
            or card.chat.chat_id != chat.chat_id
            or (chat.scope == "regular" and bound_session != card.session_id)
        ):
            log.info("telegram job card button refused", fields={"dm": chat.dm})
            await _answer(chat, callback_id, NO_LONGER_VALID)
            return
        if verified.action == "cancel":
            await self._cancel(chat, card, callback_id)
        elif verified.action == "inject":
            await self._prompt(chat, card, callback_id)
        else:
            await _answer(chat, callback_id, NO_LONGER_VALID)

    def prompted(self, chat_id: int, message_id: int) -> bool:
        """Whether the message is one of the cards' inject prompts in that chat."""
        return (chat_id, message_id) in self._prompts

    async def reply(self, chat: Chat, bound_session: str | None, prompt_id: int, text: str) -> None:
        """The user's reply to an inject prompt: the instruction goes to the card's job."""
        card = self._prompts.pop((chat.chat_id, prompt_id), None)
        if card is None:
            return
        await self._store.write(
            "reply",
            card.card_id,
            card.job_name,
            lambda c: card_answered(c, card.card_id, prompt_id),
        )
        job = card.job_name
        if card.outcome is not None or (
            chat.scope == "regular" and bound_session != card.session_id
        ):
            chat.outbox.send(chat.chat_id, f"Core job {job} has ended: nothing was sent to it.")
            return
        request = {"session_id": card.session_id, "job_name": job, "text": text}
        try:
            await self._call("session.inject", request)
        except ChoirError as error:
            chat.outbox.send(chat.chat_id, f"Not sent to core job {job}: {error.message}")
            return
        except Exception:
            log.exception("telegram job card injection failed", fields={"job": job})
            chat.outbox.send(chat.chat_id, "Not sent: it failed inside choird (choirctl logs)")
            return
        chat.outbox.send(chat.chat_id, f"Sent to core job {job}: it reads it at its next step.")

    async def _cancel(self, chat: Chat, card: JobCard, callback_id: str) -> None:
        if card.cancelling:
            await _answer(chat, callback_id, f"{card.job_name} is being cancelled already")
            return
        card.cancelling = True
        request = {"session_id": card.session_id, "job_name": card.job_name}
        try:
            await self._call("session.cancel", request)
        except ChoirError as error:
            card.cancelling = False
            log.info(
                "telegram job card cancel refused",
                fields={"dm": chat.dm, "job": card.job_name, "why": error.message},
            )
            await _answer(chat, callback_id, NO_LONGER_VALID)
            return
        except Exception:
            card.cancelling = False
            log.exception("telegram job card cancel failed", fields={"job": card.job_name})
            await _answer(chat, callback_id, "not cancelled: see choirctl logs choird")
            return
        card.changed.set()
        await _answer(chat, callback_id, f"Cancelling {card.job_name}")
        await self._store.write(
            "cancel", card.card_id, card.job_name, lambda c: card_cancelling(c, card.card_id)
        )

    async def _prompt(self, chat: Chat, card: JobCard, callback_id: str) -> None:
        job = card.job_name
        text = f"Reply to this message with an instruction for core job {job}."
        try:
            prompt_id = await chat.client.send_prompt(chat.chat_id, text, f"instruction for {job}")
        except Exception as error:
            log.info(
                "telegram inject prompt not sent",
                fields={"dm": chat.dm, "error": chat.client.failure(error).why},
            )
            await _answer(chat, callback_id, "no prompt could be sent: try again")
            return
        self._remember(card, prompt_id)
        # written before the press is answered, with no `await` since it was remembered: a
        # reply to it, whose write removes it, comes after (`CardStore.write`'s order)
        await self._store.write(
            "prompt",
            card.card_id,
            job,
            lambda c: card_prompted(c, card.card_id, prompt_id, PROMPTS_STORED),
        )
        await _answer(chat, callback_id, f"Reply to the prompt to instruct {job}")

    def _remember(self, card: JobCard, prompt_id: int) -> None:
        self._prompts[(card.chat.chat_id, prompt_id)] = card
        while len(self._prompts) > PROMPTS_KEPT:
            self._prompts.popitem(last=False)

    # -- the worker: events in order --------------------------------------------------------

    async def _work(self) -> None:
        if self._pool is not None:  # the cards a previous choird left, before any news
            try:
                for found in await resumable(self._pool):
                    self._resume(found)
            except Exception:
                log.exception("telegram job cards of the previous choird not resumed")
            await self._send_unsent(self._pool)
        while True:
            item = await self._events.get()
            try:
                if isinstance(item, SessionEnded):
                    self._end_session(item)
                else:
                    await self._durable(item)
            except Exception:
                log.exception("telegram job cards not updated", fields={"session": item.session_id})

    async def _send_unsent(self, pool: Pool) -> None:
        """The cards a previous choird never sent: jobs started (durably) before it stopped
        but before their cards were stored, read from their sessions' logs past the card
        cursors and handled as if replicated now. Their starts are remembered with the resumed
        ones, so the same events replicated again (`held`) make no second card."""
        try:
            found = await unsent(pool, self._wanted)
        except Exception:
            log.exception("telegram job cards of the previous choird not sent")
            return
        for durable in found:
            starts = [c.rev for c in durable.events if c.event.kind == "core_started"]
            log.info(
                "telegram job cards sent from the log",
                fields={"session": durable.session_id, "starts": starts},
            )
            try:
                await self._durable(durable)
            except Exception:
                log.exception("telegram job cards not sent", fields={"session": durable.session_id})
            self._resumed.update((durable.session_id, rev) for rev in starts)

    async def _wanted(self, session_id: str) -> bool:
        """Whether the session's cards show in a chat (cached as `_started` does)."""
        if session_id not in self._chats:
            self._chats[session_id] = await self._where(session_id)
        return self._chats[session_id] is not None

    async def _durable(self, durable: Durable) -> None:
        for committed in durable.events:
            event = committed.event
            if event.kind == "core_started":
                await self._started(durable, committed)
                continue
            card = self._by_job.get((durable.session_id, _job_of(committed)))
            if card is not None:
                self._take(card, committed)

    def _take(self, card: JobCard, committed: CommittedEvent) -> None:
        """One event of the card's job, unless the card took it already."""
        if committed.rev <= card.rev:  # read from the log at a restart, then replicated
            return
        card.rev = committed.rev
        event = committed.event
        if event.kind == "model_output":  # one per step: the step's LLM call
            card.step = (card.step or 0) + 1
            card.changed.set()
        elif event.kind == "core_event_emitted":
            line = progress_line(event.event)
            if line is not None and line != card.progress:
                card.progress = line
                card.changed.set()
        elif event.kind == "core_stopped":
            self._ended(card, event.outcome, event.report, committed.ts)

    async def _started(self, durable: Durable, committed: CommittedEvent) -> None:
        assert committed.event.kind == "core_started"
        session_id, job_name = durable.session_id, committed.event.job.job_name
        if (session_id, committed.rev) in self._resumed:
            return
        old = self._by_job.get((session_id, job_name))
        if not await self._wanted(session_id):  # no card owed, ever: not read again at a start
            self._spawn(self._store.passed(session_id, committed.rev), "telegram-card-cursor")
            return
        chat = self._chats[session_id]
        assert chat is not None
        if old is not None:  # the same name again: the earlier job's card ends as it stands
            self._ended(old, "session_ended", "", committed.ts)
        card = JobCard(secrets.token_urlsafe(9), chat, session_id, job_name, committed.ts)
        card.agent_id, card.started_rev = durable.agent_id, committed.rev
        card.rev = committed.rev
        self._cards[card.card_id] = card
        self._by_job[(session_id, job_name)] = card
        self._reported_before(card)
        # its session's cards are stored in the order of their starts, each after the one
        # before (`_claim`), here put in line: the worker goes on meanwhile
        before = self._claims.get(session_id)
        claimed = self._claims[session_id] = asyncio.get_running_loop().create_future()
        self._spawn(self._show(card, claim=(before, claimed)), f"telegram-card-{job_name}")

    async def _claim(
        self, card: JobCard, before: asyncio.Future[None] | None, claimed: asyncio.Future[None]
    ) -> None:
        """Store the new card, once its session's previous one is (`claimed` resolved then;
        cancelled if the card never is, and so are the later ones: choird stopping)."""
        try:
            if before is not None:  # shielded: that card's own task resolves it
                await asyncio.shield(before)
            # the worst instant: the job's start is durable, its card not stored (nor sent)
            await failpoint("telegram.card.before_store")
            # Stored before it is sent, and in the order of its session's starts: the
            # session's card cursor passes a start only with its card's row, so a start past
            # it after a restart is one whose card was never sent (`_send_unsent` sends it),
            # and one before it never gets a second card — whether its row is still there
            # (resumed, or dropped if its message id was lost) or long gone with its final
            # edit. A cursor passing a later start before an earlier one is stored would lose
            # the earlier card. Other sessions' cards wait for none of it: their cursors are
            # their own, so one session's card waiting for the database holds up no other's.
            await self._store.claim(self._row(card))
        except BaseException:
            claimed.cancel()
            raise
        finally:
            if self._claims.get(card.session_id) is claimed:
                del self._claims[card.session_id]
        claimed.set_result(None)

    def _resume(self, found: Resumable) -> None:
        """A card a previous choird left: caught up with its job's events and its session,
        then edited again — or, if it cannot be, forgotten."""
        row = found.row
        self._resumed.add((row.session_id, row.started_rev))
        chat = self._chat_named(row.dm) if self._chat_named is not None else None
        if (
            row.message_id is None
            or chat is None
            or ((chat.client.gateway, chat.chat_id) != (row.gateway, row.chat_id))
        ):
            # no message id: choird stopped between sending it and storing its id, and a
            # message cannot be sent again without maybe showing twice
            why = (
                "choird stopped while it was being sent (if it shows, it stays as it is)"
                if row.message_id is None
                else "its DM is gone, in another chat or has cards off"
            )
            log.warning(
                f"telegram job card not resumed: {why}",
                fields={"dm": row.dm, "job": row.job_name, "session": row.session_id},
            )
            self._spawn(self._forget(row), f"telegram-card-{row.job_name}")
            return
        card = JobCard(row.card_id, chat, row.session_id, row.job_name, row.started_at)
        card.agent_id, card.started_rev, card.rev = row.agent_id, row.started_rev, row.started_rev
        card.message_id, card.shown, card.state = row.message_id, row.shown, row.state
        card.cancelling = row.cancelling
        for prompt_id in row.prompts:
            self._remember(card, prompt_id)
        old = self._by_job.get((row.session_id, row.job_name))
        if old is not None:  # two cards of one name: the newer stands
            if old.started_rev > row.started_rev:
                self._ended(card, "session_ended", "", old.started_at)
            else:
                self._ended(old, "session_ended", "", card.started_at)
        if card.outcome is None:
            self._cards[card.card_id] = card
            self._by_job[(card.session_id, card.job_name)] = card
            self._reported_before(card)
        for committed in found.events:
            if card.outcome is not None:
                break
            if committed.event.kind == "core_started":
                if committed.event.job.job_name == card.job_name:  # a later job of its name
                    self._ended(card, "session_ended", "", committed.ts)
            elif _job_of(committed) == card.job_name:
                self._take(card, committed)
        session = found.session
        if card.outcome is None and session is None:  # never to be heard of again
            self._ended(card, "session_ended", "", datetime.now(card.started_at.tzinfo))
        elif (
            card.outcome is None and session is not None and session.status != SessionStatus.ACTIVE
        ):
            at = session.ended_at or datetime.now(card.started_at.tzinfo)
            self._ended(card, _session_outcome(session.status), session.end_reason or "", at)
        log.info(
            "telegram job card resumed",
            fields={"dm": row.dm, "job": row.job_name, "ended": card.outcome is not None},
        )
        card.changed.set()
        self._spawn(self._show(card), f"telegram-card-{row.job_name}")

    async def _forget(self, row: CardRow) -> None:
        await self._store.write(
            "end", row.card_id, row.job_name, lambda c: drop_card(c, row.card_id)
        )

    def _ended(self, card: JobCard, outcome: str, report: str, at: datetime) -> None:
        card.outcome, card.report, card.ended_at = outcome, report, at
        self._cards.pop(card.card_id, None)
        if self._by_job.get((card.session_id, card.job_name)) is card:
            del self._by_job[(card.session_id, card.job_name)]
        card.changed.set()

    def _end_session(self, ended: SessionEnded) -> None:
        self._chats.pop(ended.session_id, None)
        outcome = _session_outcome(ended.status)
        for card in [c for c in self._cards.values() if c.session_id == ended.session_id]:
            self._ended(card, outcome, ended.reason, datetime.now(card.started_at.tzinfo))

    # -- one card's task --------------------------------------------------------------------

    async def _show(
        self,
        card: JobCard,
        *,
        claim: tuple[asyncio.Future[None] | None, asyncio.Future[None]] | None = None,
    ) -> None:
        """Store and send a new card (`claim`: its session's previous card's and its own
        store; None: a previous choird sent it), then edit it as it changes (throttled) until
        its outcome shows; then it is forgotten."""
        if claim is not None:
            await self._claim(card, *claim)
            if not await self._send(card):
                await self._forget_card(card)
                return
        await self._edits(card)
        # a restart now makes the final edit again: "not modified", taken as done
        await failpoint("telegram.card.before_drop")
        await self._forget_card(card)

    async def _forget_card(self, card: JobCard) -> None:
        await self._store.write(
            "end", card.card_id, card.job_name, lambda c: drop_card(c, card.card_id)
        )

    async def _edits(self, card: JobCard) -> None:
        tries = 0
        while True:
            if card.outcome is None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(TICK_S):
                        await card.changed.wait()
            await asyncio.sleep(max(0.0, card.next_edit - time.monotonic()))
            card.changed.clear()
            final = card.outcome is not None
            text = card_text(card, datetime.now(card.started_at.tzinfo))
            shown = text == card.shown or await self._edit(card, text, final)
            tries += 1 if final else 0
            if final and (shown or tries >= ATTEMPTS):
                return

    async def _send(self, card: JobCard) -> bool:
        chat, text = card.chat, card_text(card, card.started_at)
        # a job that ended before its card was sent (e.g. while choird was away): no buttons
        buttons = [] if card.outcome is not None else self._buttons(card)
        for attempt in range(ATTEMPTS):  # its row stored already (`_claim`)
            try:
                message_id = await chat.client.send_buttons(chat.chat_id, text, buttons)
            except Exception as error:
                failure = chat.client.failure(error)
                if failure.kind in ("permanent", "token") or attempt == ATTEMPTS - 1:
                    log.error(
                        "telegram job card not delivered",
                        fields={"dm": chat.dm, "job": card.job_name, "error": failure.why},
                    )
                    return False
                await asyncio.sleep(failure.retry_after_s or RETRY_S[attempt])
                continue
            card.message_id = message_id
            card.shown, card.next_edit = text, time.monotonic() + EDIT_EVERY_S
            # the worst instant: shown, its id not stored (a restart cannot edit it)
            await failpoint("telegram.card.after_send")
            await self._stored(card)
            return True
        return False

    async def _stored(self, card: JobCard) -> None:
        """The card's message id written (what a restarted choird edits)."""
        row = self._row(card)
        await self._store.write(
            "message", card.card_id, card.job_name, lambda c: card_shown(c, row)
        )

    def _row(self, card: JobCard) -> CardRow:
        """What is stored of the card as it is now."""
        chat = card.chat
        prompts = tuple(p for (_, p), c in self._prompts.items() if c is card)
        return CardRow(
            card.card_id, chat.client.gateway, chat.chat_id, chat.dm, card.agent_id,
            card.session_id, card.job_name, card.started_rev, card.started_at, card.message_id,
            card.shown, card.state, card.cancelling, prompts[-PROMPTS_STORED:],
        )  # fmt: skip

    async def _edit(self, card: JobCard, text: str, final: bool) -> bool:
        """One edit (no retry: the next one shows newer news); whether it took."""
        chat = card.chat
        assert card.message_id is not None
        buttons = [] if final else self._buttons(card)
        try:
            await chat.client.edit_text(chat.chat_id, card.message_id, text, buttons)
        except Exception as error:
            failure = chat.client.failure(error)
            wait = failure.retry_after_s or (EDIT_EVERY_S if failure.kind == "transient" else 0)
            card.next_edit = time.monotonic() + max(wait, EDIT_EVERY_S)
            log.info(
                "telegram job card not edited",
                fields={"dm": chat.dm, "job": card.job_name, "error": failure.why},
            )
            return failure.kind in ("permanent", "token")  # never to succeed: given up
        card.shown, card.next_edit = text, time.monotonic() + EDIT_EVERY_S
        if not final:  # a final edit forgets the card instead
            row = self._row(card)
            await self._store.write(
                "edit", card.card_id, card.job_name, lambda c: card_shown(c, row)
            )
        return True

    def _buttons(self, card: JobCard) -> list[tuple[str, str]]:
        expires_at = int(self._now()) + VALID_S
        return [
            (
                label,
                sign(
                    self._key,
                    action,
                    card.card_id,
                    card.chat.chat_id,
                    expires_at,
                    bot=card.chat.client.gateway,
                ),
            )
            for label, action in BUTTONS
        ]

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("telegram job card failed")

        task = asyncio.get_running_loop().create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


_JOB_EVENTS: Final = frozenset({"core_started", "core_event_emitted", "core_stopped"})


def _report(card: JobCard, lane: LaneReport) -> None:
    """The card shows the state its job's lane reported."""
    if card.outcome is not None or lane.report.state in ENDED:  # the outcome: `core_stopped`
        return
    state = STATES.get(lane.report.state, "starting")
    if state != card.state:
        card.state = state
        card.changed.set()


def _session_outcome(status: SessionStatus) -> str:
    """A card's outcome when its session ended with its job still on."""
    return "session_crashed" if status == SessionStatus.CRASHED else "session_ended"


def _job_of(committed: CommittedEvent) -> str:
    """The name of the job an event of a core lane is of ("" for edge's)."""
    return getattr(committed.event, "job_name", None) or job_name_of(committed.lane) or ""


def _of_a_job(committed: CommittedEvent) -> bool:
    """Whether the event moves a card (a job's start, progress, step or end)."""
    kind = committed.event.kind
    return kind in _JOB_EVENTS or (kind == "model_output" and committed.lane != EDGE_LANE)


async def _answer(chat: Chat, callback_id: str, text: str) -> None:
    try:
        await chat.client.answer_callback(callback_id, text)
    except Exception as error:  # the spinner ends by itself after a while
        log.info(
            "telegram callback not answered",
            fields={"dm": chat.dm, "error": chat.client.failure(error).why},
        )


# -- texts (pure) -------------------------------------------------------------------------


def card_text(card: JobCard, now: datetime) -> str:
    """What the card shows: name and state, step, last progress line, elapsed — or, once the
    job ended, its outcome, the time it took and its report."""
    if card.outcome is not None:
        took = elapsed((card.ended_at or now) - card.started_at)
        lines = [f"Core job {card.job_name}: {OUTCOMES.get(card.outcome, card.outcome)}"]
        lines.append(f"after {took}" + (f", {card.step} steps" if card.step else ""))
        if card.report:
            lines.append(cut(card.report, LINE_WIDTH))
        return "\n".join(lines)
    state = "cancelling…" if card.cancelling else card.state
    lines = [f"Core job {card.job_name}: {state}"]
    step = f"step {card.step} · " if card.step else ""
    lines.append(f"{step}{elapsed(now - card.started_at)} elapsed")
    if card.progress:
        lines.append(card.progress)
    return "\n".join(lines)


def elapsed(span: timedelta) -> str:
    """`42s`, `3m 05s`, `1h 02m`: a duration as a card shows it."""
    seconds = max(int(span.total_seconds()), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def progress_line(event: CoreEvent) -> str | None:
    """The line a core job's event puts on its card; None for one that says nothing new."""
    match event:
        case CoreProgress(phase=phase, focus=focus, percent=percent):
            share = f" ({percent:.0f}%)" if percent is not None else ""
            text = f"{phase}{share}: {focus}" if focus else f"{phase}{share}"
        case CorePlan(steps=steps):
            done = sum(step.done for step in steps)
            text = f"plan: {done}/{len(steps)} steps done"
        case CoreThoughtSummary(summary=summary):
            text = summary
        case CoreToolProposal(tool=tool, why=why):
            text = f"{tool}: {why}" if why else tool
        case CoreNeedInfo(question=question):
            text = f"asks: {question}"
        case CorePartialResult(description=description):
            text = f"partial result: {description}"
        case CoreFinalResult() | CoreError():
            return None
    return cut(" ".join(text.split()), LINE_WIDTH)
