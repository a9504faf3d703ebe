"""INIT_HELLO (§13.2, §14.2): check who is calling and what it runs, then hand over its state.

The caller's token already matched; here its claimed agent and session must be the lease's, its
protocol version one choird speaks, and its image the one recorded at start — a container built
from other tools or skills than choird expects is refused before it does anything. A resumed
session gets its newest usable snapshot and every acknowledged event after it
(`snapshot_handover`): the first page in the answer, the rest through FETCH_EVENTS. The user
messages choird accepted for the session and the agent does not durably have yet are pushed to it
again (`inbox`). The answer carries the agent's spend so far this UTC day and month, which its
spend caps add this session's calls to (`choir.core.spend`).

A hello may come twice for one session — its answer lost as choird died, or a call timed out —
and a starting agent says it again (`choir.agent.start_retry`): so it writes nothing. It reads,
and pushes the pending messages again (the agent drops those it has by id); the session and its
leases were made at `agent start`. Keep it so: state written here would be written twice.
`hello.before_answer` (a failpoint) is where choird can die with the hello handled, unanswered.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from choir.core.spend import day_of
from choir.daemon.agents.handover import handover, read_page
from choir.daemon.agents.refusals import RpcFault
from choir.daemon.gateway.inbox import Inbox
from choir.daemon.sessions.state import LiveSession, SessionContext, utc_now
from choir.daemon.staging.stage import ConfigStage
from choir.failpoints import failpoint
from choir.protocol import (
    PROTOCOL_VERSION,
    ErrorCode,
    InitHelloRequest,
    InitHelloResponse,
    SpendSoFar,
)
from choir.protocol.wire.artifacts import PAGE_MAX_BYTES, FetchEventsRequest, FetchEventsResponse
from choir.store.postgres.pool import Pool
from choir.store.usage import spent

IMAGE_FIELDS: Final = ("image_version", "tool_manifest_hash", "skill_manifest_hash")


class Greeter:
    """Answers INIT_HELLO (and the FETCH_EVENTS pages after it) for authenticated sessions."""

    def __init__(self, pool: Pool, stage: ConfigStage, inbox: Inbox) -> None:
        self._pool = pool
        self._stage = stage
        self._inbox = inbox

    async def init_hello(self, ctx: SessionContext, request: InitHelloRequest) -> InitHelloResponse:
        live = ctx.live
        check_hello(live, request)
        async with live.lock:
            snapshot, first = await handover(self._pool, live)
        resumed = live.resumed or live.ack_rev > 0
        await self._inbox.redeliver(live.session_id)  # queued for the agent, awaiting it
        spend = await self.spend_so_far(live.agent_id)
        await failpoint("hello.before_answer")
        return InitHelloResponse(
            status="resumed" if resumed else "fresh",
            lease_token=ctx.lease_token,
            resource_bindings=live.bindings,
            snapshot=snapshot,
            tail_events=first.events,
            tail_complete=first.complete,
            config_version=self._stage.running.version,
            spend=spend,
        )

    async def spend_so_far(self, agent_id: str, now: datetime | None = None) -> SpendSoFar:
        """The agent's known spend in the current UTC day and month."""
        now = now or utc_now()
        day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        async with self._pool.acquire() as conn:
            known = await spent(conn, agent_id, day_start, day_start.replace(day=1))
        return SpendSoFar(day=day_of(now), day_usd=known.day_usd, month_usd=known.month_usd)

    async def fetch_events(
        self, ctx: SessionContext, request: FetchEventsRequest
    ) -> FetchEventsResponse:
        """The next page of the caller's handover: acknowledged events after `after_rev`."""
        live = ctx.live
        if request.after_rev > live.ack_rev:
            raise RpcFault(
                ErrorCode.INVALID_REQUEST,
                f"after_rev {request.after_rev} is past the last acknowledged rev {live.ack_rev}",
            )
        async with self._pool.acquire() as conn:
            page = await read_page(conn, live, after=request.after_rev, budget=PAGE_MAX_BYTES)
        return FetchEventsResponse(events=page.events, complete=page.complete)


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
