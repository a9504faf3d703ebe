"""Compaction archives, the pure part: names, the lane's marker, and the entry an event makes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

from choir.agent.kernel.commitlog import CommitLog
from choir.core.memory.compaction import (
    CompactionApplied,
    CompactionPolicy,
    apply_compaction,
    compaction_request,
)
from choir.core.memory.summaries.archives import (
    ARCHIVE_KEY,
    TEXT_MAX_BYTES,
    archive_entry,
    archive_marker,
    archive_name,
    fitted,
    iso_minute,
    marked,
)
from choir.core.memory.working import WorkingMemory
from choir.core.prompt.build import PromptSize
from choir.protocol import AgentReplied, UserMsg
from choir.protocol.log.events import CompactionArchive, MemoryWriteCommitted
from choir.protocol.tooling.memory import Fact, MemoryDelta


def _applied(
    mode: str = "append", update: str = "The user asked about ports."
) -> tuple[CompactionApplied, CompactionArchive, CommitLog]:
    log = CommitLog()
    for turn in range(4):
        log.commit("edge", UserMsg(text=f"question {turn}"))
        log.commit("edge", AgentReplied(text=f"answer {turn}"))
    memory = WorkingMemory("edge").observe_all(log).request_compaction()
    request = compaction_request(memory, PromptSize(0, 0), CompactionPolicy())
    assert request is not None
    archive = CompactionArchive(
        name=archive_name("s-0123456789abcdef", request.upto_rev),
        folded_from_rev=request.folded[0].rev,
        archived_at="2026-11-27T13:52Z",
    )
    reply = json.dumps({"memory_delta": {"mode": mode, "summary_update": update}})
    applied = apply_compaction(
        memory.begin(request.upto_rev), reply, request.upto_rev, archive=archive
    )
    assert isinstance(applied, CompactionApplied)
    return applied, archive, log


def test_names_are_generated_from_the_session_and_the_rev() -> None:
    assert archive_name("s-0123456789abcdef", 17) == "archive/0123456789abcdef/17"
    assert archive_name("", 3) == "archive/session/3"


def test_times_are_iso_minutes_in_utc() -> None:
    moment = datetime(2026, 11, 27, 14, 52, 59, tzinfo=timezone(timedelta(hours=1)))
    assert iso_minute(moment) == "2026-11-27T13:52Z"
    assert iso_minute(datetime(2026, 1, 2, 3, 4, tzinfo=UTC)) == "2026-01-02T03:04Z"


def test_the_marker_ends_the_summary_update() -> None:
    assert marked("Did things.  ", "archive/x/3") == "Did things. [archived as archive/x/3]"
    assert marked("", "archive/x/3") == archive_marker("archive/x/3")


def test_a_fold_marks_the_lanes_summary_and_the_event_names_the_archive() -> None:
    applied, archive, _ = _applied()
    marker = f"[archived as {archive.name}]"
    assert applied.memory.summary.summary.endswith(marker)
    assert applied.event.archive == archive
    assert applied.event.delta.summary_update == f"The user asked about ports. {marker}"
    second, _, _ = _applied()
    joined = WorkingMemory("edge").summary.apply(second.event.delta).summary
    assert joined.count("[archived as") == 1


def test_the_entry_holds_the_models_summary_with_where_and_when_it_came_from() -> None:
    applied, archive, _ = _applied()
    entry = archive_entry("s-0123456789abcdef", 20, applied.event)
    assert entry is not None
    assert entry.name == archive.name
    assert entry.loc == "archive:0123456789abcdef"
    assert "[archived as" not in entry.text
    assert entry.text.endswith("The user asked about ports.")
    upto = applied.event.window_start_rev - 1
    assert f"revs {archive.folded_from_rev}-{upto}, archived 2026-11-27T13:52Z" in entry.text
    assert entry.metadata[ARCHIVE_KEY] == {
        "session_id": "s-0123456789abcdef",
        "lane": "edge",
        "from_rev": archive.folded_from_rev,
        "upto_rev": upto,
        "marker_rev": 20,
        "archived_at": "2026-11-27T13:52Z",
    }


def test_an_entry_is_the_same_whenever_it_is_made_and_never_empty() -> None:
    event = MemoryWriteCommitted(
        summary_lane="edge",
        delta=MemoryDelta(
            mode="append", add_fact=Fact(key="user.port", value="8080", source_event="ab")
        ),
        window_start_rev=5,
        archive=CompactionArchive(
            name="archive/a/4", folded_from_rev=1, archived_at="2026-11-27T13:52Z"
        ),
    )
    first = archive_entry("s-a", 6, event)
    again = archive_entry("s-a", 6, MemoryWriteCommitted.model_validate(event.model_dump()))
    assert first == again
    assert first is not None
    assert first.text.endswith("Fact: user.port = 8080")


def test_an_event_written_before_archives_makes_none_and_keeps_its_wire_form() -> None:
    old = {
        "kind": "memory_write_committed",
        "summary_lane": "edge",
        "delta": {"mode": "append", "summary_update": "s"},
        "window_start_rev": 3,
    }
    event = MemoryWriteCommitted.model_validate(old)
    assert archive_entry("s-a", 4, event) is None
    assert "archive" not in event.model_dump(mode="json")  # old chain hashes stay valid


def test_a_text_too_long_for_the_store_is_cut_never_refused() -> None:
    text = "é" * 20_000  # 40,000 bytes of UTF-8
    cut = fitted(text)
    assert len(cut.encode()) <= TEXT_MAX_BYTES
    assert cut.endswith(" …[cut]")
    assert fitted("short") == "short"
