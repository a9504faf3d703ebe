"""Scripts as JSON files: they round-trip, and mistakes are reported with their place."""

from __future__ import annotations

from pathlib import Path

import pytest

from choir.errors import ConfigError
from choir.scripted import demo_script, load_script


def test_a_script_round_trips_through_json(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text(demo_script().model_dump_json(indent=2))
    assert load_script(path) == demo_script()


def test_a_hand_written_script_loads(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        """{"steps": [
            {"kind": "tool_calls", "calls": [{"name": "choir.fs.read", "arguments": {}}]},
            {"kind": "reply", "after": "tool", "text": "done", "usage": {"prompt_tokens": 3}},
            {"kind": "rate_limited", "retry_after": "2"},
            {"kind": "http_error", "status": 502, "delay_ms": 10},
            {"kind": "raw", "body": "{}"}
        ]}"""
    )
    script = load_script(path)
    assert [step.kind for step in script.steps] == [
        "tool_calls",
        "reply",
        "rate_limited",
        "http_error",
        "raw",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '{"steps": [{"kind": "reply", "txt": "x"}]}',
            "steps[0].txt: Extra inputs are not permitted",
        ),
        ('{"steps": []}', "steps: List should have at least 1 item"),
        ('{"steps": [{"kind": "dance"}]}', "steps[0]: Input tag 'dance' found using 'kind'"),
        (
            '{"steps": [{"kind": "reply", "text": "x", "match_regex": "("}]}',
            "invalid regular expression",
        ),
        (
            '{"steps": [{"kind": "tool_calls", "calls": [{"name": "fs_read"}]}]}',
            "invalid tool name 'fs_read'",
        ),
        ('{"steps": [{"kind": "http_error", "status": 200}]}', "greater than or equal to 400"),
        (
            '{"steps": [{"kind": "tool_calls", "calls": [{"name": "a.b", "id": "x"}]},'
            ' {"kind": "tool_calls", "calls": [{"name": "a.c", "id": "x"}]}]}',
            "tool call ids must be unique",
        ),
        ("{nope", "Invalid JSON"),
    ],
)
def test_mistakes_are_reported_with_their_place(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_script(path)
    assert str(caught.value).startswith(f"{path}: invalid script")
    assert any(problem in line for line in caught.value.problems), caught.value.problems


def test_a_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_script(tmp_path / "absent.json")
