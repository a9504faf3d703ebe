"""The Memory tab: the selected agent's memory at a glance, a search box, its knowledge, and
one item opened with the session events it was cut from (§11, issue 14's operator surface), or
a knowledge item with its type, loc, tags and edges (seed design 003).

Nothing here polls: the stats line is read with `memory.stats` on mount, after a resync, when
another agent is selected and with `f`; results come from `memory.search` (enter in the search
box) or `knowledge.list` (`k`); enter on a row opens it with `memory.show`, `e` opens a
knowledge item's source (`knowledge.source`: the session events its content came from), `a`
lists what the agent learnt from a user (`memory.about`), `x` forgets the highlighted knowledge
item after a confirmation (`memory.forget`), `v` browses a session's messages in order
(`session.messages`: the selected agent's session by default; `n` reads the next page), `d`
goes one step down the summary tree from the highlighted knowledge row (`knowledge.expand`: a
roll-up's summaries, a summary's archives and tool leaf as rows `d` expands again, a leaf's
session messages as rows, `n` the next page; on a session hit, `d` and `e` browse its
session's messages). `s`
switches the store searched (session, knowledge), `o` the mode (hybrid, semantic, text and,
for knowledge, relevance). A search that fell back to text (no embedder answered) says so
above the results.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import DataTable, Input, Static

from choir.errors import ChoirError
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import MEMORY_MODES, MEMORY_STORES, OperatorVerb
from tui.dialogs import ConfirmDialog, TextPrompt
from tui.views.base import ChoirView

if TYPE_CHECKING:
    from choir.protocol.base import WireModel
    from choir.protocol.operator import answers as a
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")

A = TypeVar("A", bound="WireModel")

STORES: Final = MEMORY_STORES
MODES: Final = tuple(mode for mode in MEMORY_MODES if mode != "session_detail")
"""The modes `o` cycles through (`session_detail` is choirctl's `--mode session_detail`)."""
TEXT_WIDTH: Final = 200
RESOLVER: Final = "choir tui"
"""Who the console records as having written or forgotten an item."""
EMPTY: Final = "Select an agent (1 or [ ]), then type a query and press enter; k lists knowledge."


class MemoryView(ChoirView):
    """Stats, search and knowledge of the selected agent; enter opens the highlighted item."""

    VIEW_ID = "memory"
    TITLE = "Memory"

    DEFAULT_CSS = """
    MemoryView #memory-stats { height: auto; padding: 0 1; }
    MemoryView #memory-query { height: 3; }
    MemoryView #memory-what { height: 1; padding: 0 1; color: $text-muted; }
    MemoryView #memory-results { height: 1fr; min-height: 3; }
    MemoryView #memory-detail-box {
        height: 1fr; min-height: 3; border-top: solid $primary-darken-2; padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search"),
        Binding("s", "store", "Store"),
        Binding("o", "mode", "Mode"),
        Binding("k", "knowledge", "Knowledge"),
        Binding("f", "refresh", "Refresh"),
        Binding("e", "source", "Source"),
        Binding("a", "about", "About a user"),
        Binding("x", "forget", "Forget"),
        Binding("v", "browse", "Messages"),
        Binding("d", "expand", "Expand"),
        Binding("n", "more", "Next page", show=False),
        Binding("escape", "leave", "Leave search", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.store = STORES[0]
        self.mode = MODES[0]
        self.stats: a.AgentMemoryStats | None = None
        self.embedding: a.EmbeddingView | None = None
        self.what = EMPTY
        """The line above the results: what they are."""
        self.rows: list[tuple[str, str, str, str]] = []
        """(id, score, from, text) of the results shown."""
        self.hit_sessions: dict[str, str] = {}
        """The session of each session hit shown (chunk id → session id): `d` and `e` on one
        browse its session's messages, as it is not a knowledge item."""
        self.browsing: tuple[str, int | None] | None = None
        """The session whose messages are shown and the offset of its next page (None: the
        last page is shown); None when the results are not a session's messages."""
        self.expanding: tuple[str, int | None] | None = None
        """The leaf whose session messages are shown (`d`) and the offset of their next page
        (None: the last page is shown); None when the results are not a leaf's messages."""

    def compose(self) -> ComposeResult:
        yield Static("", id="memory-stats", markup=False)
        yield Input(placeholder="search memory (enter)", id="memory-query")
        yield Static("", id="memory-what", markup=False)
        yield DataTable(id="memory-results", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="memory-detail-box"):
            yield Static("", id="memory-detail", markup=False)

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#memory-results", DataTable)

    def on_mount(self) -> None:
        for column in ("id", "score", "from", "text"):
            self.table.add_column(column, key=column)
        super().on_mount()
        self.read_stats()

    def on_resynced(self) -> None:
        super().on_resynced()
        self.read_stats()

    def on_agent_selected(self) -> None:
        self.rows, self.what = [], EMPTY
        self.query_one("#memory-detail", Static).update("")
        super().on_agent_selected()
        self.read_stats()

    # drawing

    def redraw(self) -> None:
        self.query_one("#memory-stats", Static).update(self.stats_text())
        self.query_one("#memory-what", Static).update(f"{self.what}   [{self.store} · {self.mode}]")
        table = self.table
        table.clear()
        for row in self.rows:
            shown_id = "" if row[0].startswith(MESSAGE) else row[0][:8]
            table.add_row(shown_id, row[1], row[2], flat(row[3]), key=row[0])

    def stats_text(self) -> Text:
        agent = self.selected_agent
        if agent is None:
            return Text("no agent selected", "dim")
        stats = self.stats
        if stats is None or stats.agent_id != agent:
            return Text(f"{agent}: reading memory…", "dim")
        chunks, sessions = stats.chunks, stats.sessions
        text = Text(agent, "bold")
        text.append(
            f"  mid-term {chunks.mid_term} ({sessions.mid_term} sessions) · summaries "
            f"{chunks.long_term_summary} · detail {chunks.long_term_detail} · knowledge "
            f"{stats.knowledge_items} · no vector {stats.vectors_missing} · indexes "
            f"{sum(stats.index_bytes.values()) // 1024} KiB"
        )
        # what is still to do, and the summary tree: `choirctl memory stats`' second line
        coverage = "-" if stats.vector_coverage is None else f"{stats.vector_coverage:.1%}"
        text.append(
            f"\nvector coverage {coverage} · sessions to close {stats.sessions_pending} · "
            f"without summary {stats.sessions_unsummarized} · tool-call rows {stats.tool_rows}"
            f" · tree depth {stats.tree_depth}",
            "dim",
        )
        embedding = self.embedding
        if embedding is not None:
            style = "dim" if embedding.breaker == "closed" else "red"
            text.append(
                f"\nembedding {embedding.provider} ({embedding.dimensions} dims) · queue "
                f"{embedding.queue_depth} · breaker {embedding.breaker}",
                style,
            )
        return text

    def show(self, what: str, rows: list[tuple[str, str, str, str]]) -> None:
        if rows is not self.rows and not (rows and rows[0][0].startswith(MESSAGE)):
            self.browsing = self.expanding = None
        self.what, self.rows = what, rows
        if self.is_attached:  # the console may have closed while the call ran
            with contextlib.suppress(NoMatches):
                self.redraw()

    # reading

    def _agent_or_warn(self) -> str | None:
        """The selected agent; None, with a warning to select one, when none is."""
        agent = self.selected_agent
        if agent is None:
            self.notify("Select an agent first.", severity="warning")
        return agent

    async def _ask(
        self, title: str, verb: OperatorVerb, answer: type[A], **payload: Any
    ) -> A | None:
        """choird's answer to `verb`; None once its refusal is notified under `title`."""
        try:
            return await self.bridge.ask(verb, answer, **payload)
        except ChoirError as error:
            self.notify(error.message, title=title, severity="error", markup=False)
            return None

    @work(group="memory-stats", exclusive=True)
    async def read_stats(self) -> None:
        agent = self.selected_agent
        if agent is None or not self.bridge.connected:
            return  # the resync or the selection reads it
        answer = await self._ask(
            "memory stats", OperatorVerb.MEMORY_STATS, a.MemoryStats, agent_id=agent
        )
        if answer is None:
            return
        self.stats, self.embedding = answer.agents[0], answer.embedding
        self.show(self.what, self.rows)

    @on(Input.Submitted, "#memory-query")
    def _submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.search(event.value)

    @work(group="memory-search", exclusive=True)
    async def search(self, query: str) -> None:
        if (agent := self._agent_or_warn()) is None:
            return
        found = await self._ask(
            "memory search",
            OperatorVerb.MEMORY_SEARCH,
            a.MemorySearch,
            agent_id=agent,
            query=query,
            store=self.store,
            mode=self.mode,
            limit=50,
        )
        if found is None:
            return
        what = f"{len(found.hits)} hit(s) for {query!r} ({found.mode})"
        if found.fallback:
            what += f" — {found.fallback}"
        self.show(what, [hit_row(hit) for hit in found.hits])
        self.hit_sessions = {
            hit.id: hit.session_id
            for hit in found.hits
            if hit.store != "knowledge" and hit.session_id is not None
        }
        self.table.focus()

    @work(group="memory-search", exclusive=True)
    async def list_knowledge(self) -> None:
        if (agent := self._agent_or_warn()) is None:
            return
        page = await self._ask(
            "knowledge list",
            OperatorVerb.KNOWLEDGE_LIST,
            a.KnowledgeList,
            agent_id=agent,
            limit=200,
        )
        if page is None:
            return
        more = " (first 200: choirctl knowledge list for the rest)" if page.next_after else ""
        self.show(f"{len(page.items)} knowledge item(s){more}", [item_row(i) for i in page.items])
        self.table.focus()

    @on(DataTable.RowSelected, "#memory-results")
    def _selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key is None:
            return
        if key.startswith(MESSAGE):  # a browsed message: its whole text below
            row = next(row for row in self.rows if row[0] == key)
            with contextlib.suppress(NoMatches):
                self.query_one("#memory-detail", Static).update(f"{row[2]}\n{row[3]}")
            return
        self.open(str(key))

    @work(group="memory-open", exclusive=True)
    async def open(self, item_id: str) -> None:
        item = await self._ask(
            "memory show",
            OperatorVerb.MEMORY_SHOW,
            a.MemoryItem,
            item_id=item_id,
            agent_id=self.selected_agent,
        )
        if item is None:
            return
        with contextlib.suppress(NoMatches):
            self.query_one("#memory-detail", Static).update(item_text(item))

    @work(group="memory-open", exclusive=True)
    async def open_source(self, item_id: str) -> None:
        if (agent := self._agent_or_warn()) is None:
            return
        found = await self._ask(
            "knowledge source",
            OperatorVerb.KNOWLEDGE_SOURCE,
            a.KnowledgeSource,
            agent_id=agent,
            ref=item_id,
        )
        if found is None:
            return
        with contextlib.suppress(NoMatches):
            self.query_one("#memory-detail", Static).update(source_text(found))

    @work(group="memory-search", exclusive=True)
    async def about(self) -> None:
        if (agent := self._agent_or_warn()) is None:
            return
        user = await self.app.push_screen_wait(
            TextPrompt(f"What has {agent} learnt from which user (a DM name or user id)?")
        )
        if not user:
            return
        found = await self._ask(
            "memory about",
            OperatorVerb.MEMORY_ABOUT,
            a.MemoryAbout,
            agent_id=agent,
            user=user,
            limit=200,
        )
        if found is None:
            return
        self.show(
            f"{len(found.items)} item(s) {agent} learnt from {found.user} (x forgets one)",
            [item_row(item) for item in found.items],
        )
        self.table.focus()

    @work(group="memory-open", exclusive=True)
    async def forget(self, item_id: str, label: str) -> None:
        agent = self.selected_agent
        if agent is None:
            return
        question = f"Forget {label} from {agent}'s memory, with its versions and vector?"
        dialog = ConfirmDialog(question, "choirctl memory forget", danger=True)
        if not await self.app.push_screen_wait(dialog):
            return
        gone = await self._ask(
            "memory forget",
            OperatorVerb.MEMORY_FORGET,
            a.MemoryForgotten,
            agent_id=agent,
            ref=item_id,
            by=RESOLVER,
        )
        if gone is None:
            return
        self.notify(f"forgot {label} ({gone.versions} version(s))", markup=False)
        self.show(self.what, [row for row in self.rows if row[0] != item_id])
        with contextlib.suppress(NoMatches):
            self.query_one("#memory-detail", Static).update("")

    @work(group="memory-search", exclusive=True)
    async def browse(self, session_id: str | None = None, offset: int = 0) -> None:
        if session_id is None:
            session_id = await self.app.push_screen_wait(
                TextPrompt("Browse which session's messages?", value=self.selected_session or "")
            )
            if not session_id:
                return
        page = await self._ask(
            "session messages",
            OperatorVerb.SESSION_MESSAGES,
            a.SessionMessages,
            session_id=session_id,
            offset=offset,
            limit=100,
        )
        if page is None:
            return
        kept = self.rows if offset else []
        rows = kept + [
            message_row(len(kept) + n, message) for n, message in enumerate(page.messages)
        ]
        self.browsing, self.expanding = (session_id, page.next_offset), None
        more = "; n: the next page" if page.next_offset is not None else "; the end"
        self.show(f"{len(rows)} message(s) of {page.agent_id}'s session {session_id}{more}", rows)
        self.table.focus()

    @work(group="memory-search", exclusive=True)
    async def expand_item(self, ref: str, offset: int | None = None) -> None:
        """One step down the summary tree from `ref`: its sources as rows, or a leaf's session
        messages (from `offset`: the next page, appended)."""
        if (agent := self._agent_or_warn()) is None:
            return
        found = await self._ask(
            "knowledge expand",
            OperatorVerb.KNOWLEDGE_EXPAND,
            a.KnowledgeExpansion,
            agent_id=agent,
            ref=ref,
            offset=offset,
            limit=100,
        )
        if found is None:
            return
        with contextlib.suppress(NoMatches):
            self.query_one("#memory-detail", Static).update(expansion_text(found))
        name = found.item.name
        if found.session_id is None:
            self.show(
                f"{name} ({found.level}): {len(found.sources)} source(s); d expands one",
                [item_row(source) for source in found.sources],
            )
            self.table.focus()
            return
        kept = self.rows if offset is not None else []
        rows = kept + [
            message_row(len(kept) + n, message) for n, message in enumerate(found.messages)
        ]
        self.browsing, self.expanding = None, (name, found.next_offset)
        more = "; n: the next page" if found.next_offset is not None else "; the end"
        self.show(
            f"{len(rows)} message(s) of {name} (session {found.session_id}, revs "
            f"{found.from_rev}-{found.upto_rev}){more}",
            rows,
        )
        self.table.focus()

    # actions (the palette's "Memory: search…" and "Knowledge: list…" run the first and third)

    def focus_main(self) -> None:
        """The results: the tab's letters work at once (`/` goes to the search box)."""
        self.table.focus()

    def action_leave(self) -> None:
        self.table.focus()

    def action_search(self) -> None:
        self.query_one("#memory-query", Input).focus()

    def action_store(self) -> None:
        self.store = STORES[(STORES.index(self.store) + 1) % len(STORES)]
        if self.mode not in self._modes():
            self.mode = MODES[0]
        self.show(self.what, self.rows)

    def action_mode(self) -> None:
        modes = self._modes()
        self.mode = modes[(modes.index(self.mode) + 1) % len(modes)]
        self.show(self.what, self.rows)

    def _modes(self) -> tuple[str, ...]:
        """The modes of the store searched: relevance is knowledge's only."""
        return tuple(m for m in MODES if self.store == "knowledge" or m != "relevance")

    def action_knowledge(self) -> None:
        self.list_knowledge()

    def action_refresh(self) -> None:
        self.read_stats()

    def action_source(self) -> None:
        """Open the highlighted knowledge item's source events."""
        if (row := self._highlighted()) is None:
            return
        if (session_id := self.hit_sessions.get(row[0])) is not None:
            self.browse(session_id)
            return
        self.open_source(row[0])

    def action_about(self) -> None:
        self.about()

    def action_browse(self) -> None:
        self.browse()

    def action_more(self) -> None:
        """The next page of the session browsed, or of the leaf expanded."""
        if self.expanding is not None and self.expanding[1] is not None:
            self.expand_item(*self.expanding)
            return
        if self.browsing is None or self.browsing[1] is None:
            return
        self.browse(self.browsing[0], self.browsing[1])

    def action_expand(self) -> None:
        """One step down the summary tree from the highlighted knowledge row."""
        if (row := self._highlighted()) is None:
            return
        if row[0].startswith(MESSAGE):
            self.notify("A message is a leaf's event: nothing below it.", severity="warning")
            return
        if (session_id := self.hit_sessions.get(row[0])) is not None:
            self.browse(session_id)  # a chunk of messages: below it, the messages themselves
            return
        self.expand_item(row[0])

    def action_forget(self) -> None:
        """Forget the highlighted knowledge item, once confirmed."""
        if (row := self._highlighted()) is not None:
            self.forget(row[0], row[2])

    def _highlighted(self) -> tuple[str, str, str, str] | None:
        table = self.table
        if not self.rows or table.cursor_row >= len(self.rows):
            self.notify("List knowledge (k) or search it, then pick an item.", severity="warning")
            return None
        return self.rows[table.cursor_row]


MESSAGE: Final = "message:"
"""The key prefix of a browsed message's row (`message:<n>`), not an item id."""


def message_row(number: int, message: a.SessionMessage) -> tuple[str, str, str, str]:
    """A browsed message: its number in the browse as key, its rev, who said it, its text."""
    cut = " (cut)" if message.cut else ""
    return f"{MESSAGE}{number}", f"rev {message.rev}", f"{message.who}{cut}", message.text


def hit_row(hit: a.MemoryHitView) -> tuple[str, str, str, str]:
    whose = f"of {hit.user}" if hit.user else ""  # a user's item or session row
    if hit.store == "knowledge":
        where = f"{hit.name} ({hit.loc})" if hit.loc else hit.name or "knowledge"
        if hit.memory:  # its memory, as the knowledge list shows it: `personal of alice`
            whose = " ".join(part for part in (hit.memory, whose) if part)
    else:
        revs = f" revs {hit.first_rev}-{hit.last_rev}" if hit.first_rev is not None else ""
        where = f"{hit.tier}{revs}"
    return hit.id, f"{hit.score:.4f}", where + (f" · {whose}" if whose else ""), flat(hit.text)


def item_row(item: a.KnowledgeView) -> tuple[str, str, str, str]:
    vector = "" if item.has_vector else " (no vector)"
    loc = f" ({item.loc})" if item.loc else ""
    return item.id, "", f"{item.name}{loc}{vector} · {memory_of(item)}", flat(item.text)


def memory_of(item: a.KnowledgeView) -> str:
    """The memory holding an item: `app`, `personal of alice`."""
    return item.memory + (f" of {item.user}" if item.user else "")


def _source_line(found: a.ProvenanceView | None) -> str:
    if found is None:
        return "unknown"
    if found.session_id is None:
        return f"operator via {found.by}"
    user = f" with {found.user}" if found.user else ""
    return f"{found.agent}'s session {found.session_id}{user}, call {found.call_id}"


def flat(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= TEXT_WIDTH else one[: TEXT_WIDTH - 1] + "…"


def source_text(found: a.KnowledgeSource) -> Text:
    """Where a knowledge item came from, and its source events one a line."""
    text = Text()
    text.append(f"source of {found.name}", "bold")
    text.append(f"  {found.note}\n")
    for event in found.events:
        text.append(f"{event.rev:>5} {event.lane:<20} {event.kind:<22} ", "dim")
        text.append(flat(event.text))
        text.append("\n")
    return text


def expansion_text(found: a.KnowledgeExpansion) -> Text:
    """The item expanded: its name, level and text (its sources or events are the rows)."""
    text = Text()
    text.append(found.item.name, "bold")
    text.append(f"  {found.level} · {memory_of(found.item)}\n", "dim")
    text.append(found.item.text)
    return text


def item_text(item: a.MemoryItem) -> Text:
    """The opened item: its fields, its text, and a chunk's source events one a line."""
    text = Text()
    if item.knowledge is not None:
        k = item.knowledge
        text.append(f"knowledge {k.id}", "bold")
        text.append(f"  {k.name} v{k.version} · updated {(k.updated_at or '-')[:19]}\n")
        tags = f" · tags {', '.join(k.tags)}" if k.tags else ""
        memory = f" · {k.memory} memory" + (f" of {k.user}" if k.user else "")
        text.append(f"{k.type} · loc {k.loc or '-'}{tags}{memory}\n", "dim")
        text.append(f"source: {_source_line(k.provenance)} (e opens it)\n", "dim")
        for edge in k.edges or ():
            arrow = (
                f"→ {edge.edge} {edge.name}"
                if edge.direction == "out"
                else (f"← {edge.name} {edge.edge} this")
            )
            text.append(f"{arrow}\n", "dim")
        text.append(k.text)
        return text
    chunk = item.chunk
    assert chunk is not None
    revs = f"revs {chunk.first_rev}-{chunk.last_rev}" if chunk.first_rev is not None else "summary"
    text.append(f"chunk {chunk.id}", "bold")
    text.append(f"  {chunk.session_id} · {chunk.tier} · {chunk.kind} · {revs}\n")
    text.append(chunk.text)
    if item.events:
        text.append("\nsource events\n", "bold")
    for event in item.events:
        body = event.payload.get("text") if isinstance(event.payload.get("text"), str) else None
        text.append(f"{event.rev:>5} {event.lane:<20} {event.event_type:<16} ", "dim")
        text.append(flat(body) if body else flat(json.dumps(event.payload, ensure_ascii=False)))
        text.append("\n")
    if item.events_truncated:
        text.append("(more events: choirctl session events)", "dim")
    return text
