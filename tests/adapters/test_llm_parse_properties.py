"""Whatever JSON a provider sends, parsing ends in a Completion or an LlmError — nothing else."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from choir.adapters.llm.client import Completion, CompletionRequest, LlmError, ModelSettings
from choir.adapters.llm.response import parse_completion
from choir.adapters.llm.tool_calls import offered_names
from choir.scripted.request import FUNCTION_NAME_PATTERN
from tests.adapters.support import tool_view

REQUEST = CompletionRequest(
    ModelSettings(name="n", model="m", endpoint="http://x"),
    [{"role": "user", "content": "hi"}],
    lane="edge",
    tools=[tool_view("choir.fs.read")],
)

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
names = st.sampled_from(["choir__fs__read", "choir.fs.read", "nope", "", "a b"]) | st.text(
    max_size=6
)
arguments = st.sampled_from(['{"path": "a"}', "{", "[]", "", "null"]) | json_values
tool_calls = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.text(max_size=4) | st.integers(),
            "type": st.just("function"),
            "function": st.fixed_dictionaries({}, optional={"name": names, "arguments": arguments})
            | json_values,
        },
    )
    | json_values,
    max_size=3,
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "role": st.just("assistant"),
        "content": json_values,
        "tool_calls": tool_calls | json_values,
        "refusal": json_values,
    },
)
choices = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "message": messages | json_values,
            "finish_reason": st.sampled_from(["stop", "tool_calls", "length", "content_filter"])
            | json_values,
        },
    )
    | json_values,
    max_size=2,
)
bodies = (
    st.fixed_dictionaries(
        {},
        optional={"choices": choices | json_values, "usage": json_values, "error": json_values},
    )
    | json_values
)


def outcome_of(body: Any) -> Completion | LlmError:
    try:
        return parse_completion(body, REQUEST, latency_ms=1)
    except LlmError as error:
        return error


@given(bodies)
def test_any_body_parses_or_fails_as_an_llm_error(body: Any) -> None:
    completion = outcome_of(body)
    if isinstance(completion, LlmError):
        assert "\n" not in completion.message
        return
    echoed = completion.message.get("tool_calls", [])
    answered = [call.id for call in completion.tool_calls]
    answered += [bad.id for bad in completion.invalid_tool_calls]
    assert sorted(call["id"] for call in echoed) == sorted(answered)
    assert all(re.fullmatch(FUNCTION_NAME_PATTERN, call["function"]["name"]) for call in echoed)


def test_offered_names_follow_the_entries_offered() -> None:
    """Names are read once per list of entries (by their identity), and a list whose entries
    are other dicts — a tool renamed, one more offered — is read afresh."""

    def entry(name: str) -> dict[str, Any]:
        return {"type": "function", "function": {"name": name, "parameters": {}}}

    read, write = entry("choir__fs__read"), entry("choir__fs__write")
    assert offered_names([read, write]) == {
        "choir__fs__read": "choir.fs.read",
        "choir__fs__write": "choir.fs.write",
    }
    assert offered_names([read, write]) is offered_names([read, write])
    assert offered_names([read]) == {"choir__fs__read": "choir.fs.read"}
    assert offered_names([read, entry("choir__exec")]) == {
        "choir__fs__read": "choir.fs.read",
        "choir__exec": "choir.exec",
    }
    assert offered_names([]) == {}
