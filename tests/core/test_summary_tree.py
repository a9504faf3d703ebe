"""The summary tree, the pure part: a session summary's item, who said what, the depth."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from choir.core.memory.summaries.tree import (
    SUMMARY_KEY,
    session_summary_entry,
    summary_name,
    tree_depth,
    who_said_what,
)
from choir.protocol import AgentReplied, UserMsg
from choir.protocol.log.events import Event, SessionSummary


def test_the_branch_names_its_session_and_lists_its_leaves_with_when_and_who() -> None:
    summary = SessionSummary(summary="Talked ports.", topics=["ports"], open_items=["close 22"])
    entry = session_summary_entry(
        "s-00aa11bb22cc33dd",
        summary,
        first_at=datetime(2026, 11, 27, 13, 2, 40, tzinfo=UTC),
        last_at=datetime(2026, 11, 27, 13, 52, 1, tzinfo=UTC),
        participation="2 user messages, 2 agent replies",
        archives=["archive/00aa11bb22cc33dd/8"],
    )
    assert entry.name == summary_name("s-00aa11bb22cc33dd") == "summary/00aa11bb22cc33dd"
    assert entry.loc == "summary:00aa11bb22cc33dd"
    assert entry.text.splitlines()[0] == (
        "Session summary of s-00aa11bb22cc33dd, 2026-11-27T13:02Z to 2026-11-27T13:52Z "
        "(written by the agent at its end; 2 user messages, 2 agent replies)."
    )
    assert "Topics: ports" in entry.text
    assert "Open items: close 22" in entry.text
    assert "Decisions" not in entry.text
    assert entry.text.endswith("Compaction archives: archive/00aa11bb22cc33dd/8")
    assert entry.metadata[SUMMARY_KEY]["archives"] == ["archive/00aa11bb22cc33dd/8"]


def test_who_said_what_counts_each_party() -> None:
    events: list[Event] = [UserMsg(text="a"), AgentReplied(text="b"), UserMsg(text="c")]
    assert who_said_what(events) == "2 user messages, 1 agent replies"
    assert who_said_what([]) == "no messages"


@pytest.mark.parametrize(
    ("leaves", "branches", "linked", "depth"),
    [(0, 0, 0, 0), (3, 0, 0, 1), (0, 1, 0, 1), (3, 1, 1, 2)],
)
def test_the_depth_counts_the_levels_present(
    leaves: int, branches: int, linked: int, depth: int
) -> None:
    assert tree_depth(leaves, branches, linked) == depth
