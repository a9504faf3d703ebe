"""What every fault scenario holds choir to (issue 12), checked against what really happened.

    cluster = await cluster_of(STEPS, agents=1)  # tests/faults/conftest.py, tests/harness/
    checker = checker_for(cluster, context=f"seed={seed}")  # every agent and its effects.log
    await checker.observe()                      # now and then: what choird acknowledged so far
    checker.fault("kill -9 of agent-1")          # the instant the fault was injected
    await cluster.kill("agent-1")
    await checker.reported(crash_report(cluster.client, "agent-1"))       # within 5 s
    await cluster.start("agent-1")               # the step the report named, nothing else
    await checker.healthy(lambda: cluster.answers("agent-1"))             # within 10 s
    verdict = await checker.verify(cluster.conversations.values())
    assert verdict.open_intents == []            # and whatever else the scenario expects

`InvariantChecker(pg, agents, effects=..., context=..., require_accepted_messages=...)` works
without the harness too: `pg` is where choird's database is, `agents` whose sessions to check,
`effects` the ledgers of invariant 5. `stored(kind)` reads what is durable right now (e.g. to
wait until an intent reached choird before killing).

`verify` reads Postgres directly (its own connection: it works whether choird is up or not) and
raises `InvariantViolation` listing every problem at once; otherwise it returns a `Verdict` for
the scenario's own assertions (which intents are still open, which messages were lost). It checks:

1. **The durable log is a gap-free prefix with a valid chain.** Each session of the agents holds
   revs 1..n with every hash recomputed and linked (`choir.protocol.chain_break`), and the
   session's `ack_rev`/`head_hash` point into it.
2. **No acknowledged event is lost or rewritten.** Every (session, rev, hash) `observe()` saw
   acknowledged (`ack_rev`) is still stored, identical; every reply the operator saw
   (`Conversation.replies`) is a stored `agent_replied` with the same text.
3. **No accepted user message lost or doubled.** Each message a `Conversation` sent has at most
   one `user_msg` event (by message id, or by text when the gateway gave no id); exactly one
   when it was acknowledged — the sender was told it is durable (`SentMessage.acknowledged`, or
   every accepted message with `require_accepted_messages=True`) or saw a reply to it.
   Unacknowledged messages with no event are returned in `Verdict.lost_messages`: chat.send
   answers `durable` once a message is in choird's inbox (issue 12, item 2); an injection is not.
4. **Every accepted message answered exactly once** (with `require_answers=True`, for scenarios
   that run until every answer is in): each message of invariant 3 that must be stored has
   exactly one `agent_replied` (a reply or an error) naming it in `in_reply_to`.
5. **No side effect twice.** Each line of the `effects` files (one per `test.effect` run, its
   `token` argument) appears once; its call's intent (`tool_call_committed`) is durable, since a
   non-idempotent tool may only run after its intent is; a token's call is committed at most
   once; a successful result implies the line exists. Across all tools, no call id has two
   intents or two results.

`reported` and `healthy` time the operator's side from the `fault()` instant: a failure must be
visible within 5 s in words that name a next step (`NEXT_STEP`, or the scenario's own pattern),
and the system must be healthy again within 10 s. "No manual repair" is the scenario's part:
between the two it may do only the step the report named (e.g. `agent start`), nothing else.
Probes are plain async callables; `crash_report` and `chat_error` are the common ones.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from pydantic import ValidationError

from choir.client import ChoirClient
from choir.daemon.agents.ingest import committed_of
from choir.errors import ChoirError
from choir.protocol import GENESIS_HASH, chain_break
from choir.store.events import EventRecord, read_events
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import SessionRow, list_sessions
from tests.harness.cluster import EFFECT_TOOL, Cluster, Conversation, SentMessage

REPORT_WITHIN_S: Final = 5.0
HEALTHY_WITHIN_S: Final = 10.0
NEXT_STEP: Final = re.compile(
    r"\b(start|restart|resume|retry|try|again|wait|run|check|choirctl|free|fix|rephrase|choose|"
    r"send|call)\b",
    re.I,
)
"""Words that tell the operator what to do next; a report without one is not a report."""
_PAGE: Final = 1000

Probe = Callable[[], Awaitable[str | None]]
"""Returns the failure as the operator sees it, or None while nothing shows it yet."""
HealthProbe = Callable[[], Awaitable[bool]]


class Transcript(Protocol):
    """What one agent's user sent and saw (a `tests.harness.Conversation` is one)."""

    agent_id: str
    sent: list[SentMessage]
    replies: list[dict[str, Any]]
    """Replies as `chat.replies` streams them: session_id, rev, category, text, in_reply_to."""


class InvariantViolation(AssertionError):
    """One or more invariants failed; the message lists every problem."""

    def __init__(self, problems: Sequence[str], context: str = "") -> None:
        head = f"{len(problems)} invariant violation(s)" + (f" ({context})" if context else "")
        super().__init__("\n  ".join([head, *problems]))
        self.problems = list(problems)


@dataclass(frozen=True)
class Report:
    """A failure as the operator saw it, and how long after the fault."""

    text: str
    after_s: float


@dataclass(frozen=True)
class OpenIntent:
    """A non-idempotent call whose intent is durable and whose result is not (held)."""

    session_id: str
    call_id: str
    tool: str
    lane: str


@dataclass
class Verdict:
    """What `verify` found, for the scenario's own assertions."""

    sessions: dict[str, list[EventRecord]] = field(default_factory=dict)
    """Every stored event of every session of the agents, by session id."""
    agent_of: dict[str, str] = field(default_factory=dict)
    """session id -> agent id."""
    effects: Counter[str] = field(default_factory=Counter)
    """`test.effect` lines by token."""
    open_intents: list[OpenIntent] = field(default_factory=list)
    lost_messages: list[SentMessage] = field(default_factory=list)
    """Unacknowledged messages that left no event (allowed, but worth printing)."""
    timings: list[tuple[str, float]] = field(default_factory=list)
    """(what, seconds) of every report and recovery the checker timed."""

    def events(self, kind: str | None = None) -> list[EventRecord]:
        """Every stored event (of `kind`), all sessions."""
        return [e for es in self.sessions.values() for e in es if kind in (None, e.event_type)]

    def results(self, call_id: str, session_id: str | None = None) -> list[EventRecord]:
        """The results of `call_id` (call ids are unique within a session, not across)."""
        return [
            e
            for s, events in self.sessions.items()
            for e in events
            if e.event_type == "tool_result_committed"
            and e.payload["call_id"] == call_id
            and session_id in (None, s)
        ]

    def calls(self, kind: str) -> list[tuple[str, EventRecord]]:
        """(session id, event) of every `kind` event."""
        return [
            (s, e) for s, events in self.sessions.items() for e in events if e.event_type == kind
        ]


class InvariantChecker:
    """Holds `agents`' sessions in the database at `pg` to the invariants above."""

    def __init__(
        self,
        pg: ConnectParams,
        agents: Iterable[str],
        *,
        effects: Iterable[Path] = (),
        context: str = "",
        require_accepted_messages: bool = False,
        require_answers: bool = False,
    ) -> None:
        self.pg = pg
        self.agents = tuple(agents)
        self.effects = tuple(effects)
        self.context = context
        """Printed with every violation (e.g. the random seed of the run)."""
        self.require_accepted_messages = require_accepted_messages
        """Count every message chat.send accepted as acknowledged (invariant 3), whatever its
        answer said (chat.send stores a message before it answers)."""
        self.require_answers = require_answers
        """Hold the scenario to invariant 4: every acknowledged message answered once."""
        self.acknowledged: dict[tuple[str, int], str] = {}
        """(session id, rev) -> hash of everything `observe()` saw acknowledged."""
        self.fault_at: float | None = None
        self.fault_what = ""
        self.timings: list[tuple[str, float]] = []

    # -- during the run ----------------------------------------------------------------------

    async def observe(self) -> None:
        """Remember every event choird has acknowledged so far (up to each session's ack_rev)."""
        conn = await connect(self.pg)
        try:
            for row in await self._sessions(conn):
                for event in await _events(conn, row.session_id, up_to=row.ack_rev):
                    self.acknowledged[(row.session_id, event.rev)] = event.hash
        finally:
            await conn.close()

    async def stored(self, kind: str | None = None) -> list[EventRecord]:
        """Every stored event (of `kind`) of the agents' sessions, now."""
        conn = await connect(self.pg)
        try:
            return [
                event
                for row in await self._sessions(conn)
                for event in await _events(conn, row.session_id)
                if kind in (None, event.event_type)
            ]
        finally:
            await conn.close()

    def fault(self, what: str) -> None:
        """Mark now as the instant of a fault: reports and recovery are timed from it."""
        self.fault_at = time.monotonic()
        self.fault_what = what

    async def reported(
        self,
        probe: Probe,
        *,
        within: float = REPORT_WITHIN_S,
        next_step: re.Pattern[str] = NEXT_STEP,
    ) -> Report:
        """Wait for `probe` to show the failure; it must within `within` s of the fault and
        name a next step."""
        began = self._since()
        while True:
            text = await probe()
            elapsed = time.monotonic() - began
            if text is not None:
                break
            if elapsed > within:
                self._fail(f"{self.fault_what}: not reported to the operator within {within} s")
            await asyncio.sleep(0.05)
        if elapsed > within:
            self._fail(f"{self.fault_what}: reported after {elapsed:.2f} s (> {within} s): {text}")
        if not next_step.search(text):
            self._fail(f"{self.fault_what}: the report names no next step: {text!r}")
        self.timings.append((f"reported: {self.fault_what}", elapsed))
        return Report(text, elapsed)

    async def healthy(self, probe: HealthProbe, *, within: float = HEALTHY_WITHIN_S) -> float:
        """Wait until `probe` says healthy; it must within `within` s of the fault."""
        began = self._since()
        while not await probe():
            if time.monotonic() - began > within:
                self._fail(f"{self.fault_what}: not healthy again within {within} s")
            await asyncio.sleep(0.05)
        elapsed = time.monotonic() - began
        if elapsed > within:
            self._fail(f"{self.fault_what}: healthy only after {elapsed:.2f} s (> {within} s)")
        self.timings.append((f"healthy: {self.fault_what}", elapsed))
        return elapsed

    def _since(self) -> float:
        return self.fault_at if self.fault_at is not None else time.monotonic()

    def _fail(self, problem: str) -> None:
        raise InvariantViolation([problem], self.context)

    # -- afterwards --------------------------------------------------------------------------

    async def verify(self, conversations: Iterable[Transcript] = ()) -> Verdict:
        """Check invariants 1-5 on what is stored now; InvariantViolation lists all problems."""
        conversations = list(conversations)
        verdict = Verdict(timings=list(self.timings))
        problems: list[str] = []
        conn = await connect(self.pg)
        try:
            for row in await self._sessions(conn):
                events = await _events(conn, row.session_id)
                verdict.sessions[row.session_id] = events
                verdict.agent_of[row.session_id] = row.agent_id
                problems += _chain_problems(row, events)
        finally:
            await conn.close()
        problems += self._acknowledged_problems(verdict)
        problems += _reply_problems(verdict, conversations)
        problems += _message_problems(verdict, conversations, self.require_accepted_messages)
        if self.require_answers:
            problems += _answer_problems(verdict, conversations, self.require_accepted_messages)
        problems += _call_problems(verdict)
        problems += self._effect_problems(verdict)
        if problems:
            raise InvariantViolation(problems, self.context)
        return verdict

    async def _sessions(self, conn: Any) -> list[SessionRow]:
        rows = await list_sessions(conn, limit=10_000)
        return [row for row in rows if row.agent_id in self.agents]

    def _acknowledged_problems(self, verdict: Verdict) -> list[str]:
        stored = {
            (session_id, e.rev): e.hash
            for session_id, events in verdict.sessions.items()
            for e in events
        }
        return [
            f"{session_id} rev {rev}: acknowledged, now "
            + ("missing" if (session_id, rev) not in stored else "rewritten")
            for (session_id, rev), digest in sorted(self.acknowledged.items())
            if stored.get((session_id, rev)) != digest
        ]

    def _effect_problems(self, verdict: Verdict) -> list[str]:
        for path in self.effects:
            lines = path.read_text().splitlines() if path.exists() else []
            verdict.effects.update(lines)
        problems = [
            f"side effect {token!r} ran {count} times"
            for token, count in verdict.effects.items()
            if count > 1
        ]
        requested = _effect_calls(verdict)
        committed = {(s, e.payload["call_id"]) for s, e in verdict.calls("tool_call_committed")}
        for token in verdict.effects:
            if not any(call in committed for call in requested.get(token, [])):
                problems.append(f"side effect {token!r} ran without a durable intent")
        for token, calls in requested.items():
            intents = [call for call in calls if call in committed]
            if len(intents) > 1:
                problems.append(f"side effect {token!r} was committed {len(intents)} times")
            succeeded = any(
                r.payload["result"]["status"] == "success"
                for session_id, call_id in intents
                for r in verdict.results(call_id, session_id)
            )
            if succeeded and verdict.effects[token] == 0:
                problems.append(f"side effect {token!r} succeeded but left no trace")
        verdict.open_intents = _open_intents(verdict)
        return problems


# -- the checks ----------------------------------------------------------------------------


async def _events(conn: Any, session_id: str, up_to: int | None = None) -> list[EventRecord]:
    """The session's stored events in rev order (up to rev `up_to`)."""
    events: list[EventRecord] = []
    while True:
        page = await read_events(conn, session_id, len(events) + 1, _PAGE)
        events += page
        if len(page) < _PAGE or (up_to is not None and len(events) >= up_to):
            break
    return events if up_to is None else [e for e in events if e.rev <= up_to]


def _chain_problems(row: SessionRow, events: list[EventRecord]) -> list[str]:
    where = row.session_id
    try:
        records = [committed_of(e) for e in events]
    except ValidationError as exc:
        return [f"{where}: a stored event does not parse: {exc.errors()[0]['msg']}"]
    broken = chain_break(
        records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True, where=where
    )
    problems = [broken] if broken else []
    if row.ack_rev > len(events):
        problems.append(f"{where}: ack_rev {row.ack_rev} but only {len(events)} events stored")
    elif row.ack_rev and events[row.ack_rev - 1].hash != row.head_hash:
        problems.append(f"{where}: head_hash is not the hash of rev {row.ack_rev}")
    return problems


def _reply_problems(verdict: Verdict, conversations: list[Transcript]) -> list[str]:
    stored = {(s, e.rev): e for s, events in verdict.sessions.items() for e in events}
    problems = []
    for conversation in conversations:
        for reply in conversation.replies:
            event = stored.get((reply["session_id"], reply["rev"]))
            if (
                event is None
                or event.event_type != "agent_replied"
                or event.payload["text"] != reply["text"]
            ):
                problems.append(
                    f"{conversation.agent_id}: the reply the operator saw at "
                    f"{reply['session_id']} rev {reply['rev']} is not stored as sent"
                )
    return problems


def _message_problems(
    verdict: Verdict, conversations: list[Transcript], all_acknowledged: bool
) -> list[str]:
    by_agent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for session_id, events in verdict.sessions.items():
        agent = verdict.agent_of[session_id]
        by_agent[agent] += [e.payload for e in events if e.event_type == "user_msg"]
    problems = []
    for conversation in conversations:
        stored = by_agent.get(conversation.agent_id, [])
        answered = {r["in_reply_to"] for r in conversation.replies}
        for sent in conversation.sent:
            count = sum(1 for m in stored if _same_message(m, sent))
            acknowledged = all_acknowledged or sent.acknowledged or sent.message_id in answered
            if count > 1:
                problems.append(f"{sent.agent_id}: message {sent.text!r} stored {count} times")
            elif count == 0 and acknowledged:
                problems.append(f"{sent.agent_id}: acknowledged message {sent.text!r} was lost")
            elif count == 0:
                verdict.lost_messages.append(sent)
    return problems


def _answer_problems(
    verdict: Verdict, conversations: list[Transcript], all_acknowledged: bool
) -> list[str]:
    answers: Counter[tuple[str, str]] = Counter(
        (verdict.agent_of[session_id], str(event.payload.get("in_reply_to")))
        for session_id, event in verdict.calls("agent_replied")
    )
    problems = []
    for conversation in conversations:
        for sent in conversation.sent:
            if sent.message_id is None or sent in verdict.lost_messages:
                continue  # no id to answer; or never stored, and allowed to be lost
            count = answers[(sent.agent_id, sent.message_id)]
            if count > 1:
                problems.append(f"{sent.agent_id}: message {sent.text!r} answered {count} times")
            elif count == 0 and (all_acknowledged or sent.acknowledged):
                problems.append(f"{sent.agent_id}: message {sent.text!r} was never answered")
    return problems


def _same_message(stored: dict[str, Any], sent: SentMessage) -> bool:
    """By the gateway's message id when there is one, else by text."""
    if sent.message_id is not None:
        return bool(stored.get("message_id") == sent.message_id)
    return bool(stored["text"] == sent.text)


def _call_problems(verdict: Verdict) -> list[str]:
    problems = []
    for kind in ("tool_call_committed", "tool_result_committed"):
        counts = Counter((s, e.payload["call_id"]) for s, e in verdict.calls(kind))
        problems += [
            f"{session_id} call {call_id}: {count} {kind} events"
            for (session_id, call_id), count in counts.items()
            if count > 1
        ]
    return problems


def _effect_calls(verdict: Verdict) -> dict[str, list[tuple[str, str]]]:
    """token -> (session id, call id) of the `test.effect` calls proposed with it."""
    calls: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for session_id, event in verdict.calls("tool_call_requested"):
        if event.payload["tool"] == EFFECT_TOOL:
            token = event.payload.get("arguments", {}).get("token")
            call = (session_id, event.payload["call_id"])
            if isinstance(token, str) and call not in calls[token]:
                calls[token].append(call)
    return calls


def _open_intents(verdict: Verdict) -> list[OpenIntent]:
    answered = {(s, e.payload["call_id"]) for s, e in verdict.calls("tool_result_committed")}
    return [
        OpenIntent(session_id, e.payload["call_id"], e.payload["tool"], e.lane)
        for session_id, e in verdict.calls("tool_call_committed")
        if (session_id, e.payload["call_id"]) not in answered
    ]


def checker_for(cluster: Cluster, context: str = "", **options: Any) -> InvariantChecker:
    """A checker over all of `cluster`'s agents and their `test.effect` ledgers."""
    effects = [cluster.effects(agent_id) for agent_id in cluster.agents]
    return InvariantChecker(cluster.pg, cluster.agents, effects=effects, context=context, **options)


# -- probes --------------------------------------------------------------------------------


def crash_report(client: ChoirClient, agent_id: str) -> Probe:
    """The operator's view of a crashed agent, where an operator looks: `agent status` and
    `status` name it with its cause and the `choirctl agent start` that resumes its session, and
    talking to it (`choirctl chat`) is refused saying the same."""

    async def probe() -> str | None:
        status = await client.agent_status(agent_id)
        outage = status.interrupted
        if status.state != "crashed" or outage is None:
            return None
        down = (await client.status()).agents.interrupted or []
        if not any(listed.agent_id == agent_id for listed in down):
            return None  # `status` does not say it yet
        start = f"choirctl agent start {agent_id}"
        assert outage.hint.startswith(start), outage
        assert outage.reason, outage
        try:
            await client.chat_send(agent_id, "is anyone there?")
        except ChoirError as refused:
            chat = refused.message
        else:
            chat = "accepted"
        if start not in chat:
            return None  # talking to it does not say how to bring it back (yet)
        return f"{agent_id} {outage.status} ({outage.reason}): {outage.hint}; chat: {chat}"

    return probe


def chat_error(conversation: Conversation, sent: SentMessage) -> Probe:
    """The error reply the user got for `sent`, once it came."""

    async def probe() -> str | None:
        for reply in conversation.replies:
            if reply["in_reply_to"] == sent.message_id and reply["category"] == "error":
                return str(reply["text"])
        return None

    return probe
