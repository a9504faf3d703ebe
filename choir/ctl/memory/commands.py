"""`choirctl memory`: search an agent's memory, open one item, see what memory holds (§11)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.memory.backfill_tools import backfill_tools
from choir.ctl.memory.curation import about, forget
from choir.ctl.memory.reembed import reembed
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table, warn

if TYPE_CHECKING:
    from choir.protocol.operator.answers import (
        MemoryHitView,
        MemoryItem,
        MemorySearch,
        MemoryStats,
    )

app = typer.Typer(
    rich_markup_mode=None,
    help="Search agents' memory and see what it holds (needs choird).",
    no_args_is_help=True,
)

TEXT_WIDTH = 70
"""Characters of a hit's text shown in the table (--json carries it whole)."""


@app.command("search")
@documented("memory search")
def search(
    agent_id: Annotated[str, typer.Argument(help="Whose memory.", show_default=False)],
    query: Annotated[
        str, typer.Argument(help="What to look for (may be empty for session_detail).")
    ] = "",
    store: Annotated[
        str, typer.Option("--store", help="session (chunks and summaries) or knowledge.")
    ] = "session",
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="hybrid, semantic, text, session_detail (session store) or relevance (knowledge).",
        ),
    ] = "hybrid",
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many (1-100).")] = 10,
    session_id: Annotated[
        str | None,
        typer.Option("--session", help="The promoted session to open (session_detail)."),
    ] = None,
    loc: Annotated[
        str | None, typer.Option("--loc", help="Knowledge: only items at this loc or below it.")
    ] = None,
    kind: Annotated[
        str | None, typer.Option("--type", help="Knowledge: only items of this type.")
    ] = None,
    tags: Annotated[
        list[str] | None,
        typer.Option("--tag", help="Knowledge: only items with this tag (repeat: all of them)."),
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            help="Knowledge: only items of this memory (system, knowledge, app, personal).",
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option("--user", help="Knowledge: only this user's personal items (a DM name)."),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.memory.knowledge import graph_filter
    from choir.ctl.remote import with_choird

    graph = graph_filter(loc, kind, tags, memory, user)
    data = with_choird(
        home,
        lambda choird: choird.memory_search(
            agent_id,
            query,
            store=store,
            mode=mode,
            session_id=session_id,
            limit=limit,
            graph=graph,
        ),
    )
    if data.fallback and not as_json:
        warn(data.fallback)
    emit(data, as_json, lambda: _hits(data))


def _hits(data: MemorySearch) -> None:
    from choir.ctl.render.humanize import one_line

    rows = [
        (hit.id, f"{hit.score:.4f}", _where(hit), hit.memory or "-", one_line(hit.text, TEXT_WIDTH))
        for hit in data.hits
    ]
    print(f"{data.agent_id}'s {data.store} memory, {data.mode} search: {len(rows)} hit(s)")
    # `memory` is a knowledge item's memory class (as `knowledge list` shows it); "-" on a
    # session hit, which has none.
    table(("id", "score", "from", "memory", "text"), rows)


def _where(hit: MemoryHitView) -> str:
    """Where a hit is from, and whose it is (a user's: `[user <dm>]`)."""
    whose = f" [user {hit.user}]" if hit.user else ""
    if hit.store == "knowledge":
        return (f"{hit.name} ({hit.loc})" if hit.loc else hit.name or "knowledge") + whose
    revs = f" revs {hit.first_rev}-{hit.last_rev}" if hit.first_rev is not None else ""
    return f"{hit.session_id} {hit.tier}{revs}{whose}"


@app.command("show")
@documented("memory show")
def show(
    item_id: Annotated[
        str, typer.Argument(help="The item's id, as `choirctl memory search` shows it.")
    ],
    agent_id: Annotated[
        str | None, typer.Option("--agent", help="Look only in this agent's memory.")
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.memory_show(item_id, agent_id=agent_id))
    emit(data, as_json, lambda: _item(data))


def _item(data: MemoryItem) -> None:
    from choir.ctl.memory.knowledge import fields
    from choir.ctl.render.humanize import compact, moment

    if data.knowledge is not None:
        fields(data.knowledge)
        return
    chunk = data.chunk
    assert chunk is not None
    revs = f"{chunk.first_rev}-{chunk.last_rev}" if chunk.first_rev is not None else "-"
    print(f"{'item':<10}{chunk.id} (session chunk of {data.agent_id})")
    print(f"{'session':<10}{chunk.session_id}")
    print(f"{'tier':<10}{chunk.tier} ({chunk.kind}, chunk {chunk.chunk_index})")
    print(f"{'revs':<10}{revs}")
    print(f"{'vector':<10}{'yes' if chunk.has_vector else 'no'}")
    print(f"{'stored':<10}{moment(chunk.created_at)}")
    print("text:")
    print(chunk.text)
    if data.events:
        print("source events:")
        rows = [(e.rev, e.lane, e.event_type, compact(e.payload, 80)) for e in data.events]
        table(("rev", "lane", "event", "payload"), rows)
    if data.events_truncated and chunk.first_rev is not None:
        rest = chunk.first_rev + len(data.events)
        print(f"(more: choirctl session events {chunk.session_id} --from-rev {rest})")


@app.command("stats")
@documented("memory stats")
def stats(
    agent_id: Annotated[
        str | None, typer.Argument(help="One agent (default: every agent).", show_default=False)
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.memory_stats(agent_id))
    emit(data, as_json, lambda: _stats(data))


def _stats(data: MemoryStats) -> None:
    rows = [
        (
            s.agent_id,
            f"{s.chunks.mid_term} ({s.sessions.mid_term} sessions)",
            f"{s.chunks.long_term_summary} ({s.sessions.long_term_summary})",
            f"{s.chunks.long_term_detail} ({s.sessions.long_term_detail})",
            s.knowledge_items,
            s.vectors_missing,
            _size(sum(s.index_bytes.values())),
        )
        for s in data.agents
    ]
    headers = ("agent", "mid-term", "summaries", "detail", "knowledge", "no vector", "indexes")
    table(headers, rows)
    for s in data.agents:
        coverage = "-" if s.vector_coverage is None else f"{s.vector_coverage:.1%}"
        print(
            f"{s.agent_id}: vector coverage {coverage}; sessions waiting to close "
            f"{s.sessions_pending}, without summary {s.sessions_unsummarized}; tool-call rows "
            f"{s.tool_rows}, calls without one {s.tool_calls_undescribed} in "
            f"{s.tool_sessions_undescribed} sessions"
            + (
                f" (choirctl memory backfill-tools {s.agent_id})"
                if s.tool_sessions_undescribed
                else ""
            )
            + f"; summary tree depth {s.tree_depth}"
        )
    e = data.embedding
    print(
        f"embedding: {e.provider} ({e.dimensions} dims), queue {e.queue_depth}, breaker {e.breaker}"
    )
    for s in data.agents:
        if s.reembed is not None:
            warn(s.reembed)


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if count < 1024:
            return f"{count} {unit}"
        count //= 1024
    return f"{count} GiB"


app.command("reembed")(reembed)  # `choir.ctl.memory.reembed`
app.command("about")(about)  # `choir.ctl.memory.curation`
app.command("forget")(forget)
app.command("backfill-tools")(backfill_tools)  # `choir.ctl.memory.backfill_tools`
