"""A proposal as the diff it would make: a skill or tool file against the repo's, a config
patch against config.json (`choir.core.proposal_diff`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from choir.core.proposal_diff import merge_patch, proposal_diff, proposed_file

SKILL = {"name": "notes", "description": "Take notes."}


def nothing(_: str) -> str | None:
    return None


def test_a_new_skill_is_a_whole_new_file() -> None:
    diff = proposal_diff("skill", {"spec": SKILL, "rationale": "r"}, nothing, {}, agent_id="a-1")

    assert diff is not None
    lines = diff.splitlines()
    assert lines[:2] == ["--- /dev/null", "+++ b/a-1:skills/notes.json"]
    assert '+  "name": "notes",' in lines
    assert not [line for line in lines[2:] if line.startswith("-")]


def test_a_changed_tool_shows_only_the_lines_that_change() -> None:
    old = {"llm": {"name": "w.lookup", "description": "Old words."}, "runtime": {}}
    new = {"llm": {"name": "w.lookup", "description": "New words."}, "runtime": {}}
    current = json.dumps(old, indent=2) + "\n"

    def read(path: str) -> str | None:
        return current if path == "tools/w.lookup.json" else None

    diff = proposal_diff("tool", {"manifest": new}, read, {}, agent_id="a-1")

    assert diff is not None
    lines = diff.splitlines()
    assert lines[:2] == ["--- a/a-1:tools/w.lookup.json", "+++ b/a-1:tools/w.lookup.json"]
    changed = [line for line in lines[2:] if line[:1] in "+-" and not line.startswith("@@")]
    assert changed == ['-    "description": "Old words."', '+    "description": "New words."']


def test_a_config_patch_is_config_json_before_and_after() -> None:
    config = {"approval_timeout_ms": 1_800_000, "event_window_size": 50, "models": {"a": {}}}
    patch = {"approval_timeout_ms": 600_000, "event_window_size": None, "models": {"b": {}}}

    diff = proposal_diff("config_change", {"patch": patch}, nothing, config, agent_id="a-1")

    assert diff is not None
    changed = [line for line in diff.splitlines()[2:] if line[:1] in "+-"]
    assert '-  "approval_timeout_ms": 1800000,' in changed
    assert '+  "approval_timeout_ms": 600000,' in changed
    assert '-  "event_window_size": 50,' in changed
    assert '+    "b": {}' in changed


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("repo_change", {"branch": "proposal/x"}),
        ("skill", {"spec": {"name": "../escape"}}),
        ("skill", {"spec": {"name": ".hidden"}}),
        ("tool", {"manifest": {"llm": "not an object"}}),
        ("config_change", {"patch": "not an object"}),
    ],
)
def test_what_has_no_safe_file_or_patch_has_no_diff(kind: str, payload: dict[str, Any]) -> None:
    assert proposal_diff(kind, payload, nothing, {}, agent_id="a-1") is None


def test_merge_patch_follows_rfc_7386() -> None:
    assert merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == {
        "a": "z",
        "c": {"d": "e"},
    }
    assert merge_patch({"a": [1]}, {"a": [2, 3]}) == {"a": [2, 3]}
    assert merge_patch("x", {"a": 1}) == {"a": 1}
    assert proposed_file("skill", {"spec": SKILL}) is not None
