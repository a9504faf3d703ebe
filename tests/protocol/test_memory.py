"""Reference summaries and the structured deltas that edit them (§11.3)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from choir.protocol import Fact, FactKey, MemoryDelta, MemoryDeltaDocument, ReferenceSummary

BASE = ReferenceSummary(
    summary="User is refactoring auth.",
    facts=[
        Fact(key="lang", value="python", source_event="e1"),
        Fact(key="style", value="tabs", source_event="e2"),
    ],
    referenced_sessions=["s1"],
    referenced_events=["e1", "e2"],
)


def test_append_adds_text_references_and_facts():
    delta = MemoryDelta(
        mode="append",
        summary_update="Tests now pass.",
        add_references=["e3", "e1", "e3"],
        add_fact=Fact(key="tests", value="green", source_event="e3"),
    )

    after = BASE.apply(delta)

    assert after.summary == "User is refactoring auth.\nTests now pass."
    assert after.referenced_events == ["e1", "e2", "e3"]
    assert [fact.key for fact in after.facts] == ["lang", "style", "tests"]
    assert after.referenced_sessions == ["s1"]


def test_overwrite_replaces_only_the_text():
    after = BASE.apply(MemoryDelta(mode="overwrite", summary_update="Auth refactor done."))

    assert after.summary == "Auth refactor done."
    assert after.facts == BASE.facts
    assert after.referenced_events == BASE.referenced_events


def test_fact_with_an_existing_key_replaces_it_and_removal_drops_by_key():
    delta = MemoryDelta(
        mode="append",
        add_fact=Fact(key="lang", value="python 3.11", source_event="e4"),
        remove_fact=FactKey(key="style"),
        remove_references=["e2"],
    )

    after = BASE.apply(delta)

    assert [(fact.key, fact.value) for fact in after.facts] == [("lang", "python 3.11")]
    assert after.referenced_events == ["e1"]
    assert after.summary == BASE.summary


def test_apply_leaves_the_original_untouched():
    BASE.apply(MemoryDelta(mode="overwrite", summary_update="gone"))

    assert BASE.summary == "User is refactoring auth."


def test_delta_document_is_the_spec_shape():
    document = MemoryDeltaDocument.model_validate(
        {
            "memory_delta": {
                "mode": "append",
                "summary_update": "x",
                "add_references": ["h"],
                "remove_references": [],
                "add_fact": {"key": "k", "value": "v", "source_event": "h"},
                "remove_fact": {"key": "old"},
            }
        }
    )

    assert document.memory_delta.remove_fact == FactKey(key="old")


def test_delta_mode_must_be_append_or_overwrite():
    with pytest.raises(ValidationError, match="'append' or 'overwrite'"):
        MemoryDelta.model_validate({"mode": "replace"})
