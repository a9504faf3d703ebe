"""Agent sessions (§6.4, §13.1, design notes "Sessions"): start, authenticate, end, reap.

A start resolves the bindings, picks the session (new, or the previous one resumed), and in ONE
transaction records it and leases every exclusive resource — the agent's own id included, which
makes the agent a singleton. Any conflict rolls the whole start back. Ending a session, for
whatever reason, revokes its token and releases its leases in one transaction too.

The reaper (§13.1) declares a session crashed when its agent gave no sign of life for the
threshold — counted only while choird could have heard it: an agent whose calls reach choird is
alive even if its heartbeat could not be stored (database down, disk full), and the time choird
itself was down, or blind, does not count against anyone (`excuse`; issue 12 points 4-6).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Final

from choir.config import ChoirConfig
from choir.daemon.agents.refusals import unauthorized
from choir.daemon.sessions.bindings import exclusive_resources, resolve_bindings
from choir.daemon.sessions.leases import already_running, lease_all
from choir.daemon.sessions.state import (
    Clock,
    LiveSession,
    SessionContext,
    SessionEnded,
    StartedSession,
    hash_token,
    new_lease_token,
    new_session_id,
    shutdown_status,
    utc_now,
)
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ConflictError, NotFoundError, UsageError
from choir.logs import get_logger, redact
from choir.protocol import GENESIS_HASH, ResourceBindings, VersionInfo
from choir.protocol.wire.payloads import SummaryOutcome
from choir.store.agents import ensure_agent, image_of, record_image
from choir.store.leases import release
from choir.store.postgres.pool import Connection, Pool
from choir.store.sessions import (
    END_REASON_CHARS,
    RESUMABLE,
    Activation,
    SessionRow,
    SessionStatus,
    active_sessions,
    end_if_stale,
    end_session,
    get_session,
    insert_session,
    list_sessions,
    previous_session,
    reactivate,
    stale_sessions,
)

log = get_logger("choird.sessions")

SUMMARIES_KEPT: Final = 256
"""Summary outcomes kept for `agent stop` to read; older ones are dropped."""

EndedListener = Callable[[SessionEnded], None]
StartedListener = Callable[[str, str], None]
"""Told (session id, agent id) when a session starts or resumes (the browser worker)."""


class SessionService:
    """Sessions over the control-plane tables, with active ones cached in memory."""

    def __init__(self, pool: Pool, stage: ConfigStage, *, clock: Clock = utc_now) -> None:
        self._pool = pool
        self._stage = stage
        self._clock = clock
        self._live: dict[str, LiveSession] = {}
        self._intents: dict[str, SessionStatus] = {}
        self._listeners: list[EndedListener] = []
        self._started: list[StartedListener] = []
        self._seen: dict[str, datetime] = {}
        """When each session's agent last made an authenticated call (in memory)."""
        self._excused_until: datetime | None = None
        """No session is stale for lack of heartbeats that choird could not record before."""
        self._summaries: dict[str, SummaryOutcome] = {}
        """How each recent graceful stop's summary went (TERMINATE_SELF), until `agent stop`
        reads it; at most SUMMARIES_KEPT, for stops no operator verb waited for."""

    @property
    def config(self) -> ChoirConfig:
        """The running config (its tunables time a graceful stop)."""
        return self._stage.running.config

    async def start(
        self,
        agent_id: str,
        overrides: Mapping[str, str | None],
        *,
        new_session: bool = False,
        resume: str | None = None,
        image: VersionInfo | None = None,
    ) -> StartedSession:
        """Start `agent_id`: a new session, or its previous one resumed when that crashed or
        was stopped for restart/update. `image` is what INIT_HELLO will hold the container to."""
        if new_session and resume:
            raise UsageError("pass either --new-session or --resume, not both")
        if image is not None and image.agent_id != agent_id:
            raise ConflictError(f"the image was built for {image.agent_id}, not {agent_id}")
        running = self._stage.running
        bindings = resolve_bindings(running.config, agent_id, overrides)
        resources = exclusive_resources(running.config, agent_id, bindings)
        token, now = new_lease_token(), self._clock()
        async with self._pool.acquire() as conn, conn.transaction():
            await ensure_agent(conn, agent_id)
            target = await self._target(conn, agent_id, new_session=new_session, resume=resume)
            session_id = target.session_id if target else new_session_id()
            activation = Activation(
                hash_token(token), bindings.model_dump(mode="json"), running.version, now
            )
            if target is None:
                await insert_session(conn, session_id, agent_id, activation)
            elif not await reactivate(conn, session_id, target.status, activation):
                raise ConflictError(f"session {session_id} changed while starting: try again")
            await lease_all(conn, resources, agent_id=agent_id, session_id=session_id, now=now)
            await record_image(conn, agent_id, image.model_dump(mode="json") if image else None)
        self._live[session_id] = LiveSession(
            session_id,
            agent_id,
            hash_token(token),
            bindings,
            resumed=target is not None,
            ack_rev=target.ack_rev if target else 0,
            head_hash=(target.head_hash if target else None) or GENESIS_HASH,
            image=image,
        )
        for started in list(self._started):
            started(session_id, agent_id)
        log.info(
            "session resumed" if target else "session started",
            fields={"agent_id": agent_id, "session_id": session_id, "leases": len(resources)},
        )
        return StartedSession(session_id, token, bindings, resumed=target is not None)

    async def _target(
        self, conn: Connection, agent_id: str, *, new_session: bool, resume: str | None
    ) -> SessionRow | None:
        """The session to resume, or None for a new one; refuses a running agent."""
        if resume is not None:
            return _resumable(await get_session(conn, resume), agent_id, resume)
        previous = await previous_session(conn, agent_id)
        if previous is not None and previous.status == SessionStatus.ACTIVE:
            raise already_running(agent_id, previous.session_id)
        if new_session or previous is None or previous.status not in RESUMABLE:
            return None
        return previous

    async def authenticate(self, session_id: str, token: str) -> SessionContext:
        """The caller's context if `token` is the session's live lease token (constant time)."""
        live = await self.live(session_id)
        if not hmac.compare_digest(live.token_hash, hash_token(token)):
            raise unauthorized()
        self._seen[session_id] = self._clock()
        return live.context(token)

    def excuse(self, until: datetime) -> None:
        """choird could not hear or record heartbeats before `until` (it was starting, its
        database was down, its disk full): the reaper counts the threshold from then."""
        if self._excused_until is None or until > self._excused_until:
            self._excused_until = until

    def link_of(self, session_id: str) -> str | None:
        """How the session's agent last reached this choird (`LiveSession.link`), if it did."""
        live = self._live.get(session_id)
        return live.link if live is not None else None

    async def live(self, session_id: str) -> LiveSession:
        """An active session's state; `unauthorized` for any other session id."""
        live = self._live.get(session_id)
        if live is None:
            live = await self._load(session_id)
        return live

    async def _load(self, session_id: str) -> LiveSession:
        async with self._pool.acquire() as conn:
            row = await get_session(conn, session_id)
            if row is None or row.status != SessionStatus.ACTIVE or row.lease_id is None:
                raise unauthorized()
            image = await image_of(conn, row.agent_id)
        live = LiveSession(
            row.session_id,
            row.agent_id,
            row.lease_id,
            ResourceBindings.model_validate(row.resource_bindings),
            resumed=row.ack_rev > 0,
            ack_rev=row.ack_rev,
            head_hash=row.head_hash or GENESIS_HASH,
            image=VersionInfo.model_validate(image) if image else None,
        )
        return self._live.setdefault(session_id, live)

    def expect_shutdown(self, session_id: str, reason: str) -> None:
        """Note why the daemon is stopping a session, so TERMINATE_SELF ends it accordingly."""
        self._intents[session_id] = shutdown_status(reason)

    async def terminate(
        self, session_id: str, reason: str, summary: SummaryOutcome | None = None
    ) -> SessionStatus:
        """TERMINATE_SELF: end with the status the daemon's shutdown asked for, else by reason;
        keep how its summary went for `take_summary`."""
        if summary is not None:
            self._summaries[session_id] = summary
            while len(self._summaries) > SUMMARIES_KEPT:
                del self._summaries[next(iter(self._summaries))]
        status = self._intents.pop(session_id, None) or shutdown_status(reason)
        await self.stop(session_id, reason, status)
        return status

    def take_summary(self, session_id: str) -> SummaryOutcome | None:
        """How the session's last graceful stop summarized, as its agent said (once)."""
        return self._summaries.pop(session_id, None)

    async def stop(
        self, session_id: str, reason: str, status: SessionStatus = SessionStatus.STOPPED
    ) -> bool:
        """End an active session with `status`; False if it was not active."""
        return await self._end(session_id, status, reason)

    async def mark_crashed(self, session_id: str, reason: str) -> bool:
        return await self._end(session_id, SessionStatus.CRASHED, reason)

    async def mark_forked(self, session_id: str, reason: str) -> bool:
        return await self._end(session_id, SessionStatus.FORKED, reason)

    async def find_stale(self, now: datetime, threshold_ms: int) -> list[SessionRow]:
        """Active sessions with no sign of life within `threshold_ms` before `now`."""
        async with self._pool.acquire() as conn:
            return await stale_sessions(conn, now - timedelta(milliseconds=threshold_ms))

    async def reap(self) -> list[SessionRow]:
        """Mark sessions without a heartbeat in `crash_detection_threshold_ms` crashed (§13.1).

        The daemon calls this periodically; it removes the returned sessions' containers.
        """
        now = self._clock()
        threshold = self._stage.running.config.crash_detection_threshold_ms
        cutoff = now - timedelta(milliseconds=threshold)
        if self._excused_until is not None and self._excused_until > cutoff:
            return []
        reaped = []
        for row in await self.find_stale(now, threshold):
            seen = self._seen.get(row.session_id)
            if seen is not None and seen >= cutoff:
                continue  # it calls, choird could not store its heartbeat: not its fault
            reason = f"no heartbeat for more than {threshold} ms"
            if await self._end(row.session_id, SessionStatus.CRASHED, reason, stale_before=cutoff):
                reaped.append(row)
        return reaped

    async def active(self) -> list[SessionRow]:
        """Every active session, oldest first."""
        async with self._pool.acquire() as conn:
            return await active_sessions(conn)

    async def reap_orphans(self, alive: Collection[str]) -> list[SessionRow]:
        """Startup step 7 (§6.2): active sessions whose container is gone are crashed."""
        async with self._pool.acquire() as conn:
            orphans = [row for row in await active_sessions(conn) if row.session_id not in alive]
        return [
            row
            for row in orphans
            if await self.mark_crashed(row.session_id, "its container no longer exists")
        ]

    async def get(self, session_id: str) -> SessionRow:
        async with self._pool.acquire() as conn:
            row = await get_session(conn, session_id)
        if row is None:
            raise NotFoundError(f"no session {session_id!r} (see choirctl session list)")
        return row

    async def recent(self, agent_id: str | None = None, limit: int = 50) -> list[SessionRow]:
        """The newest sessions first, of one agent or all."""
        async with self._pool.acquire() as conn:
            return await list_sessions(conn, agent_id, limit)

    def subscribe(self, listener: EndedListener) -> Callable[[], None]:
        """Call `listener` whenever a session ends; returns the unsubscribe callable."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def subscribe_started(self, listener: StartedListener) -> Callable[[], None]:
        """Call `listener` whenever a session starts; returns the unsubscribe callable."""
        self._started.append(listener)
        return lambda: self._started.remove(listener)

    async def _end(
        self,
        session_id: str,
        status: SessionStatus,
        reason: str,
        *,
        stale_before: datetime | None = None,
    ) -> bool:
        now = self._clock()
        kept = redact(reason)[:END_REASON_CHARS]  # `status` shows it: never a secret there
        async with self._pool.acquire() as conn, conn.transaction():
            if stale_before is None:
                ended = await end_session(conn, session_id, status, now, kept)
            else:
                ended = await end_if_stale(conn, session_id, stale_before, now, kept)
            row = await get_session(conn, session_id) if ended else None
            released = await release(conn, session_id) if ended else 0
        self._live.pop(session_id, None)
        self._intents.pop(session_id, None)
        self._seen.pop(session_id, None)
        if row is None:
            return False
        _log_end(row, status, reason, released)
        event = SessionEnded(session_id, row.agent_id, status, reason)
        for listener in list(self._listeners):
            listener(event)
        return True


def _resumable(row: SessionRow | None, agent_id: str, session_id: str) -> SessionRow:
    if row is None or row.agent_id != agent_id:
        raise NotFoundError(
            f"{agent_id} has no session {session_id!r} (see choirctl session list {agent_id})"
        )
    if row.status == SessionStatus.ACTIVE:
        raise already_running(agent_id, session_id)
    if row.status == SessionStatus.FORKED:
        raise ConflictError(
            f"session {session_id} forked and cannot be resumed: start a new session "
            f"with choirctl agent start {agent_id} --new-session"
        )
    return row


def _log_end(row: SessionRow, status: SessionStatus, reason: str, released: int) -> None:
    fields = {
        "agent_id": row.agent_id,
        "session_id": row.session_id,
        "status": status.value,
        "reason": reason,
        "leases_released": released,
    }
    if status == SessionStatus.FORKED:
        log.error("session stopped: fork detected", fields=fields)
    elif status == SessionStatus.CRASHED:
        log.warning("session crashed", fields=fields)
    else:
        log.info("session ended", fields=fields)
