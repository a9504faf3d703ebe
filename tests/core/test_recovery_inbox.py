"""The recovery inbox's pure rules: item ids both ways, each kind's choices and words."""

from __future__ import annotations

import pytest

from choir.core.recovery_inbox import (
    CHOICES,
    ItemRef,
    call_line,
    held_id,
    notice_text,
    outcome_id,
    parse_item_id,
    proposal_lines,
    resolve_command,
)


@pytest.mark.parametrize(
    ("item_id", "ref"),
    [
        ("held:s-1:appender", ItemRef("held_job", "s-1", "appender")),
        ("outcome:s-1", ItemRef("unknown_outcome", session_id="s-1")),
        ("approval:ap-1", ItemRef("approval", approval_id="ap-1")),
        ("timeout:ap-1", ItemRef("approval_timed_out", approval_id="ap-1")),
        ("apply-0a1b", ItemRef("failed_apply", apply_id="apply-0a1b")),
        ("held:s-1", None),
        ("held::job", None),
        ("outcome:", None),
        ("nonsense", None),
        ("other:x", None),
        ("", None),
    ],
)
def test_item_ids_name_what_they_are_about(item_id: str, ref: ItemRef | None) -> None:
    assert parse_item_id(item_id) == ref


def test_ids_made_here_parse_back() -> None:
    assert parse_item_id(held_id("s-9", "job-a")) == ItemRef("held_job", "s-9", "job-a")
    assert parse_item_id(outcome_id("s-9")) == ItemRef("unknown_outcome", session_id="s-9")


@pytest.mark.parametrize(
    ("kind", "command"),
    [
        ("held_job", "choirctl inbox resolve X resume|read-only|abort"),
        ("unknown_outcome", "choirctl inbox resolve X resume"),
        ("approval", "choirctl inbox resolve X approve|reject"),
        ("approval_timed_out", "choirctl inbox resolve X dismiss"),
        ("failed_apply", "choirctl inbox resolve X retry|dismiss"),
    ],
)
def test_each_kind_is_decided_by_its_choices(kind: str, command: str) -> None:
    assert resolve_command("X", kind) == command  # type: ignore[arg-type]
    assert kind in CHOICES


def test_a_call_reads_with_its_arguments_cut_to_a_line() -> None:
    assert call_line("choir.exec", {"command": "ls"}) == 'choir.exec {"command": "ls"}'
    long = call_line("choir.fs.write", {"text": "x" * 500})
    assert len(long) == len("choir.fs.write ") + 100
    assert long.endswith("…")
    assert call_line("t", None) == "t (arguments not in the log's preview)"


def test_a_proposal_reads_as_its_name_what_it_does_and_why() -> None:
    payload = {
        "manifest": {"llm": {"name": "weather.lookup"}},
        "intended_behavior": "Fetch\n the forecast.",
        "rationale": "Asked often.",
    }
    assert proposal_lines("tool", payload) == [
        "tool weather.lookup",
        "does: Fetch the forecast.",
        "why: Asked often.",
    ]
    assert proposal_lines("config", {"a": 1}) == ['config {"a": 1}']


def test_the_restart_notice_names_items_and_counts_the_rest() -> None:
    assert notice_text(["a", "b"], 3).splitlines() == [
        "choird restarted: 5 item(s) wait for a decision.",
        "- a",
        "- b",
        "- … and 3 more",
        "See them with choirctl inbox (or the console's Inbox tab).",
    ]
