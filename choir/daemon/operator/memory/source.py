"""`knowledge.source`: where a knowledge item's content came from, with its source events.

An agent's write names its session and tool call (`choir.core.memory.knowledge.provenance`): the
answer carries the user message before the call, the call and its result from the session's event
log, each redacted like every event choird shows. An operator's write names its front end and has no
events; an item written before provenance was kept says "source unknown".
"""

from __future__ import annotations

import json
from typing import Any

from choir.core.memory.knowledge.provenance import UNKNOWN, Provenance
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.memory.views import provenance_view, store_of
from choir.daemon.operator.views import iso
from choir.errors import NotFoundError
from choir.logs import redact
from choir.protocol.operator import answers as a
from choir.protocol.operator import requests as r
from choir.store.events import EventRecord
from choir.store.knowledge.sources import source_events

TEXT_CHARS = 2_000
"""Most characters of one event's text shown (the whole event is in `session events`)."""


async def knowledge_source(ctx: OperatorContext, request: r.KnowledgeRef) -> a.KnowledgeSource:
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    try:
        item = await store.get_knowledge(request.agent_id, request.ref)
    except NotFoundError:
        raise NotFoundError(
            f"agent {request.agent_id} has no knowledge item {request.ref!r} (a name, alias or "
            f"id: see choirctl knowledge list {request.agent_id})"
        ) from None
    found = item.provenance
    events = await _events(ctx, found) if found is not None else []
    return a.KnowledgeSource(
        agent_id=request.agent_id,
        name=item.name,
        provenance=provenance_view(found),
        events=[_event_view(event) for event in events],
        note=_note(found, events),
    )


async def _events(ctx: OperatorContext, found: Provenance) -> list[EventRecord]:
    if found.session_id is None or found.call_id is None:
        return []
    async with ctx.pool.acquire() as conn:
        return await source_events(conn, found.session_id, found.call_id, found.rev or 0)


def _note(found: Provenance | None, events: list[EventRecord]) -> str:
    if found is None:
        return f"{UNKNOWN}: written before choir kept where items come from"
    if not found.from_session:
        return f"written by the operator via {found.by}: no session events"
    if not events:
        return (
            f"{found.describe()}; its events are not stored (yet: they come with the agent's "
            f"next heartbeat): choirctl session events {found.session_id}"
        )
    return found.describe()


def _event_view(event: EventRecord) -> a.SourceEvent:
    return a.SourceEvent(
        rev=event.rev,
        lane=event.lane,
        kind=event.event_type,
        text=redact(_text(event.payload))[:TEXT_CHARS],
        created_at=iso(event.created_at),
    )


def _text(payload: dict[str, Any]) -> str:
    kind = payload.get("kind")
    if kind == "user_msg":
        return str(payload.get("text", ""))
    if kind == "tool_call_requested":
        arguments = json.dumps(payload.get("arguments", {}), ensure_ascii=False)
        return f"{payload.get('tool')} {arguments}"
    result = payload.get("result") or {}
    return f"{result.get('status')}: {result.get('summary', '')}"
