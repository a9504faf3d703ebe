"""INIT_HELLO (§13.2, §14.2): check who is calling and what it runs, then hand over its state.

The caller's token already matched; here its claimed agent and session must be the lease's, its
protocol version one choird speaks, and its image the one recorded at start — a container built
from other tools or skills than choird expects is refused before it does anything. A resumed
session gets its latest snapshot and every acknowledged event after it.
"""

from __future__ import annotations

from typing import Final

from choir.daemon.config_stage import ConfigStage
from choir.daemon.faults import RpcFault
from choir.daemon.replication import committed_of
from choir.daemon.session_state import LiveSession, SessionContext
from choir.daemon.sessions import SessionService
from choir.protocol import (
    PROTOCOL_VERSION,
    CommittedEvent,
    ErrorCode,
    InitHelloRequest,
    InitHelloResponse,
    Snapshot,
)
from choir.store.events import read_events
from choir.store.pool import Pool
from choir.store.snapshots import latest_snapshot

PAGE: Final = 1000
"""Events read per query when assembling the tail."""
IMAGE_FIELDS: Final = ("image_version", "tool_manifest_hash", "skill_manifest_hash")


class Greeter:
    """Answers INIT_HELLO for the sessions of `sessions`."""

    def __init__(self, pool: Pool, sessions: SessionService, stage: ConfigStage) -> None:
        self._pool = pool
        self._sessions = sessions
        self._stage = stage

    async def init_hello(self, ctx: SessionContext, request: InitHelloRequest) -> InitHelloResponse:
        live = await self._sessions.live(ctx.session_id)
        check_hello(live, request)
        async with live.lock:
            snapshot, tail = await self._state(live)
        resumed = live.resumed or live.ack_rev > 0
        return InitHelloResponse(
            status="resumed" if resumed else "fresh",
            lease_token=ctx.lease_token,
            resource_bindings=live.bindings,
            snapshot=snapshot,
            tail_events=tail,
            config_version=self._stage.running.version,
        )

    async def _state(self, live: LiveSession) -> tuple[Snapshot | None, list[CommittedEvent]]:
        """The newest snapshot and the acknowledged events after it (after rev 0 if none)."""
        if live.ack_rev == 0:
            return None, []
        async with self._pool.acquire() as conn:
            stored = await latest_snapshot(conn, live.session_id, live.ack_rev)
            tail: list[CommittedEvent] = []
            next_rev = stored.rev + 1 if stored else 1
            while next_rev <= live.ack_rev:
                page = await read_events(conn, live.session_id, next_rev, PAGE)
                tail.extend(committed_of(r) for r in page if r.rev <= live.ack_rev)
                if len(page) < PAGE:
                    break
                next_rev = page[-1].rev + 1
        snapshot = Snapshot.model_validate(stored.snapshot) if stored else None
        return snapshot, tail


def check_hello(live: LiveSession, request: InitHelloRequest) -> None:
    """Refuse a hello from another agent or session, protocol, or image than expected."""
    if request.protocol_version != PROTOCOL_VERSION:
        raise RpcFault(
            ErrorCode.PROTOCOL_MISMATCH,
            f"protocol_version {request.protocol_version} is not spoken by this choird "
            f"(it speaks {PROTOCOL_VERSION}): rebuild with choirctl agent build {live.agent_id}",
        )
    if (request.agent_id, request.session_id) != (live.agent_id, live.session_id):
        raise RpcFault(
            ErrorCode.UNAUTHORIZED,
            f"INIT_HELLO names agent {request.agent_id} session {request.session_id}, but the "
            f"lease token is for agent {live.agent_id} session {live.session_id}",
        )
    if live.image is None:
        return
    drift = [
        f"{name} {getattr(request, name)} (choird built {getattr(live.image, name)})"
        for name in IMAGE_FIELDS
        if getattr(request, name) != getattr(live.image, name)
    ]
    if drift:
        raise RpcFault(
            ErrorCode.CONFLICT,
            f"image drift in {live.agent_id}: {'; '.join(drift)}; rebuild and restart it "
            f"with choirctl agent update {live.agent_id}",
        )
