"""The event timeline's ring on its own: bounded memory, pause, history paging, filters, and
the one-line and expanded text of events, huge ones included."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult

from choir.protocol.operator.views import EventView
from tui.widgets.event_text import DETAIL_CHARS, SUMMARY_CHARS, detail, summary
from tui.widgets.timeline import KIND, LANE, REV, EventFilter, Timeline, row_of


def event(rev: int, lane: str = "edge", kind: str = "user_msg", **payload: Any) -> EventView:
    return EventView(
        rev=rev,
        lane=lane,
        event_type=kind,
        created_at="2026-03-14T09:26:53.123456+00:00",
        hash="ab" * 32,
        payload=payload or {"text": f"message {rev}"},
        artifact=None,
    )


class Holder(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.older: list[int] = []

    def compose(self) -> ComposeResult:
        yield Timeline(capacity=100)

    def on_timeline_need_older(self, message: Timeline.NeedOlder) -> None:
        self.older.append(message.before_rev)


async def test_the_ring_keeps_the_newest_rows_up_to_its_capacity():
    app = Holder()
    async with app.run_test(size=(80, 20)) as pilot:
        line = app.query_one(Timeline)
        line.append([row_of(event(rev)) for rev in range(1, 251)])
        line.append([row_of(event(rev)) for rev in range(240, 260)])  # overlap: skipped
        await pilot.pause()
        assert (len(line.rows), line.first_rev, line.last_rev) == (100, 160, 259)
        assert line.follow
        assert line.current()[REV] == 259  # type: ignore[index]


async def test_paused_rows_are_held_then_shown_and_held_rows_are_bounded_too():
    app = Holder()
    async with app.run_test(size=(80, 20)) as pilot:
        line = app.query_one(Timeline)
        line.append([row_of(event(1))])
        line.set_paused(True)
        line.append([row_of(event(rev)) for rev in range(2, 152)])
        assert (len(line.rows), line.held) == (1, 150)
        line.set_paused(False)
        await pilot.pause()
        assert (line.first_rev, line.last_rev, len(line.rows)) == (52, 151, 100)


async def test_older_pages_prepend_and_detach_the_ring_from_the_live_tail():
    app = Holder()
    async with app.run_test(size=(80, 20)) as pilot:
        line = app.query_one(Timeline)
        line.append([row_of(event(rev)) for rev in range(500, 560)])
        line.action_top()
        await pilot.pause()
        assert app.older == [500]
        line.prepend([row_of(event(rev)) for rev in range(450, 500)])
        await pilot.pause()
        assert (line.first_rev, line.last_rev, line.detached) == (450, 549, True)
        line.append([row_of(event(600))])  # live rows wait while detached
        assert (line.last_rev, line.held) == (549, 1)
        line.replace([row_of(event(rev)) for rev in range(590, 601)], detached=False)
        assert (line.first_rev, line.last_rev, line.detached, line.held) == (590, 600, False, 0)


async def test_a_filter_shows_matching_lanes_and_types_and_keeps_the_cursor_on_its_event():
    app = Holder()
    async with app.run_test(size=(80, 20)):
        line = app.query_one(Timeline)
        kinds = ["user_msg", "tool_call_committed", "tool_result_committed", "model_output"]
        line.append(
            [
                row_of(event(rev, "core:a" if rev % 2 else "edge", kinds[rev % 4]))
                for rev in range(1, 41)
            ]
        )
        line.set_filter(EventFilter.parse("lane=core:a type=tool"))
        assert {row[LANE] for row in line.rows} == {"core:a"}
        assert all("tool" in row[KIND] for row in line.rows)
        assert line.jump(21)
        line.set_filter(EventFilter())
        assert line.current()[REV] == 21  # type: ignore[index]
        assert len(line.rows) == 40


def test_filter_words_without_a_key_match_the_type():
    assert EventFilter.parse("core_ lane=edge,core:x") == EventFilter(
        ("edge", "core:x"), ("core_",)
    )


def test_a_huge_payload_is_one_short_line_and_a_truncated_detail_until_asked_for_all():
    huge = event(7, text="x" * 1_000_000)
    line = summary(huge)
    text, left_out = detail(huge)
    whole, none_left = detail(huge, everything=True)
    assert len(line) == SUMMARY_CHARS
    assert line.endswith("…")
    assert len(text) == DETAIL_CHARS
    assert left_out > 900_000
    assert none_left == 0
    assert len(whole) > 1_000_000


def test_summaries_name_what_an_operator_scans_for():
    result = event(
        3,
        kind="tool_result_committed",
        tool="choir.exec",
        result={"status": "error", "error": {"message": "exit 2"}},
        duration_ms=41,
    )
    core = event(
        4,
        kind="core_event_emitted",
        job_name="fix",
        event={"kind": "need_info", "question": "Which branch?"},
    )
    multiline = event(5, text="first line\n\nsecond   line")
    assert summary(result) == "choir.exec error 41 ms: exit 2"
    assert summary(core) == "fix need_info: Which branch?"
    assert summary(multiline) == "first line second line"
    assert summary(event(6, kind="something_new", a=1)) == '{"a": 1}'
