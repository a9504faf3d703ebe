"""The summary tree's root with no I/O: the roll-up's name, its bounded prompt, its item, and the
tree's depth once a root exists."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from choir.core.memory.summaries.rollup import (
    MAX_COVERED,
    ROLLUP_MARKER,
    SUMMARY_CHARS,
    PendingSummary,
    parse_rollup,
    rollup_entry,
    rollup_messages,
    rollup_name,
)
from choir.core.memory.summaries.tree import tree_depth
from choir.protocol import MemoryRollup


def test_the_name_is_the_minute_and_the_item_links_what_it_covers() -> None:
    name = rollup_name(datetime(2026, 11, 27, 14, 40, 59, tzinfo=UTC))
    assert name == "rollup/2026-11-27T14:40Z"
    event = MemoryRollup(name=name, text=" Deploys, twice. ", covers=["summary/a", "summary/b"])
    entry = rollup_entry("s-00aa", 12, event)
    assert (entry.name, entry.loc) == (name, "rollup:2026-11-27")
    assert entry.text.startswith("Roll-up of 2 session summaries, written by the agent at ")
    assert "Deploys, twice.\n\nSession summaries: summary/a, summary/b" in entry.text
    assert entry.metadata == {
        "memory_rollup": {
            "session_id": "s-00aa",
            "rev": 12,
            "rolled_at": "2026-11-27T14:40Z",
            "covers": ["summary/a", "summary/b"],
        }
    }


def test_the_prompt_is_bounded_however_many_summaries_wait() -> None:
    many = [PendingSummary(f"summary/{n}", "x" * 10_000) for n in range(MAX_COVERED + 5)]
    [system, user] = rollup_messages(many)
    body = str(user["content"])
    assert body.startswith(ROLLUP_MARKER)
    assert body.count("## summary/") == MAX_COVERED
    assert len(body) < MAX_COVERED * (SUMMARY_CHARS + 40) + 100
    assert "no outside facts" in str(system["content"])


def test_an_empty_reply_is_no_rollup_and_a_bad_event_is_refused() -> None:
    assert parse_rollup("  \n") is None
    assert parse_rollup(" Deploys. ") == "Deploys."
    with pytest.raises(ValidationError):
        MemoryRollup(name="rollup/today", text="x", covers=["summary/a"])
    with pytest.raises(ValidationError):
        MemoryRollup(name="rollup/2026-11-27T14:40Z", text="x", covers=[])


@pytest.mark.parametrize(
    ("leaves", "branches", "linked", "roots", "depth"),
    [(0, 0, 0, 0, 0), (3, 0, 0, 0, 1), (3, 2, 1, 0, 2), (3, 2, 1, 1, 3), (0, 2, 0, 1, 2)],
)
def test_a_root_over_branches_over_leaves_is_three_levels(
    leaves: int, branches: int, linked: int, roots: int, depth: int
) -> None:
    assert tree_depth(leaves, branches, linked, roots) == depth
