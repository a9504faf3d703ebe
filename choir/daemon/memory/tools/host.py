"""The memory host tools (§11.7) choird serves over EXECUTE_HOST_TOOL, with §11.2's access rules.

- `choir.memory.query` for the `session` and `knowledge` stores (the agent answers `working`
  itself): the caller's memory, or another agent's (`target_agent`) as its memory classes and
  roles allow (`access.MemoryGate`, asked on every call: a knowledge search covers the memories
  the caller may read, or the one `memory` names; a personal item is its session's user's
  only); an unknown agent is an error the model sees, never an empty result. `semantic` and
  `hybrid` embed the query text first; when no embedder answers in time the search runs as
  `text` and the result says so (§11.9: search degrades, it never fails for want of a vector);
  knowledge `relevance` embeds it too, and without a vector ranks without semantic similarity.
  Knowledge queries filter by loc, type and tags, mode `neighbours` follows edges
  (`graph_tools`), mode `expand` goes one step down the summary tree (`tree_tools`).
- `choir.memory.upsert`: the closed set of knowledge writes — add, write, rename, alias,
  remove (and put: write-or-add, the spec's update-by-key) — on a memory the caller may write
  (its own but system; another agent's app memory attached read-write), checked against the
  item's memory (an existing item's never changes) or `memory` for a new one, each item
  addressed by its name or an alias; a refusal is the tool error `access_denied`. `kind`
  (correction, preference, fact, task) sets an item's importance for relevance search. An
  unknown name is the tool error `not_found`, a name another item answers to `name_taken`. A
  written item is queued for embedding (`index`); it is searchable by text at once. Items
  carry a loc, a type, tags and data, and ops link and unlink add and remove typed edges
  (design 003, `graph_tools`). Every content write records its provenance: the session, its
  revision, the call and the user.

Arguments were checked by the agent against the tool's schema, but choird trusts nothing an
agent sends: every argument is checked again here, and a bad one is a one-line tool error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol
from uuid import UUID

from choir.core.memory.access import MemoryClass, Op
from choir.core.memory.knowledge.graph import (
    NO_FIELDS,
    GraphFilter,
    ItemFields,
    MemoryScope,
    Placement,
)
from choir.core.memory.knowledge.provenance import Provenance
from choir.core.memory.sealed_items import SEALED_TEXT, is_sealed, open_item
from choir.core.memory.sealing import SealError
from choir.daemon.agents.host_tools import HostToolCall, HostTools
from choir.daemon.memory.access import MemoryAccessDenied, MemoryGate
from choir.daemon.memory.keys import MemoryKeys, MemoryLocked, classes_of, locked_message
from choir.daemon.memory.sealed_writes import is_encrypted, sealed_content
from choir.daemon.memory.tools import graph as graph_tools
from choir.daemon.memory.tools import tree as tree_tools
from choir.daemon.memory.tools.tree import Browse
from choir.errors import ConflictError, NotFoundError, UnavailableError, UsageError
from choir.protocol import ToolResult
from choir.store.knowledge.immutable import ArchiveImmutable

if TYPE_CHECKING:  # numpy and pgvector load with memory, after choird's start (see `_query`)
    from choir.config.model import AgentConfig
    from choir.daemon.memory.embedding.provider import Vector
    from choir.daemon.memory.store import MemoryStore
    from choir.store.knowledge.items import KnowledgeItem
    from choir.store.memory.search import MemoryHit
    from choir.store.memory.vectors import VectorTarget

QUERY: Final = "choir.memory.query"
UPSERT: Final = "choir.memory.upsert"
HIT_CHARS: Final = 1_500
"""Text of one hit shown to the model; the rest is a `session_detail` or `show` away."""
DEFAULT_LIMIT: Final = 10
MAX_LIMIT: Final = 50
"""The tool schema's maximum (the store allows more for the operator)."""


class QueryEmbedder(Protocol):
    """The query text's vector, or None when no embedder answers in time; the call's usage is
    `agent_id`'s."""

    def __call__(
        self, text: str, timeout_s: float | None = None, *, agent_id: str | None = None
    ) -> Awaitable[Vector | None]: ...


Indexer = Callable[[str, "VectorTarget", UUID, str], None]
"""Queue a stored row's text for embedding: (agent, target, row id, text)."""
MemoryParts = Callable[[], Awaitable[tuple["MemoryStore", Indexer]]]
"""The store and the indexer, once choird's memory has started (`UnavailableError` when it
does not in time: the tools are served from choird's start, memory comes up just after)."""


class _Refused(Exception):
    """A call that cannot run as asked: becomes the tool error `code` with `message`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class MemoryTools:
    """The two handlers, over one `MemoryStore`, an embedder for queries and the index queue."""

    parts: MemoryParts
    embed_query: QueryEmbedder
    agents: Callable[[], Mapping[str, AgentConfig]]
    """The configured agents: whose memory exists to be read, and the memories each attaches
    (`memories`, checked by `MemoryGate` on every call)."""
    current: Callable[[str], bool] = lambda agent_id: True
    """Whether an agent's vectors are the configured model's (`vector_models`): another
    model's are never compared with a query's, the search runs as text."""
    health: Callable[[str], Awaitable[dict[str, Any]]] | None = None
    """An agent's memory health (`health.memory_health` and the embedding queue) for mode
    `stats`; None where choird serves none (the mode is then refused)."""
    browse: Browse | None = None
    """A page of a session's messages for mode `browse`; None where choird serves none."""
    keys: MemoryKeys = field(default_factory=MemoryKeys)
    """The keys of encrypted memories choird holds (`keys`): a write to one seals its text and
    data, a hit from one is opened, or shown locked without its key."""
    knowledge_exists: Callable[[str], Awaitable[bool]] | None = None
    """Whether an agent has any knowledge item, asked without loading memory: a recall for
    one with none answers at once (`recall`); None: taken as yes."""

    def register(self, host_tools: HostTools) -> Callable[[], None]:
        """Serve both tools, and `choir.memory.recall` and `choir.memory.rollup` (edge's own,
        never the model's), on `host_tools`; returns the unregister callable."""
        from choir.daemon.memory.tools.recall import RECALL, MemoryRecall
        from choir.daemon.memory.tools.rollup import ROLLUP, RollupSources

        recall = MemoryRecall(
            self.parts,
            self.embed_query,
            self.current,
            self.recall_scope,
            self.knowledge_exists,
        )
        undo = [
            host_tools.register(QUERY, self.query),
            host_tools.register(UPSERT, self.upsert),
            host_tools.register(RECALL, recall),
            host_tools.register(ROLLUP, RollupSources(self.parts)),
        ]

        def unregister() -> None:
            for step in undo:
                step()

        return unregister

    @property
    def gate(self) -> MemoryGate:
        return MemoryGate(self.agents)

    def recall_scope(self, agent: str, user: str | None) -> MemoryScope:
        """What a per-turn recall covers: the memories the agent may read, less its encrypted
        ones — a recall's items go into the session's event log (and its session memory),
        where an encrypted item's plaintext must never be; the model reads them by asking."""
        scope = self.gate.scope(agent, agent, user=user)
        sealed = {c.value for c in classes_of(self.agents(), agent)}
        return replace(scope, classes=tuple(c for c in scope.classes if c not in sealed))

    async def query(self, call: HostToolCall) -> ToolResult:
        user = call.context.bindings.dm
        return await _answered(self._query(call.context.agent_id, call.input, user))

    async def upsert(self, call: HostToolCall) -> ToolResult:
        user = call.context.bindings.dm
        return await _answered(
            self._upsert(call.context.agent_id, call.input, user, _provenance(call))
        )

    async def _query(self, caller: str, args: Mapping[str, Any], user: str | None) -> ToolResult:
        store = _required(args, "store")
        if store == "working":
            raise _Refused("invalid_input", 'store "working" is searched by the agent itself')
        target = _text(args, "target_agent") or caller
        if target not in self.agents():
            raise _Refused(
                "unknown_agent",
                f"there is no agent {target!r} whose memory could be read; known: "
                + ", ".join(sorted(self.agents())),
            )
        from choir.daemon.memory.search.query import MemoryQuery, SearchMode

        mode = _required(args, "mode")
        graph = graph_tools.graph_filter(args)
        if store == "knowledge":
            graph = replace(graph, scope=self._scope(caller, target, args, user))
        elif args.get("memory") is not None:
            raise _Refused("invalid_input", "memory (a class) filters the knowledge store only")
        else:
            self.gate.check_session(caller, target)
        if mode == STATS:
            return await self._stats(store, caller, target)
        if mode == BROWSE:
            return await self._browse(store, caller, target, args, user)
        if mode == graph_tools.NEIGHBOURS_MODE and store == "knowledge":
            memory, _ = await self.parts()
            ref = args.get("query") or args.get("name")
            if isinstance(ref, str) and ref.strip():
                await self._visible(memory, caller, target, ref, user, graph)
            return await graph_tools.neighbours(
                caller, target, args, memory, _limit(args), graph, partial(self._readable, target)
            )
        if mode == tree_tools.EXPAND_MODE and store == "knowledge":
            memory, _ = await self.parts()
            ref = args.get("query") or args.get("name")
            if isinstance(ref, str) and ref.strip():
                await self._visible(memory, caller, target, ref, user, graph)
            return await tree_tools.expand(
                caller,
                target,
                args,
                memory,
                self.browse,
                _limit(args),
                partial(self._readable, target),
                graph=GraphFilter(scope=graph.scope),
                viewer=self.gate.viewer(caller, target, user),
            )
        text = _text(args, "query") or ""
        vector, note = None, ""
        if mode in (SearchMode.SEMANTIC, SearchMode.HYBRID) and not self.current(target):
            mode = SearchMode.TEXT.value
            note = " (its vectors are another embedding model's until re-embedded: text search)"
        elif mode in (SearchMode.SEMANTIC, SearchMode.HYBRID) and text.strip():
            vector = await self.embed_query(text, agent_id=caller)
            if vector is None:
                mode, note = SearchMode.TEXT.value, " (no embedder answered: text search)"
        elif mode == SearchMode.RELEVANCE and text.strip() and self.current(target):
            vector = await self.embed_query(text, agent_id=caller)
            if vector is None:
                note = " (no embedder answered: relevance without semantic similarity)"
        query = MemoryQuery(
            store=store,
            mode=mode,
            text=text,
            vector=vector,
            session_id=_text(args, "session_id"),
            limit=_limit(args),
            viewer=self.gate.viewer(caller, target, user),
        )
        memory, _ = await self.parts()
        found = await memory.search_placed(target, query, graph)
        placed = [(f.hit, graph_tools.hit_place(f.placed)) for f in found]
        if store == "knowledge":
            placed = [(await self._opened(memory, target, hit), at) for hit, at in placed]
        note += f" ({graph.describe()})" if graph.describe() else ""
        whose = "your" if target == caller else f"{target}'s"
        return ToolResult(
            status="success",
            summary=f"{len(placed)} hit(s) in {whose} {store} memory for {text!r}{note}",
            data={
                "store": store,
                "mode": mode,
                "target_agent": target,
                "hits": [_hit(hit) | place for hit, place in placed],
            },
            truncated=any(len(hit.text) > HIT_CHARS for hit, _ in placed),
        )

    async def _opened(self, memory: MemoryStore, target: str, hit: MemoryHit) -> MemoryHit:
        """`hit` with an encrypted item's text opened; without the key (or when its value does
        not open) the text says so, never anything of the content."""
        if hit.text != SEALED_TEXT:
            return hit
        try:
            item = await memory.get_knowledge(target, hit.source.id)
        except NotFoundError:
            return hit
        if not is_sealed(item.data):
            return hit
        return replace(hit, text=self._readable(target, item).text)

    def _readable(self, target: str, item: KnowledgeItem) -> KnowledgeItem:
        """`item` as the model reads it: an encrypted one opened while choird holds `target`'s
        key; else its text says why not (locked, or its value does not open), its data
        nothing (the sealed value would only be noise to the model)."""
        if not is_sealed(item.data):
            return item
        key = self.keys.key(target)
        if key is None:
            text = f"(encrypted, locked: {locked_message(target, item.memory_class)})"
            return replace(item, text=text, data={})
        try:
            opened = open_item(key, target, item.memory_class, item.data)
        except SealError as error:
            return replace(item, text=f"(encrypted, does not open: {error.message})", data={})
        return replace(item, text=opened.text, data=opened.data)

    async def _stats(self, store: str, caller: str, target: str) -> ToolResult:
        if store != "session":
            raise _Refused("invalid_input", 'mode stats is for store "session"')
        if self.health is None:
            raise _Refused("memory_unavailable", "memory statistics are not served here")
        data = await self.health(target)
        whose = "your" if target == caller else f"{target}'s"
        coverage = data.get("vector_coverage")
        covered = "no searchable rows" if coverage is None else f"{coverage:.0%} with vectors"
        return ToolResult.ok(
            f"{whose} memory: {covered}, {data['embedding_queue_depth']} rows queued for "
            f"vectors, {data['sessions_pending']} sessions waiting to close, "
            f"{data['tool_calls_undescribed']} tool calls without their description, summary "
            f"tree depth {data['tree_depth']}",
            target_agent=target,
            **data,
        )

    async def _browse(
        self, store: str, caller: str, target: str, args: Mapping[str, Any], user: str | None
    ) -> ToolResult:
        if store != "session":
            raise _Refused("invalid_input", 'mode browse is for store "session"')
        if self.browse is None:
            raise _Refused("memory_unavailable", "browsing sessions is not served here")
        session_id = _text(args, "session_id")
        if session_id is None:
            raise _Refused("invalid_input", "mode browse needs session_id: the session to read")
        offset = args.get("offset", 0)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise _Refused("invalid_input", "offset must be an integer from 0 (a next_offset)")
        viewer = self.gate.viewer(caller, target, user)
        page = await self.browse(target, session_id, offset, _limit(args), viewer)
        whose = "your" if target == caller else f"{target}'s"
        more = (
            f"; read on with offset {page.next_offset}"
            if page.next_offset is not None
            else "; the end of the session"
        )
        return ToolResult(
            status="success",
            summary=f"{len(page.lines)} message(s) of {whose} session {session_id}{more}",
            data={
                "session_id": session_id,
                "target_agent": target,
                "messages": [
                    {"rev": line.rev, "who": line.who, "text": line.text}
                    | ({"cut": True} if line.cut else {})
                    for line in page.lines
                ],
                "next_offset": page.next_offset,
            },
            truncated=page.next_offset is not None,
        )

    def _scope(
        self, caller: str, target: str, args: Mapping[str, Any], user: str | None
    ) -> MemoryScope:
        """The memories of `target` a knowledge read covers: `memory` (a class) or every one
        the caller may read."""
        wanted = _memory_class(args)
        if wanted is None:
            return self.gate.scope(caller, target, user=user)
        self.gate.check(caller, target, wanted, Op.READ, user=user)
        return MemoryScope((wanted.value,), self.gate.viewer(caller, target, user).user)

    async def _visible(
        self,
        store: MemoryStore,
        caller: str,
        target: str,
        ref: str,
        user: str | None,
        graph: GraphFilter,
    ) -> KnowledgeItem:
        """The item `ref` names in `target`'s knowledge, if the caller may read its memory;
        another user's personal item is not found, as an absent one."""
        try:
            item = await store.get_knowledge(target, ref)
        except NotFoundError:
            raise _Refused("not_found", _unknown(ref)) from None
        if not self.gate.visible(caller, target, item.memory_class, item.owner_user, user):
            raise _Refused("not_found", _unknown(ref))
        scope = graph.scope
        if scope is not None and item.memory_class not in scope.classes:
            self.gate.check(caller, target, MemoryClass(item.memory_class), Op.READ, user=user)
            raise _Refused(
                "invalid_input",
                f"item {ref!r} is in memory {target}/{item.memory_class}, outside the memory "
                "asked for; drop memory or ask for that one",
            )
        return item

    async def _upsert(
        self, caller: str, args: Mapping[str, Any], user: str | None, provenance: Provenance
    ) -> ToolResult:
        target = _text(args, "target_agent") or caller
        if target not in self.agents():
            raise _Refused("unknown_agent", f"there is no agent {target!r} whose memory to write")
        op = _required(args, "op")
        if op == "insert" and args.get("key") is not None:
            op = "put"  # §11.7's insert with a key replaced the keyed entry, as put does
        op = LEGACY_OPS.get(op, op)
        if op not in OPS:
            raise _Refused(
                "invalid_input", f"unknown op {op!r}: use " + ", ".join(OPS) + " (see the tool)"
            )
        store, index = await self.parts()
        fields, existing = await self._placed(store, op, caller, target, args, user)
        memory_class = existing.memory_class if existing is not None else None
        if memory_class is None and fields.memory is not None:
            memory_class = fields.memory.memory_class
        sealed = memory_class is not None and is_encrypted(self.agents(), target, memory_class)
        if sealed and op in ("add", "write", "put") and memory_class is not None:
            args, fields = self._sealed(target, memory_class, op, args, fields, existing)
            index = _unindexed  # no vector of a sealed item: its text is the placeholder
        return await _write(op, target, args, store, index, fields, provenance)

    def _sealed(
        self,
        target: str,
        memory_class: str,
        op: str,
        args: Mapping[str, Any],
        fields: ItemFields,
        existing: KnowledgeItem | None,
    ) -> tuple[Mapping[str, Any], ItemFields]:
        """The write's text and data sealed under `target`'s key (the item's current text or
        data kept where the write leaves one out); a write of loc, type, tags or kind only
        leaves the sealed value as it is."""
        text, data = _text(args, "text"), fields.data
        if op == "write" and text is None and data is None:
            return args, fields
        if existing is None and text is None:
            text = _required(args, "text")
        stored_text, stored_data = sealed_content(
            self.keys, target, memory_class, text, data, existing
        )
        return {**args, "text": stored_text}, replace(fields, data=stored_data)

    async def _placed(
        self,
        store: MemoryStore,
        op: str,
        caller: str,
        target: str,
        args: Mapping[str, Any],
        user: str | None,
    ) -> tuple[ItemFields, KnowledgeItem | None]:
        """Check the write against the memory it goes to: the item's own (an existing item's
        class never changes) or `memory` for a new one (default knowledge); the fields to
        write, a new item's placement among them, and the existing item."""
        wanted = _memory_class(args)
        fields = graph_tools.item_fields(args) if op in ("add", "write", "put") else NO_FIELDS
        name = _text(args, "name") or _text(args, "key")
        existing = None
        if op != "add" and name is not None:
            try:
                existing = await store.get_knowledge(target, name)
            except NotFoundError:
                if op != "put":  # the op itself says what is missing, arguments first
                    memory_class = wanted or MemoryClass.KNOWLEDGE
                    self.gate.check(caller, target, memory_class, Op.WRITE, user=user)
                    return fields, None
        if existing is None:
            memory_class = wanted or MemoryClass.KNOWLEDGE
            self.gate.check(caller, target, memory_class, Op.WRITE, user=user)
            owner = user if memory_class is MemoryClass.PERSONAL and user else ""
            return replace(fields, memory=Placement(memory_class.value, owner)), None
        if not self.gate.visible(caller, target, existing.memory_class, existing.owner_user, user):
            if op == "put":  # another user's item holds the name: never written over
                raise _Refused(
                    "name_taken",
                    f"the name {name!r} is taken in {target}'s memory; choose another name",
                )
            raise _Refused("not_found", _unknown(str(name)))
        memory_class = MemoryClass(existing.memory_class)
        self.gate.check(caller, target, memory_class, Op.WRITE, user=user)
        if wanted is not None and wanted is not memory_class:
            raise _Refused(
                "invalid_input",
                f"item {existing.name!r} is in memory {target}/{memory_class.value}, not "
                f"{wanted.value}: an item never changes memory; add a new one there",
            )
        if op in graph_tools.GRAPH_OPS:
            await self._visible(store, caller, target, _required(args, "target"), user, _ANY)
        return fields, existing


BROWSE: Final = "browse"
"""`choir.memory.query` store `session` mode `browse`: a session's messages in order, a page
(`limit`) after revision `offset` at a time (seed design 004's `memory_browse`)."""
STATS: Final = "stats"
"""`choir.memory.query` store `session` mode `stats`: the memory's health (seed design 004's
`memory_stats`), not a search."""

LEGACY_OPS: Final = {"insert": "add", "update": "put", "delete": "remove"}
"""The spec's operations (§11.7), still accepted from a tool definition that offers them:
update-by-key writes the item with that name or adds it (`put`)."""
OPS: Final = ("add", "write", "rename", "alias", "remove", "put", "link", "unlink")


def _provenance(call: HostToolCall) -> Provenance:
    """Where a write by `call` comes from: the session, its committed revision (the call's own
    events follow it), the tool call and the session's user (its DM)."""
    live = call.context.live
    return Provenance(
        agent=live.agent_id,
        session_id=live.session_id,
        rev=live.ack_rev,
        call_id=call.call_id,
        tool=UPSERT,
        user=live.bindings.dm,
    )


async def _write(
    op: str,
    caller: str,
    args: Mapping[str, Any],
    store: MemoryStore,
    index: Indexer,
    fields: ItemFields,
    provenance: Provenance,
) -> ToolResult:
    """Run one op of the closed set on `caller`'s memory (the agent written to, after the
    access check); refusals (unknown name, taken name) become tool errors."""
    name = _text(args, "name") or _text(args, "key")
    kind = _text(args, "kind")
    if op == "add":
        item = await store.add_knowledge(
            caller,
            _required(args, "text"),
            name=name,
            metadata=_tags(args),
            fields=fields,
            kind=kind,
            provenance=provenance,
        )
        index(caller, "knowledge", item.id, item.text)
        return _done(f"stored knowledge {item.name!r}", op, item)
    if name is None:
        raise _Refused("invalid_input", f"op {op} needs the name of the item (or an alias)")
    if op in graph_tools.GRAPH_OPS:
        return await graph_tools.graph_write(op, caller, args, name, store)
    if op == "remove":
        if not await store.delete_knowledge(caller, name):
            raise _Refused("not_found", _unknown(name))
        return ToolResult.ok(f"removed knowledge {name!r}", op=op, name=name)
    if op == "rename":
        item = await store.rename_knowledge(caller, name, _required(args, "new_name"))
        return _done(f"renamed knowledge {name!r} to {item.name!r}", op, item)
    if op == "alias":
        item = await store.alias_knowledge(caller, name, _required(args, "alias"))
        return _done(f"{item.name!r} now also answers to {args['alias']!r}", op, item)
    tags = _tags(args)
    text: str | None
    if op == "put":
        text = _required(args, "text")
        item = await store.put_knowledge(
            caller, text, name=name, metadata=tags, fields=fields, kind=kind, provenance=provenance
        )
    else:
        text = _text(args, "text")  # None: a write of loc, type, data, tags or kind only
        if text is None and not (fields.given or tags or kind):
            raise _Refused("invalid_input", "op write needs text (or loc, type, data, tags, kind)")
        written = await store.write_knowledge(
            caller,
            name,
            text,
            metadata=tags or None,
            fields=fields,
            kind=kind,
            provenance=provenance,
        )
        item = written.item
    if text is not None:
        index(caller, "knowledge", item.id, item.text)
    if item.version == 1:
        return _done(f"stored knowledge {item.name!r}", op, item)
    return _done(f"wrote knowledge {item.name!r} (version {item.version})", op, item)


def _done(summary: str, op: str, item: KnowledgeItem) -> ToolResult:
    return ToolResult.ok(
        summary,
        op=op,
        id=str(item.id),
        name=item.name,
        aliases=list(item.aliases),
        version=item.version,
        memory=item.memory_class,
        **graph_tools.placed_view(item.loc, item.type.value, item.tags),
    )


def _unknown(name: str) -> str:
    return (
        f"there is no knowledge item named {name!r} (by name or alias); search the "
        "knowledge store to find its name"
    )


async def _answered(work: Awaitable[ToolResult]) -> ToolResult:
    """`work`'s result, or the tool error a refusal, a bad argument or an absent store is."""
    try:
        return await work
    except _Refused as refused:
        return ToolResult.fail(refused.code, refused.message)
    except MemoryAccessDenied as err:
        return ToolResult.fail("access_denied", err.message)
    except MemoryLocked as err:
        return ToolResult.fail("memory_locked", err.message)
    except SealError as err:
        return ToolResult.fail("sealed", err.message)
    except UsageError as err:
        return ToolResult.fail("invalid_input", err.message)
    except NotFoundError as err:
        return ToolResult.fail("not_found", err.message)
    except ArchiveImmutable as err:
        return ToolResult.fail("immutable", err.message)
    except ConflictError as err:
        return ToolResult.fail("name_taken", err.message)
    except UnavailableError as err:
        return ToolResult.fail("memory_unavailable", err.message)


def _required(args: Mapping[str, Any], name: str) -> str:
    value = _text(args, name)
    if value is None:
        raise _Refused("invalid_input", f"{name} is missing")
    return value


def _text(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _Refused("invalid_input", f"{name} must be a non-empty string")
    return value


def _memory_class(args: Mapping[str, Any]) -> MemoryClass | None:
    value = _text(args, "memory")
    if value is None:
        return None
    try:
        return MemoryClass(value)
    except ValueError:
        raise _Refused(
            "invalid_input",
            f"unknown memory {value!r}: use " + ", ".join(c.value for c in MemoryClass),
        ) from None


_ANY: Final = GraphFilter()


def _unindexed(agent: str, target: VectorTarget, row: UUID, text: str) -> None:
    """The indexer of a sealed write: nothing to embed (no vector of plaintext, ever)."""


def _limit(args: Mapping[str, Any]) -> int:
    value = args.get("limit", DEFAULT_LIMIT)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise _Refused("invalid_input", f"limit must be an integer from 1 to {MAX_LIMIT}")
    return value


def _tags(args: Mapping[str, Any]) -> dict[str, Any]:
    tags = args.get("tags")
    if tags is None:
        return {}
    if not isinstance(tags, list) or not all(isinstance(tag, str) and tag for tag in tags):
        raise _Refused("invalid_input", "tags must be a list of non-empty strings")
    return {"tags": tags}


def _hit(hit: MemoryHit) -> dict[str, Any]:
    source = hit.source
    found: dict[str, Any] = {
        "text": hit.text[:HIT_CHARS],
        "score": round(hit.score, 4),
        "agent": source.agent_id,
        "store": source.store,
        "id": str(source.id),
    }
    extra = {
        "session_id": source.session_id,
        "tier": source.tier.value if source.tier else None,
        "kind": source.kind.value if source.kind else None,
        "first_rev": source.first_rev,
        "last_rev": source.last_rev,
        "name": source.name,
    }
    found.update((name, value) for name, value in extra.items() if value is not None)
    return found
