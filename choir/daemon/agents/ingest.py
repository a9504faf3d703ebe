"""HEARTBEAT (§13.1, §13.3): make the agent's committed events durable and acknowledge them.

One heartbeat is one transaction: the batch insert, the snapshot if any, and the advance of
`ack_rev`/`head_hash`/`last_heartbeat_at`. The common one — new events (user messages' among
them), no snapshot, no artifact — is a single statement (`choir.store.heartbeats`), atomic by
itself: one round trip to Postgres. A
snapshot whose hash is not `hash_new` refuses the heartbeat; one whose content does not match its
digest is only left out (a resume could never use it, and the events are still good). Before it,
every patch's hash is recomputed and the batch must continue the stored chain. A heartbeat whose
`base_rev` is behind `ack_rev` is a resend (its reply to the last one was lost): the already-stored
revisions must match and are skipped, so resends are no-ops. A stored revision with another hash is
a fork — two different histories of one session — which stops the session rather than keep either
side silently.

choird keeps each session's acknowledged head in memory, but a commit whose answer was lost
(the database died, or the connection broke while it was handed back) may have landed after
all: the stored head is then ahead of memory, and the next heartbeat's advance finds it moved.
That heartbeat re-reads the stored head, tells listeners of the revisions that landed unseen,
and is applied again on top of it — the agent's resend is a no-op for what landed — instead of
refusing a live session as unknown.

A patch that previews a larger event (`choir.protocol.wire.artifacts`) is accepted only if its
artifact is already stored whole and verified (the agent uploads it first, PUT_ARTIFACT); its
reference is recorded on the stored event in the same transaction. So is the delivery of every
user message whose `user_msg` event the heartbeat stores (`choir.store.inbox`), and the usage row
of every `llm_call` event (`choir.store.usage`): a call is counted exactly when its event is
acknowledged, and a resend counts nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from choir.daemon.agents.refusals import RpcFault, unauthorized
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import Clock, LiveSession, SessionContext, utc_now
from choir.daemon.staging.stage import ConfigStage
from choir.logs import get_logger
from choir.protocol import (
    GENESIS_HASH,
    BaseRevConflict,
    ChainForked,
    CommittedEvent,
    ErrorCode,
    HeartbeatRequest,
    HeartbeatResponse,
    Snapshot,
    event_json,
)
from choir.protocol.log.committed import chain_break
from choir.store.artifacts import complete_artifacts, link_artifacts
from choir.store.events import EventRecord, insert_events, read_events
from choir.store.heartbeats import append_heartbeat
from choir.store.inbox import mark_delivered
from choir.store.postgres.pool import Connection, Pool
from choir.store.sessions import SessionStatus, get_session, record_heartbeat, touch_session
from choir.store.snapshots import save_snapshot
from choir.store.usage import insert_usage, usage_rows

log = get_logger("choird.replication")


@dataclass(frozen=True)
class Durable:
    """Events of one session that just became durable, in revision order."""

    session_id: str
    agent_id: str
    events: list[CommittedEvent]


Replicated = Callable[[Durable], None]


@dataclass(frozen=True, slots=True)
class HeartbeatSeen:
    """One accepted heartbeat, for telemetry (`choir.daemon.telemetry`)."""

    session_id: str
    agent_id: str
    ack_rev: int
    snapshot: bool
    """It carried a working-memory snapshot."""
    lag_s: float
    """How long its oldest event waited, from its commit in the agent to durable here; 0
    for a heartbeat without events."""


HeartbeatWatcher = Callable[[HeartbeatSeen], None]


class _Moved(Exception):
    """Rolls the heartbeat transaction back when the stored head is not the one in memory."""


class _Forked(Exception):
    """Rolls the heartbeat transaction back when a stored revision has another hash."""

    def __init__(self, rev: int) -> None:
        super().__init__(rev)
        self.rev = rev


def _sealed(live: LiveSession, snapshot: Snapshot) -> bool:
    """Whether a heartbeat's snapshot can ever serve a resume; one that cannot is not stored
    (its events are: the heartbeat still succeeds)."""
    problem = snapshot.content_problem()
    if problem is not None:
        log.warning(
            "snapshot not stored",
            fields={"session": live.session_id, "rev": snapshot.rev, "why": problem},
        )
    return problem is None


def record_of(event: CommittedEvent, payload: dict[str, Any] | None = None) -> EventRecord:
    """The `session_events` row of a committed event; `payload` is its event's JSON form
    (`event_json`) when the caller already has it."""
    return EventRecord(
        rev=event.rev,
        event_type=event.event.kind,
        lane=event.lane,
        payload=payload if payload is not None else event_json(event.event),
        hash_prev=event.hash_prev,
        hash=event.hash,
        created_at=event.ts,
        artifact=event.artifact.model_dump(mode="json") if event.artifact is not None else None,
    )


def committed_of(record: EventRecord) -> CommittedEvent:
    """The committed event a `session_events` row holds."""
    return CommittedEvent.model_validate(
        {
            "rev": record.rev,
            "lane": record.lane,
            "ts": record.created_at,
            "hash_prev": record.hash_prev,
            "hash": record.hash,
            "event": record.payload,
            **({"artifact": record.artifact} if record.artifact is not None else {}),
        }
    )


class EventIngest:
    """Accepts heartbeats for the active sessions of `sessions`."""

    def __init__(
        self, pool: Pool, sessions: SessionService, stage: ConfigStage, *, clock: Clock = utc_now
    ) -> None:
        self._pool = pool
        self._sessions = sessions
        self._stage = stage
        self._clock = clock
        self._listeners: list[Replicated] = []
        self._watchers: list[HeartbeatWatcher] = []

    def subscribe(self, listener: Replicated) -> Callable[[], None]:
        """Call `listener` with each batch of newly durable events; returns the unsubscribe.

        This is how replies reach the user's DM and how followers of a session see new events
        without polling: events arrive within ~100 ms of their commit in the agent.
        """
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    async def heartbeat(self, ctx: SessionContext, request: HeartbeatRequest) -> HeartbeatResponse:
        live = ctx.live
        async with live.lock:
            ack_rev = await self._replicate_on_stored_head(live, request)
        if self._watchers:
            self._seen(live, request, ack_rev)
        return HeartbeatResponse(ack_rev=ack_rev, config_version_latest=self._stage.running.version)

    def watch_heartbeats(self, watcher: HeartbeatWatcher) -> Callable[[], None]:
        """Call `watcher` after each accepted heartbeat (the metrics endpoint); returns the
        unwatch. With no watcher a heartbeat pays one check of an empty list."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher)

    def _seen(self, live: LiveSession, request: HeartbeatRequest, ack_rev: int) -> None:
        patches = request.patches
        lag = (self._clock() - patches[0].ts).total_seconds() if patches else 0.0
        seen = HeartbeatSeen(
            live.session_id, live.agent_id, ack_rev, request.snapshot is not None, max(lag, 0.0)
        )
        for watcher in list(self._watchers):
            try:
                watcher(seen)
            except Exception:
                log.exception("heartbeat watcher failed", fields={"session": live.session_id})

    async def _replicate_on_stored_head(self, live: LiveSession, request: HeartbeatRequest) -> int:
        """`_replicate`; once more from the stored head if memory was behind it."""
        try:
            return await self._replicate(live, request)
        except _Moved:
            await self._catch_up(live)
        try:
            return await self._replicate(live, request)
        except _Moved:
            raise unauthorized() from None

    async def _catch_up(self, live: LiveSession) -> None:
        """Take the stored head as the truth (a commit whose answer was lost landed) and tell
        listeners of the revisions it made durable; `unauthorized` if the session ended."""
        async with self._pool.acquire() as conn:
            row = await get_session(conn, live.session_id)
            if row is None or row.status != SessionStatus.ACTIVE or row.ack_rev < live.ack_rev:
                raise unauthorized()
            missed = row.ack_rev - live.ack_rev
            landed = await read_events(conn, live.session_id, live.ack_rev + 1, missed)
        log.warning(
            "a heartbeat whose answer was lost had been stored; acknowledging from there",
            fields={"session": live.session_id, "was": live.ack_rev, "stored": row.ack_rev},
        )
        live.ack_rev, live.head_hash = row.ack_rev, row.head_hash or GENESIS_HASH
        self._tell(live, [committed_of(record) for record in landed])

    async def _replicate(self, live: LiveSession, request: HeartbeatRequest) -> int:
        fresh = request.new_rev > live.ack_rev
        # Each event is serialized once: the hash is checked over the form that is stored.
        payloads = [event_json(patch.event) for patch in request.patches]
        try:
            self._check_chain(live, request, payloads)
            patches = zip(request.patches, payloads, strict=True)
            records = [record_of(patch, payload) for patch, payload in patches]
            await self._store(live, request, records, fresh=fresh)
        except _Forked as fork:
            await self._stop_forked(live, fork.rev)
        if fresh:
            durable = [p for p in request.patches if p.rev > live.ack_rev]
            live.ack_rev, live.head_hash = request.new_rev, request.hash_new
            self._tell(live, durable)
        return live.ack_rev

    def _tell(self, live: LiveSession, durable: list[CommittedEvent]) -> None:
        if not durable:
            return
        for listener in list(self._listeners):
            try:
                listener(Durable(live.session_id, live.agent_id, durable))
            except Exception:
                log.exception("replication listener failed", fields={"session": live.session_id})

    def _check_chain(
        self, live: LiveSession, request: HeartbeatRequest, payloads: Sequence[dict[str, Any]]
    ) -> None:
        if request.base_rev > live.ack_rev:
            raise RpcFault(
                ErrorCode.CONFLICT,
                f"expected base_rev {live.ack_rev}, got {request.base_rev}: resend the "
                f"revisions after {live.ack_rev}; nothing was stored",
                BaseRevConflict(expected_base_rev=live.ack_rev, got_base_rev=request.base_rev),
            )
        problem = chain_break(
            request.patches,
            base_rev=request.base_rev,
            hash_prev=request.hash_prev,
            check_hashes=True,
            events=payloads,
        )
        if problem:
            raise RpcFault(
                ErrorCode.INVALID_REQUEST, f"broken chain: {problem}; nothing was stored"
            )
        if request.snapshot is not None and request.snapshot.hash != request.hash_new:
            raise RpcFault(
                ErrorCode.INVALID_REQUEST,
                "snapshot.hash: does not match hash_new; nothing was stored",
            )
        if request.base_rev == live.ack_rev and request.hash_prev != live.head_hash:
            if request.base_rev == 0:
                raise RpcFault(
                    ErrorCode.INVALID_REQUEST,
                    "hash_prev: rev 0 links to the genesis hash; nothing was stored",
                )
            raise _Forked(request.base_rev)

    async def _store(
        self,
        live: LiveSession,
        request: HeartbeatRequest,
        records: Sequence[EventRecord],
        *,
        fresh: bool,
    ) -> None:
        now = self._clock()
        usage = usage_rows(records)
        if fresh and _plain(request, records):
            await self._append(live, request, records, usage, _user_messages(records), now)
            return
        snapshot_rev: int | None = None
        async with self._pool.acquire() as conn, conn.transaction():
            linked = await _check_artifacts(conn, live.session_id, records)
            result = await insert_events(conn, live.session_id, records)
            if result.forked_revs:
                raise _Forked(result.forked_revs[0])
            await link_artifacts(conn, live.session_id, linked)
            await mark_delivered(conn, live.session_id, _user_messages(records), now)
            await insert_usage(conn, live.agent_id, live.session_id, usage)
            if not fresh:
                alive = await touch_session(
                    conn, live.session_id, config_version=request.config_version, now=now
                )
            else:
                if request.snapshot is not None and _sealed(live, request.snapshot):
                    snapshot = request.snapshot.model_dump(mode="json")
                    await save_snapshot(conn, live.session_id, request.new_rev, snapshot)
                    snapshot_rev = request.new_rev
                alive = await record_heartbeat(
                    conn,
                    live.session_id,
                    expected_ack_rev=live.ack_rev,
                    ack_rev=request.new_rev,
                    head_hash=request.hash_new,
                    config_version=request.config_version,
                    now=now,
                )
                if not alive:
                    raise _Moved  # or the session ended: `_catch_up` tells which
            if not alive:
                raise unauthorized()
        if snapshot_rev is not None:  # committed: recovery of the session replays from here
            where = {"session": live.session_id, "agent": live.agent_id, "rev": snapshot_rev}
            log.info("snapshot stored", fields=where)

    async def _append(
        self,
        live: LiveSession,
        request: HeartbeatRequest,
        records: Sequence[EventRecord],
        usage: Sequence[dict[str, Any]],
        delivered: Sequence[tuple[str, int]],
        now: datetime,
    ) -> None:
        """`_store` of a heartbeat with nothing but new events (their usage rows, the user
        messages they deliver): one statement, one round trip."""
        async with self._pool.acquire() as conn:
            appended = await append_heartbeat(
                conn,
                live.session_id,
                records,
                expected_ack_rev=live.ack_rev,
                ack_rev=request.new_rev,
                head_hash=request.hash_new,
                config_version=request.config_version,
                now=now,
                agent_id=live.agent_id,
                usage=usage,
                delivered=delivered,
            )
        if appended.forked_rev is not None:
            raise _Forked(appended.forked_rev)
        if not appended.advanced:
            raise _Moved  # or the session ended: `_catch_up` tells which

    async def _stop_forked(self, live: LiveSession, rev: int) -> None:
        reason = f"fork detected at rev {rev}"
        await self._sessions.mark_forked(live.session_id, reason)
        raise RpcFault(
            ErrorCode.CONFLICT,
            f"{reason}: the agent's chain differs from the one choird stored; session "
            f"{live.session_id} was stopped (start a new one with choirctl agent start "
            f"{live.agent_id} --new-session)",
            ChainForked(rev=rev),
        )


async def _check_artifacts(
    conn: Connection, session_id: str, records: Sequence[EventRecord]
) -> list[tuple[int, dict[str, Any]]]:
    """The (rev, reference) of every previewing record; refuses the heartbeat if one names an
    artifact the session does not hold whole."""
    linked = [(r.rev, r.artifact) for r in records if r.artifact is not None]
    held = await complete_artifacts(conn, session_id, (str(ref["sha256"]) for _, ref in linked))
    missing = [rev for rev, ref in linked if ref["sha256"] not in held]
    if missing:
        raise RpcFault(
            ErrorCode.CONFLICT,
            f"rev {missing[0]} previews an artifact choird does not hold: upload it with "
            "PUT_ARTIFACT first; nothing was stored",
        )
    return linked


def _plain(request: HeartbeatRequest, records: Sequence[EventRecord]) -> bool:
    """Whether a heartbeat carries nothing but events (no snapshot, no artifact): the common
    case, stored in one statement."""
    return request.snapshot is None and all(r.artifact is None for r in records)


def _user_messages(records: Sequence[EventRecord]) -> list[tuple[str, int]]:
    """(message id, rev) of the `user_msg` events among `records` that carry an id."""
    return [
        (str(r.payload["message_id"]), r.rev)
        for r in records
        if r.event_type == "user_msg" and r.payload.get("message_id")
    ]
