"""`Timeline`: the event stream as a virtual list — a bounded ring of rows, a cursor, a filter.

Built on `ScrollView`'s line API: only the rows on screen are ever rendered, so appending is a
list extend and a size change however fast events come (`RichLog` re-renders each line it is
given and manages ~8,500 lines/s; this takes hundreds of thousands). Each row keeps its one-line
text, not the event's payload, so 200,000 rows fit in a few tens of MB; the payload of a row is
read back from choird when it is expanded.

The ring keeps at most `capacity` rows of one contiguous revision range. Rows before it are paged
in on demand (`NeedOlder` when the cursor reaches the top), which may drop the newest rows: the
timeline is then *detached* from the live tail until the operator returns to it (`End`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.widgets.event_text import summary

if TYPE_CHECKING:
    from choir.protocol.operator.views import EventView

DEFAULT_CAPACITY: Final = 200_000
LANE_WIDTH: Final = 18
TYPE_WIDTH: Final = 22

_KIND_STYLES: Final = {
    "user_msg": Style(color="#c678dd", bold=True),
    "agent_replied": Style(color="#c678dd"),
    "model_output": Style(color="#56b6f7"),
    "tool_call_requested": Style(color="#e5c07b"),
    "tool_call_committed": Style(color="#e5c07b"),
    "tool_result_committed": Style(color="#d19a66"),
    "core_started": Style(color="#7ec16e", bold=True),
    "core_stopped": Style(color="#7ec16e"),
    "core_event_emitted": Style(color="#98c379"),
    "cancelled": Style(color="#e06c75", bold=True),
    "injected_instruction": Style(color="#e06c75"),
}
_DIM: Final = Style(color="#7f848e")
_CURSOR: Final = Style(bgcolor="#2c3a4f")


Row = tuple[int, str, str, str, str, str]
"""One event as the timeline keeps it: rev, lane, type, HH:MM:SS.mmm of created_at, the first 8
hex digits of its chain hash, its one-line text. A plain tuple of strings and an int, which the
garbage collector stops tracking: 200,000 of them cost no collection time."""
REV: Final = 0
LANE: Final = 1
KIND: Final = 2
TIME: Final = 3
HASH: Final = 4
TEXT: Final = 5


def row_of(event: EventView) -> Row:
    created = event.created_at or ""
    return (
        event.rev,
        _interned(event.lane),
        _interned(event.event_type),
        created[11:23],
        event.hash[:8],
        summary(event),
    )


_NAMES: dict[str, str] = {}
"""Lane and type names seen, each kept once: 200,000 rows share a handful of strings."""


def _interned(name: str) -> str:
    kept = _NAMES.get(name)
    if kept is None:
        if len(_NAMES) >= 4096:  # not names after all: keep no more
            return name
        kept = _NAMES[name] = name
    return kept


@dataclass(frozen=True)
class EventFilter:
    """Rows whose lane is one of `lanes` and whose type contains one of `kinds` (empty: any)."""

    lanes: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> EventFilter:
        """`lane=edge,core:fix type=tool,core_` — words without `=` match the type."""
        lanes: list[str] = []
        kinds: list[str] = []
        for word in text.split():
            key, eq, value = word.partition("=")
            target = lanes if eq and key == "lane" else kinds
            target.extend(part for part in (value if eq else key).split(",") if part)
        return cls(tuple(lanes), tuple(kinds))

    @property
    def empty(self) -> bool:
        return not self.lanes and not self.kinds

    def __call__(self, row: Row) -> bool:
        if self.lanes and row[LANE] not in self.lanes:
            return False
        return not self.kinds or any(kind in row[KIND] for kind in self.kinds)


class Timeline(ScrollView, can_focus=True):
    """The rows, newest last; follows the tail unless paused, detached or scrolled away."""

    DEFAULT_CSS = """
    Timeline { height: 1fr; scrollbar-size-vertical: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "move(-20)", "Page up", show=False),
        Binding("pagedown", "move(20)", "Page down", show=False),
        Binding("home", "top", "Oldest", show=False),
        Binding("end", "bottom", "Live", show=False),
        Binding("enter", "expand", "Expand"),
    ]

    class NeedOlder(Message):
        """The cursor reached the oldest row held and older ones exist: page them in."""

        def __init__(self, before_rev: int) -> None:
            super().__init__()
            self.before_rev = before_rev

    class NeedLive(Message):
        """The operator returned to the tail while detached: reload it."""

    class Expand(Message):
        """The operator asked for the whole event at `rev`."""

        def __init__(self, rev: int) -> None:
            super().__init__()
            self.rev = rev

    def __init__(self, *, capacity: int = DEFAULT_CAPACITY, id: str | None = None) -> None:
        super().__init__(id=id)
        self.capacity = capacity
        self._all: list[Row] = []
        self._shown: list[Row] | None = None
        """The filtered rows, or None when no filter is set (then `_all` is shown)."""
        self._filter = EventFilter()
        self.cursor = 0
        self.follow = True
        """Keep the cursor on the newest row as rows arrive."""
        self.detached = False
        """The ring does not reach the live tail (history was paged in or jumped to)."""
        self.paused = False
        self._held: list[Row] = []
        """Rows that arrived while paused or detached (bounded like the ring)."""
        self.skipped = 0
        """Rows that arrived while paused or detached and were let go (paged back later)."""
        self._loading = False

    # what is shown

    @property
    def rows(self) -> Sequence[Row]:
        return self._all if self._shown is None else self._shown

    @property
    def held(self) -> int:
        """Rows waiting to be shown (paused) plus those let go."""
        return len(self._held) + self.skipped

    @property
    def first_rev(self) -> int | None:
        return self._all[0][REV] if self._all else None

    @property
    def last_rev(self) -> int | None:
        return self._all[-1][REV] if self._all else None

    def current(self) -> Row | None:
        rows = self.rows
        return rows[self.cursor] if 0 <= self.cursor < len(rows) else None

    # feeding it

    def append(self, rows: Iterable[Row]) -> None:
        """New live rows (rev order); ones at or below the last rev held are skipped."""
        last = self.last_rev
        fresh = [row for row in rows if last is None or row[REV] > last]
        if not fresh:
            return
        if self.paused or self.detached:
            self._hold(fresh)
            return
        self._extend(fresh)

    def _hold(self, rows: list[Row]) -> None:
        if self.detached:
            self.skipped += len(rows)
            return
        self._held.extend(rows)
        over = len(self._held) - self.capacity
        if over > 0:
            del self._held[:over]
            self.skipped += over

    def _extend(self, rows: list[Row]) -> None:
        self._all.extend(rows)
        over = len(self._all) - self.capacity
        if over > 0:
            del self._all[:over]
        if self._shown is not None:
            if over > 0:
                self._shown = [row for row in self._all if self._filter(row)]
            else:
                self._shown.extend(row for row in rows if self._filter(row))
        elif over > 0 and not self.follow:
            self.cursor = max(self.cursor - over, 0)
        self._resized()

    def prepend(self, rows: Sequence[Row]) -> None:
        """Older rows paged in from choird; the newest ones go if the ring overflows."""
        self._loading = False
        first = self.first_rev
        older = [row for row in rows if first is None or row[REV] < first]
        if not older:
            return
        self._all[:0] = older
        over = len(self._all) - self.capacity
        if over > 0:
            del self._all[-over:]
            self.detached = True
        self._refilter()
        self.cursor += len([row for row in older if self._filter(row)])
        self._resized()

    def replace(self, rows: Sequence[Row], *, detached: bool, at_rev: int | None = None) -> None:
        """Show exactly `rows` (a jump into history, or the reloaded tail)."""
        self._loading = False
        self._all = list(rows[-self.capacity :])
        self.detached = detached
        self._held.clear()
        self.skipped = 0
        self._refilter()
        self.follow = not detached and at_rev is None
        self.cursor = len(self.rows) - 1 if self.follow else self._index_of(at_rev or 0)
        self._resized()

    def clear(self) -> None:
        self.replace([], detached=False)

    def set_filter(self, event_filter: EventFilter) -> None:
        current = self.current()
        self._filter = event_filter
        self._refilter()
        self.cursor = self._index_of(current[REV]) if current and not self.follow else self._end()
        self._resized()

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        if not paused and self._held:
            held, self._held = self._held, []
            self._extend(held)
        self.refresh()

    def jump(self, rev: int) -> bool:
        """Put the cursor on `rev` if it is held; False when it must be fetched."""
        if not self._all or not self.first_rev <= rev <= self.last_rev:  # type: ignore[operator]
            return False
        self.follow = False
        self.cursor = self._index_of(rev)
        self._resized()
        return True

    # keys

    def action_move(self, delta: int) -> None:
        rows = self.rows
        if not rows:
            return
        self.cursor = min(max(self.cursor + delta, 0), len(rows) - 1)
        self.follow = self.cursor == len(rows) - 1 and not self.detached
        if self.cursor == 0 and delta < 0:
            self._ask_older()
        self._scroll_to_cursor()

    def action_top(self) -> None:
        self.cursor = 0
        self.follow = False
        self._ask_older()
        self._scroll_to_cursor()

    def action_bottom(self) -> None:
        if self.detached:
            self.post_message(self.NeedLive())
            return
        self.follow = True
        self.cursor = self._end()
        self._scroll_to_cursor()

    def action_expand(self) -> None:
        row = self.current()
        if row is not None:
            self.post_message(self.Expand(row[REV]))

    def _ask_older(self) -> None:
        first = self.first_rev
        if first is not None and first > 1 and not self._loading:
            self._loading = True
            self.post_message(self.NeedOlder(first))

    # drawing

    def render_line(self, y: int) -> Strip:
        scroll_y = self.scroll_offset.y
        index = scroll_y + y
        width = self.size.width
        rows = self.rows
        if index >= len(rows):
            return Strip.blank(width)
        return self._strip(rows[index], width, index == self.cursor and self.has_focus)

    def _strip(self, row: Row, width: int, selected: bool) -> Strip:
        lane_style = Style(color="#56b6f7") if row[LANE] == "edge" else Style(color="#e5c07b")
        segments = [
            Segment(f"{row[REV]:>7} ", _DIM),
            Segment(f"{row[TIME]:<12} ", _DIM),
            Segment(f"{row[LANE][:LANE_WIDTH]:<{LANE_WIDTH}} ", lane_style),
            Segment(f"{row[KIND][:TYPE_WIDTH]:<{TYPE_WIDTH}} ", _KIND_STYLES.get(row[KIND], _DIM)),
            Segment(f"#{row[HASH]:<8} ", _DIM),
            Segment(row[TEXT]),
        ]
        strip = Strip(segments).crop_extend(0, width, None)
        return strip.apply_style(_CURSOR) if selected else strip

    def _resized(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows))
        if self.follow:
            self.cursor = self._end()
        self._scroll_to_cursor()
        self.refresh()

    def _scroll_to_cursor(self) -> None:
        height = max(self.scrollable_content_region.height, 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)
        self.refresh()

    def _refilter(self) -> None:
        self._shown = None if self._filter.empty else [r for r in self._all if self._filter(r)]

    def _end(self) -> int:
        return max(len(self.rows) - 1, 0)

    def _index_of(self, rev: int) -> int:
        """The index of the first shown row at or after `rev` (binary search)."""
        rows = self.rows
        low, high = 0, len(rows)
        while low < high:
            middle = (low + high) // 2
            if rows[middle][REV] < rev:
                low = middle + 1
            else:
                high = middle
        return min(low, max(len(rows) - 1, 0))

    def on_resize(self) -> None:
        self._resized()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
