"""`memory.search|show|stats` and `knowledge.list|show|put|delete`: the operator's view of memory
(`knowledge.add|write|rename|alias|history|restore` are `choir.daemon.operator.memory.knowledge`).

Everything goes through choird's `MemoryStore` (§11.9), which runs each call as the agent's own
role in its schema; the operator may read and write any configured agent's memory (the §11.2
rules bind agents, not the operator). `semantic` and `hybrid` searches embed the query with the
memory service; when it answers None (no provider, a timeout, the breaker open) the search runs
as `text` and the answer says so — §11.9's degradation, never a failed search (`relevance`
ranks without semantic similarity then). A knowledge item
the operator puts is embedded right away (one text, within `PUT_EMBED_TIMEOUT_S`), so the answer
can say whether semantic search finds it now; a miss leaves it to the backfill, searchable by
text meanwhile. Store and mode names are checked by the store's own query checks, which name
the valid ones; an unknown agent or item is `NotFoundError`, and nothing is written on a refusal.

The store's modules import numpy and pgvector: they load with the first memory verb, not with
choird's operator API.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, Literal
from uuid import UUID

from choir.core.memory.knowledge.graph import check_tags
from choir.core.memory.knowledge.provenance import Provenance, operator
from choir.core.memory.sealed_items import SEALED_TEXT, is_sealed
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.events import bounded
from choir.daemon.operator.memory.access import listed, opened, placed_content
from choir.daemon.operator.memory.graph import edge_view, filter_of, placed
from choir.daemon.operator.views import event_view, iso
from choir.errors import NotFoundError, UnavailableError, UsageError
from choir.protocol.operator import answers as a
from choir.protocol.operator import requests as r
from choir.store.events import read_events

if TYPE_CHECKING:
    from choir.daemon.memory.embedding.provider import Vector
    from choir.daemon.memory.embedding.service import MemoryService
    from choir.daemon.memory.search.graph import Placed
    from choir.daemon.memory.store import MemoryStore
    from choir.store.knowledge.items import KnowledgeItem
    from choir.store.memory.chunks import StoredChunk
    from choir.store.memory.search import MemoryHit
    from choir.store.memory.stats import MemoryStats

PUT_EMBED_TIMEOUT_S: Final = 5.0
"""How long `knowledge.put` waits for the item's vector (the local model's first load included)."""
SOURCE_EVENTS_MAX: Final = 200
"""Most source events `memory.show` carries with a chunk (a chunk is a tool call and its result,
a skill phase or a size cap: rarely more than a few dozen)."""
_VECTOR_MODES: Final = ("semantic", "hybrid")


def store_of(ctx: OperatorContext) -> MemoryStore:
    store = ctx.memory_store()
    if store is None:
        raise UnavailableError("this choird serves no memory store: restart choird (choir restart)")
    return store


# -- search -----------------------------------------------------------------------------------


async def memory_search(ctx: OperatorContext, request: r.MemorySearch) -> a.MemorySearch:
    """Search one agent's session memory or knowledge; semantic and hybrid fall back to text."""
    from choir.daemon.memory.search.query import MemoryQuery

    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    mode, fallback, vector = request.mode, None, None
    if mode == "relevance" and request.query.strip():
        vector, fallback = await _relevance_vector(ctx, request.query, request.agent_id)
    elif mode in _VECTOR_MODES:
        if not request.query.strip():
            raise UsageError(f"mode {mode} needs query text: what to search for")
        if (stale := _stale_vectors(ctx, request.agent_id)) is not None:
            mode, fallback = "text", stale
        elif (vector := await _embed(ctx.memory, request.query, None, request.agent_id)) is None:
            mode, fallback = "text", _why_no_vector(ctx)
    query = MemoryQuery(
        store=request.store,
        mode=mode,
        text=request.query,
        vector=vector,
        session_id=request.session_id,
        limit=request.limit,
    )
    found = await store.search_placed(request.agent_id, query, filter_of(request))
    return a.MemorySearch(
        agent_id=request.agent_id,
        store=request.store,
        mode=mode,
        asked_mode=request.mode,
        fallback=fallback,
        hits=[
            _hit_view(await _readable_hit(ctx, store, request.agent_id, one.hit), one.placed)
            for one in found
        ],
    )


async def _readable_hit(
    ctx: OperatorContext, store: MemoryStore, agent_id: str, hit: MemoryHit
) -> MemoryHit:
    """`hit` with an encrypted item's text as the list views show it (`listed`: opened while
    choird holds the key, else locked), not the placeholder every sealed item stores."""
    if hit.source.store != "knowledge" or hit.text != SEALED_TEXT:
        return hit
    try:
        item = await store.get_knowledge(agent_id, hit.source.id)
    except NotFoundError:
        return hit
    return replace(hit, text=listed(ctx, agent_id, item).text)


async def _relevance_vector(
    ctx: OperatorContext, text: str, agent_id: str
) -> tuple[Vector | None, str | None]:
    """The query vector of a relevance search, or None and why it ranks without similarity."""
    if (stale := _stale_vectors(ctx, agent_id)) is not None:
        return None, stale.replace("searched by text", "relevance without similarity")
    if (vector := await _embed(ctx.memory, text, None, agent_id)) is None:
        why = _why_no_vector(ctx).replace("searched by text", "relevance without similarity")
        return None, why
    return vector, None


async def _embed(
    service: MemoryService | None,
    text: str,
    timeout_s: float | None,
    agent_id: str,
    purpose: Literal["index", "query"] = "query",
) -> Vector | None:
    """The vector of `text`, or None when no embedder answers; its usage is `agent_id`'s (the
    agent whose memory it searches or fills)."""
    if service is None:
        return None
    return await service.embed_query(text, timeout_s, agent_id=agent_id, purpose=purpose)


def _stale_vectors(ctx: OperatorContext, agent_id: str) -> str | None:
    """Why the agent's vectors cannot answer this model's queries (None: they can)."""
    models = ctx.vector_models
    if models is None or models.current(agent_id):
        return None
    return (
        f"{agent_id}'s memory vectors are of {models.stored(agent_id)}, not the configured "
        f"model's: searched by text until choirctl memory reembed {agent_id}"
    )


def _why_no_vector(ctx: OperatorContext) -> str:
    service = ctx.memory
    if service is None:
        return "this choird has no embedding service: searched by text"
    if service.paused:
        return (
            f"the embedding provider {service.provider_name} is paused after failures: "
            "searched by text"
        )
    wait_ms = ctx.config.embedding.query_timeout_ms
    return (
        f"no vector from the embedding provider {service.provider_name} within {wait_ms} ms "
        "(down, slow or failing): searched by text"
    )


def _hit_view(hit: MemoryHit, place: Placed | None = None) -> a.MemoryHitView:
    source = hit.source
    graph = {} if place is None else placed(place.loc, place.type.value, place.tags)
    return a.MemoryHitView(
        id=str(source.id),
        store=source.store,
        score=round(hit.score, 6),
        text=hit.text,
        session_id=source.session_id,
        tier=source.tier.value if source.tier else None,
        kind=source.kind.value if source.kind else None,
        first_rev=source.first_rev,
        last_rev=source.last_rev,
        name=source.name,
        memory=None if place is None else place.memory_class,
        user=source.owner_user or None,
        **graph,
    )


# -- one item ---------------------------------------------------------------------------------


async def memory_show(ctx: OperatorContext, request: r.MemoryItemRef) -> a.MemoryItem:
    """A session chunk with its source events, or a knowledge item, found by id."""
    store = store_of(ctx)
    item_id = _uuid(request.item_id)
    if request.agent_id is not None:
        ctx.require_agent(request.agent_id)
        agents = [request.agent_id]
    else:
        agents = sorted(ctx.config.agents)
    for agent_id in agents:
        chunk = await store.get_chunk(agent_id, item_id)
        if chunk is not None:
            events, truncated = await _source_events(ctx, chunk)
            return a.MemoryItem(
                agent_id=agent_id,
                store="session",
                chunk=_chunk_view(chunk),
                knowledge=None,
                events=events,
                events_truncated=truncated,
            )
        try:
            item, found = await store.knowledge_neighbours(agent_id, item_id)
        except NotFoundError:
            continue
        edges = [edge_view(neighbour.edge) for neighbour in found]
        return a.MemoryItem(
            agent_id=agent_id,
            store="knowledge",
            chunk=None,
            knowledge=knowledge_view(agent_id, opened(ctx, agent_id, item), edges=edges),
            events=[],
            events_truncated=False,
        )
    whose = f"agent {request.agent_id}'s memory" if request.agent_id else "any agent's memory"
    raise NotFoundError(
        f"no memory item {item_id} in {whose}: ids come from choirctl memory search or "
        "choirctl knowledge list"
    )


def _uuid(text: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise UsageError(
            f"{text!r} is not a memory item id (a UUID, as choirctl memory search shows it)"
        ) from None


async def _source_events(ctx: OperatorContext, chunk: StoredChunk) -> tuple[list[Any], bool]:
    """The stored events of the chunk's rev range (none for a summary chunk), and whether the
    range holds more than one answer carries (`SOURCE_EVENTS_MAX`, or `PAGE_MAX_BYTES`)."""
    first, last = chunk.first_rev, chunk.last_rev
    if first is None or last is None or last < first:
        return [], False
    wanted = min(last - first + 1, SOURCE_EVENTS_MAX + 1)  # one more: is there more?
    async with ctx.pool.acquire() as conn:
        records = await read_events(conn, chunk.session_id, first, wanted)
    kept = bounded(records[:SOURCE_EVENTS_MAX], newest=False)
    return [event_view(record) for record in kept], len(kept) < len(records)


def _chunk_view(chunk: StoredChunk) -> a.ChunkView:
    return a.ChunkView(
        id=str(chunk.id),
        session_id=chunk.session_id,
        tier=chunk.tier.value,
        kind=chunk.kind.value,
        chunk_index=chunk.index,
        first_rev=chunk.first_rev,
        last_rev=chunk.last_rev,
        text=chunk.text,
        has_vector=chunk.has_vector,
        created_at=iso(chunk.created_at),
    )


def knowledge_view(
    agent_id: str,
    item: KnowledgeItem,
    *,
    embedded: bool = False,
    edges: list[a.KnowledgeEdgeView] | None = None,
) -> a.KnowledgeView:
    return a.KnowledgeView(
        agent_id=agent_id,
        id=str(item.id),
        name=item.name,
        aliases=list(item.aliases),
        version=item.version,
        text=item.text,
        metadata=item.metadata,
        created_at=iso(item.created_at),
        updated_at=iso(item.updated_at),
        has_vector=item.has_vector or embedded,
        data=item.data,
        edges=edges,
        memory=item.memory_class,
        user=item.owner_user or None,
        provenance=provenance_view(item.provenance),
        **placed(item.loc, item.type.value, item.tags),
    )


# -- stats ------------------------------------------------------------------------------------


async def memory_stats(ctx: OperatorContext, request: r.MemoryStatsRequest) -> a.MemoryStats:
    """Per agent (one, or every configured one): counts per tier, knowledge, vectors missing
    and coverage, index sizes, sessions waiting or unsummarized, tool calls without their
    sentence (`memory.health`); and the embedding service's queue and breaker."""
    from choir.daemon.memory.health import memory_health

    store = store_of(ctx)
    if request.agent_id is not None:
        ctx.require_agent(request.agent_id)
    agents = [request.agent_id] if request.agent_id else sorted(ctx.config.agents)
    rows = []
    for agent_id in agents:
        health = await memory_health(ctx.pool, store, agent_id)
        row = _agent_stats(agent_id, health.stats, _stale_vectors(ctx, agent_id))
        rows.append(
            row.model_copy(
                update={
                    "vector_coverage": health.vector_coverage,
                    "sessions_pending": health.sessions_pending,
                    "sessions_unsummarized": health.sessions_unsummarized,
                    "tool_rows": health.tool_rows,
                    "tool_sessions_undescribed": health.tool_sessions_undescribed,
                    "tool_calls_undescribed": health.tool_calls_undescribed,
                }
            )
        )
    return a.MemoryStats(agents=rows, embedding=_embedding_view(ctx))


def _agent_stats(
    agent_id: str, stats: MemoryStats, reembed: str | None = None
) -> a.AgentMemoryStats:
    def per_tier(counts: dict[Any, int]) -> a.TierCounts:
        return a.TierCounts.model_validate({str(tier): count for tier, count in counts.items()})

    return a.AgentMemoryStats(
        agent_id=agent_id,
        chunks=per_tier(stats.chunks),
        sessions=per_tier(stats.sessions),
        knowledge_items=stats.knowledge_items,
        vectors_missing=stats.vectors_missing,
        index_bytes=stats.index_bytes,
        reembed=reembed,
        tree_depth=stats.tree_depth,
    )


def _embedding_view(ctx: OperatorContext) -> a.EmbeddingView:
    service = ctx.memory
    if service is None:  # an operator API without choird's service (still, say what is set)
        config = ctx.config.embedding
        return a.EmbeddingView(
            provider=config.model_name,
            dimensions=config.vector_dimensions,
            queue_depth=0,
            breaker="closed",
        )
    return a.EmbeddingView(
        provider=service.provider_name,
        dimensions=service.dimensions,
        queue_depth=service.depth,
        breaker=service.breaker,
    )


# -- knowledge --------------------------------------------------------------------------------


async def knowledge_list(ctx: OperatorContext, request: r.KnowledgeList) -> a.KnowledgeList:
    """A page of the agent's knowledge, oldest first."""
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    items = await store.list_knowledge(
        request.agent_id, limit=request.limit + 1, after=request.after, graph=filter_of(request)
    )
    page = items[: request.limit]
    more = len(items) > request.limit
    return a.KnowledgeList(
        agent_id=request.agent_id,
        items=[
            knowledge_view(request.agent_id, listed(ctx, request.agent_id, item)) for item in page
        ],
        next_after=str(page[-1].id) if more else None,
    )


async def knowledge_show(ctx: OperatorContext, request: r.KnowledgeRef) -> a.KnowledgeView:
    """The item with its edges, both directions."""
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    try:
        item, found = await store.knowledge_neighbours(request.agent_id, request.ref)
    except NotFoundError:
        raise _no_item(request) from None
    edges = [edge_view(neighbour.edge) for neighbour in found]
    return knowledge_view(request.agent_id, opened(ctx, request.agent_id, item), edges=edges)


async def _knowledge(store: MemoryStore, request: r.KnowledgeRef) -> KnowledgeItem:
    try:
        return await store.get_knowledge(request.agent_id, request.ref)
    except NotFoundError:
        raise _no_item(request) from None


def _no_item(request: r.KnowledgeRef) -> NotFoundError:
    return NotFoundError(
        f"agent {request.agent_id} has no knowledge item {request.ref!r} (a name, alias or id: see "
        f"choirctl knowledge list {request.agent_id})"
    )


async def knowledge_put(ctx: OperatorContext, request: r.KnowledgePut) -> a.KnowledgeStored:
    """Write the item `name` names, or add it (the spec's insert and update-by-key); then
    embed it."""
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    text, fields = await placed_content(ctx, store, request)
    item = await store.put_knowledge(
        request.agent_id,
        text,
        name=request.name,
        metadata=tag_metadata(request.tags),
        fields=fields,
        kind=request.kind,
        provenance=operator(request.by),
    )
    return await stored(ctx, store, request.agent_id, item)


def provenance_view(provenance: Provenance | None) -> a.ProvenanceView | None:
    return None if provenance is None else a.ProvenanceView(**provenance.as_json())


def tag_metadata(tags: list[str]) -> dict[str, Any]:
    return {"tags": list(check_tags(tags))} if tags else {}


async def stored(
    ctx: OperatorContext, store: MemoryStore, agent_id: str, item: KnowledgeItem
) -> a.KnowledgeStored:
    """The answer to a write: the item, embedded now when the embedder answers; a sealed one
    never (its text is the placeholder) and shown opened as `knowledge show` shows it."""
    sealed = is_sealed(item.data)
    embedded = not sealed and (item.has_vector or await _index(ctx, store, agent_id, item))
    return a.KnowledgeStored(
        item=knowledge_view(agent_id, opened(ctx, agent_id, item), embedded=embedded),
        updated=item.version > 1,
        embedded=embedded,
        sealed=sealed,
    )


async def _index(
    ctx: OperatorContext, store: MemoryStore, agent_id: str, item: KnowledgeItem
) -> bool:
    """Embed the item now; whether its vector is stored."""
    vector = await _embed(ctx.memory, item.text, PUT_EMBED_TIMEOUT_S, agent_id, "index")
    if vector is None:
        return False
    return await store.set_vectors(agent_id, "knowledge", [(item.id, vector)]) == 1


async def knowledge_delete(ctx: OperatorContext, request: r.KnowledgeRef) -> a.KnowledgeDeleted:
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    if not await store.delete_knowledge(request.agent_id, request.ref):
        raise _no_item(request)
    return a.KnowledgeDeleted(agent_id=request.agent_id, ref=request.ref, deleted=True)
