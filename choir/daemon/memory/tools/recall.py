"""`choir.memory.recall`: the memories edge puts into its prompt before answering a message.

A host tool the agent calls itself before each user message's first LLM call (design 004,
"relevant context each turn"), never offered to the model. choird embeds the message (when an
embedder answers within half the deadline; else relevance ranks without similarity and says
so), ranks the agent's knowledge by relevance (`relevance_search`, only items that match the
message: `choir.core.memory.recall.admitted`), keeps what the agent may read (`readable`) and
what fits the token budget, and counts an access for those only. All of it within the deadline
the agent sends: past it the search is cancelled (its transaction rolls back, nothing counted)
and the answer is the error `recall_timeout` — the agent goes on without memories either way.

A call with `warm` true (the agent sends one when its session starts) recalls nothing: it loads
what the first real recall would otherwise wait for — choird's memory (it starts on first use),
the embedder (its first use imports and loads the model) and the agent's BM25 index (built by
its first search: seconds at 100k items) — so the first message's recall fits its deadline.

An agent without knowledge items has nothing to recall: one query says so (`knowledge_exists`,
no numpy), and neither the warm-up nor a recall loads memory, the embedder or an index for it —
they would cost choird ~0.5 s of CPU and ~60 MB beside the agent's first reply. Once an item
exists (its write loaded memory and the embedder to store and embed it) the agent is not asked
again.

Knowledge only: session memory (mid-term chunks) is the agent's to search with
`choir.memory.query` — its chunks are long and partly the current session, and a second search
would not fit the deadline (docs/ARCHITECTURE.md, memory).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from choir.core.memory.access import Viewer
from choir.core.memory.knowledge.graph import GraphFilter, MemoryScope
from choir.core.memory.recall import Recalled, fill
from choir.daemon.agents.host_tools import HostToolCall
from choir.daemon.memory.search.readable import may_read
from choir.errors import ChoirError
from choir.protocol import ToolResult

if TYPE_CHECKING:
    from choir.daemon.memory.embedding.provider import Vector
    from choir.daemon.memory.store import MemoryStore
    from choir.store.memory.search import MemoryHit

RECALL: Final = "choir.memory.recall"
TIMEOUT: Final = "recall_timeout"
WARM_EMBED_S: Final = 30.0
"""How long a warm-up waits for the embedder's first load."""
MAX_TEXT_CHARS: Final = 4_000
"""Of a long message, what the search looks at (its start)."""


@dataclass(frozen=True)
class MemoryRecall:
    """The handler of `choir.memory.recall`."""

    parts: Callable[[], Awaitable[tuple[MemoryStore, object]]]
    """The store, once choird's memory has started (`tools.MemoryParts`)."""
    embed_query: Callable[..., Awaitable[Vector | None]]
    """(text, timeout_s, agent_id=...) → the vector, or None (`tools.QueryEmbedder`)."""
    current: Callable[[str], bool]
    """Whether an agent's vectors are the configured model's (else no query vector)."""
    scope: Callable[[str, str | None], MemoryScope]
    """(agent, the session's user) → the agent's memories that user's session may read
    (`access.MemoryGate.scope`): a recall never puts another user's item (personal, or derived
    from that user's sessions) in a prompt."""
    knowledge_exists: Callable[[str], Awaitable[bool]] | None = None
    """Whether an agent has any knowledge item, asked without loading memory
    (`store.memory.work.knowledge_exists`); None: taken as yes."""
    _known: set[str] = field(default_factory=set, compare=False, repr=False)
    """Agents known to have knowledge: not asked again."""

    async def __call__(self, call: HostToolCall) -> ToolResult:
        started = time.monotonic()
        try:
            text, budget, deadline_s = _arguments(call.input)
        except ValueError as bad:
            return ToolResult.fail("invalid_input", str(bad))
        if call.input.get("warm") is True:
            async with asyncio.timeout(deadline_s):
                await self._warm(call.context.agent_id)
            return ToolResult.ok("memory ready for recalls", items=[], tokens=0)
        if budget == 0 or not text.strip():
            return ToolResult.ok("nothing to recall", items=[], tokens=0)
        try:
            async with asyncio.timeout(deadline_s):
                return await self._recall(call, text, budget, deadline_s)
        except TimeoutError:
            took = round((time.monotonic() - started) * 1000)
            return ToolResult.fail(
                TIMEOUT, f"the search took longer than its {took} ms deadline; nothing recalled"
            )
        except ChoirError as err:
            return ToolResult.fail("memory_unavailable", err.message)

    async def _anything(self, agent_id: str) -> bool:
        if agent_id in self._known or self.knowledge_exists is None:
            return True
        if await self.knowledge_exists(agent_id):
            self._known.add(agent_id)
            return True
        return False

    async def _warm(self, agent_id: str) -> None:
        if not await self._anything(agent_id):
            return
        store, _ = await self.parts()
        await store.warm_bm25(agent_id)  # the session start's pre-warm, if under way
        if self.current(agent_id):
            await self.embed_query("warm up", WARM_EMBED_S)  # billed to nobody: no agent_id

    async def _recall(
        self, call: HostToolCall, text: str, budget: int, deadline_s: float
    ) -> ToolResult:
        agent_id = call.context.agent_id
        if not await self._anything(agent_id):
            return ToolResult.ok("nothing to recall", items=[], tokens=0)
        user = call.context.bindings.dm
        graph = GraphFilter(scope=self.scope(agent_id, user))
        own = Viewer(user)  # the store filters by `graph` already; this holds if it did not
        vector, note = None, None
        if self.current(agent_id):
            vector = await self.embed_query(text, deadline_s / 2, agent_id=agent_id)
            if vector is None:
                note = "no embedder answered: ranked without similarity"
        store, _ = await self.parts()
        chosen: dict[str, int] = {}

        def choose(hits: list[MemoryHit]) -> list[MemoryHit]:
            readable = [
                hit
                for hit in hits
                if may_read(agent_id, hit.source) and own.sees(hit.source.owner_user)
            ]
            picked = fill([_recalled(hit) for hit in readable], budget)
            chosen.update((item.id, tokens) for item, tokens in picked)
            return [hit for hit in readable if str(hit.source.id) in chosen]

        hits = await store.recall(agent_id, text, vector, choose, graph)
        items = [_recalled(hit) for hit in hits]
        return ToolResult.ok(
            f"{len(items)} item(s) recalled",
            items=[
                {
                    "id": item.id,
                    "name": item.name,
                    "score": round(item.score, 4),
                    "tokens": chosen[item.id],
                    "text": item.text,
                }
                for item in items
            ],
            tokens=sum(chosen.values()),
            note=note,
        )


def _recalled(hit: MemoryHit) -> Recalled:
    return Recalled(str(hit.source.id), hit.source.name, hit.score, hit.text)


def _arguments(args: Mapping[str, Any]) -> tuple[str, int, float]:
    text, budget, deadline = args.get("text"), args.get("budget_tokens"), args.get("deadline_ms")
    if not isinstance(text, str):
        raise ValueError("text must be the user message's text")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError("budget_tokens must be an integer from 0")
    if isinstance(deadline, bool) or not isinstance(deadline, int) or not 1 <= deadline <= 60_000:
        raise ValueError("deadline_ms must be an integer from 1 to 60000")
    return text[:MAX_TEXT_CHARS], budget, deadline / 1000
