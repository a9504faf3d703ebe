"""A call's body, joined from the pieces the lane's previous call encoded, is byte for byte what
encoding the whole body gives — whichever messages and tools are shared, new, or gone."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from choir.adapters.llm.body import BodyEncoder
from choir.adapters.llm.response import request_body
from choir.adapters.llm.types import CompletionRequest, ModelSettings
from tests.adapters.support import tool_view

PLAIN = ModelSettings(name="n", model="m", endpoint="http://x")
TUNED = ModelSettings(
    name="n", model="vendor/m-1", endpoint="http://x", temperature=0.2, reasoning_effort="low"
)


def whole(request: CompletionRequest) -> bytes:
    return orjson.dumps(request_body(request))


def message(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f'message {n} ✓ "quoted"\n', "extra": [n, None, 1.5]}


def test_a_growing_conversation_encodes_as_the_whole_body() -> None:
    encoder, history = BodyEncoder(), [{"role": "system", "content": "you are choir"}]
    tools = [tool_view("choir.fs.read"), tool_view("choir.fs.write")]
    for n in range(6):
        history = [*history, message(n)]
        settings = TUNED if n % 2 else PLAIN
        request = CompletionRequest(
            settings, history, lane="edge", tools=tools, max_tokens=n or None
        )
        assert encoder.encode(request) == whole(request)


def test_no_tools_and_an_empty_conversation() -> None:
    encoder = BodyEncoder()
    for request in (
        CompletionRequest(PLAIN, [], lane="edge"),
        CompletionRequest(TUNED, [message(1)], lane="edge", tools=[]),
        CompletionRequest(PLAIN, [message(1), message(1)], lane="core:x", max_tokens=5),
    ):
        assert encoder.encode(request) == whole(request)


def test_lanes_keep_their_own_pieces_and_a_new_object_at_an_old_id_is_encoded_anew() -> None:
    encoder = BodyEncoder()
    for n in range(3 * BodyEncoder.LANES):
        lane = f"core:job-{n % (BodyEncoder.LANES + 2)}"
        messages = [message(n), {"role": "assistant", "content": str(n)}]  # ids get reused
        request = CompletionRequest(PLAIN, messages, lane=lane, tools=[tool_view("choir.fs.read")])
        assert encoder.encode(request) == whole(request)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
pool = st.lists(st.dictionaries(st.text(max_size=4), json_values, max_size=3), min_size=1)


@given(pool, st.lists(st.lists(st.integers(0, 20), max_size=8), max_size=5), st.booleans())
def test_any_reuse_of_messages_encodes_as_the_whole_body(
    messages: list[dict[str, Any]], calls: list[list[int]], with_tools: bool
) -> None:
    encoder = BodyEncoder()
    for picks in calls:
        chosen = [messages[pick % len(messages)] for pick in picks]
        tools = chosen[::-1] if with_tools else ()
        request = CompletionRequest(PLAIN, chosen, lane="edge", tools=tools)
        assert encoder.encode(request) == whole(request)
