"""Splicing a new member into config.json text keeps every other byte where it was."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from choir.config.edit import add_member

ENTRY = {"repo": {"url": "", "ref": "main"}, "defaults": {"llm": ""}}


def _expected(text: str, key: str, value: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    data.setdefault("agents", {})[key] = value
    return data


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ('{"a": 1, "agents": {"x": 1}}', '{"a": 1, "agents": {"x": 1, "new": 2}}'),
        ('{"a": 1}', '{"a": 1, "agents": {"new": 2}}'),
        ('{\n  "agents": {}\n}\n', '{\n  "agents": {\n    "new": 2\n  }\n}\n'),
        (
            '{\n    "agents": {\n        "x": {"k": 1}\n    },\n    "z": 0\n}',
            '{\n    "agents": {\n        "x": {"k": 1},\n        "new": 2\n    },\n    "z": 0\n}',
        ),
    ],
    ids=["compact", "no-section", "empty-section", "four-space-indent"],
)
def test_splices_in_the_files_own_style(before: str, after: str) -> None:
    assert add_member(before, "agents", "new", 2) == after


def test_nested_value_is_indented_like_its_siblings() -> None:
    text = '{\n  "agents": {\n    "a": {}\n  }\n}\n'
    assert add_member(text, "agents", "b", {"k": [1]}) == (
        '{\n  "agents": {\n    "a": {},\n    "b": {\n'
        '      "k": [\n        1\n      ]\n    }\n  }\n}\n'
    )


def test_refuses_a_section_that_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="agents is not a JSON object"):
        add_member('{"agents": []}', "agents", "x", 1)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    data=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    agents=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    indent=st.sampled_from([None, 0, 2, 4, "\t"]),
)
def test_result_is_the_intended_data_in_order(
    data: dict[str, Any], agents: dict[str, Any], indent: int | str | None
) -> None:
    key = "new-agent"
    agents.pop(key, None)
    data["agents"] = agents
    text = json.dumps(data, indent=indent)
    result = add_member(text, "agents", key, ENTRY)
    parsed = json.loads(result)
    expected = _expected(text, key, ENTRY)
    assert parsed == expected
    assert list(parsed) == list(expected)
    assert list(parsed["agents"]) == list(expected["agents"])
