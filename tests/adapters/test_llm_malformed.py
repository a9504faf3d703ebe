"""Malformed answers become structured invalid calls or `LlmError(malformed)`, never a crash."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from choir.adapters.llm.client import (
    Completion,
    CompletionRequest,
    LlmClient,
    LlmError,
    LlmErrorKind,
)
from choir.protocol.log.events import ToolCall, Usage
from choir.scripted import (
    RawStep,
    ReplyStep,
    Script,
    ScriptedCall,
    ScriptedModelServer,
    ToolCallsStep,
)
from choir.scripted.script import ScriptedUsage
from tests.adapters.support import ask, settings_for, tool_view

TOOLS = [tool_view("choir.fs.read"), tool_view("choir.core.list")]


def completion_body(message: Any, **extra: Any) -> str:
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return orjson.dumps({"choices": [choice], **extra}).decode()


@pytest.mark.parametrize(
    "body",
    [
        "this is not json",
        "[1, 2]",
        "{}",
        '{"choices": []}',
        '{"choices": "many"}',
        '{"choices": [{"finish_reason": "stop"}]}',
        '{"choices": ["text"]}',
        completion_body({"role": "assistant", "content": 5}),
        completion_body({"role": "assistant", "content": "x", "tool_calls": "call it"}),
    ],
)
async def test_unreadable_answers_are_malformed(llm: LlmClient, body: str) -> None:
    async with ScriptedModelServer(Script(steps=[RawStep(body=body)])) as server:
        with pytest.raises(LlmError) as caught:
            await llm.complete(ask(settings_for(server)))
    assert caught.value.kind == LlmErrorKind.MALFORMED
    assert "malformed response" in caught.value.message


@pytest.mark.parametrize(
    ("message", "text"),
    [
        (
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            "ab",
        ),
        (
            {"role": "assistant", "content": None, "refusal": "I can't help with that."},
            "I can't help with that.",
        ),
        ({"role": "assistant"}, ""),
    ],
)
async def test_content_shapes_providers_send(llm: LlmClient, message: Any, text: str) -> None:
    async with ScriptedModelServer(
        Script(steps=[RawStep(body=completion_body(message))])
    ) as server:
        completion = await llm.complete(ask(settings_for(server, model="m-1")))
    assert completion.text == text
    assert completion.usage == Usage()
    assert completion.provider_model == "m-1"


async def test_partial_usage_is_completed(llm: LlmClient) -> None:
    body = completion_body(
        {"role": "assistant", "content": "x"}, usage={"prompt_tokens": 7, "completion_tokens": 2}
    )
    async with ScriptedModelServer(Script(steps=[RawStep(body=body)])) as server:
        completion = await llm.complete(ask(settings_for(server)))
    assert completion.usage == Usage(prompt_tokens=7, completion_tokens=2, total_tokens=9)


async def run_tool_calls(llm: LlmClient, *calls: ScriptedCall) -> Completion:
    """Complete once with `calls`, then answer every call and check the server accepts that."""
    script = Script(steps=[ToolCallsStep(calls=list(calls)), ReplyStep(after="tool", text="ok")])
    async with ScriptedModelServer(script) as server:
        request = ask(settings_for(server), tools=TOOLS)
        completion = await llm.complete(request)
        answers = [
            {"role": "tool", "tool_call_id": call.id, "content": "{}"}
            for call in completion.tool_calls
        ] + [
            {"role": "tool", "tool_call_id": bad.id, "content": bad.result().model_dump_json()}
            for bad in completion.invalid_tool_calls
        ]
        messages = [*request.messages, completion.message, *answers]
        await llm.complete(CompletionRequest(request.settings, messages, lane="edge", tools=TOOLS))
    assert [recorded.status for recorded in server.requests] == [200, 200]
    return completion


async def test_arguments_that_are_not_json_become_an_invalid_call(llm: LlmClient) -> None:
    completion = await run_tool_calls(
        llm, ScriptedCall(name="choir.fs.read", raw_arguments='{"path": ', id="c1")
    )
    assert completion.tool_calls == []
    [bad] = completion.invalid_tool_calls
    assert (bad.id, bad.wire_name, bad.arguments) == ("c1", "choir__fs__read", '{"path": ')
    result = bad.result()
    assert (result.status, result.error_code) == ("error", "invalid_arguments")
    assert "choir.fs.read" in result.summary
    assert "not valid JSON" in result.summary


async def test_arguments_that_are_not_an_object_become_an_invalid_call(llm: LlmClient) -> None:
    completion = await run_tool_calls(
        llm, ScriptedCall(name="choir.fs.read", raw_arguments="[1]", id="c1")
    )
    [bad] = completion.invalid_tool_calls
    assert "must be a JSON object" in bad.problem


@pytest.mark.parametrize(
    "call",
    [
        ScriptedCall(name="choir.nope.missing", id="c1"),
        ScriptedCall(name="choir.fs.read", raw_name="read_file", id="c1"),
        ScriptedCall(name="choir.fs.read", raw_name="", id="c1"),
    ],
)
async def test_a_tool_that_was_not_offered_becomes_an_invalid_call(
    llm: LlmClient, call: ScriptedCall
) -> None:
    completion = await run_tool_calls(llm, call)
    [bad] = completion.invalid_tool_calls
    result = bad.result()
    assert result.error_code == "unknown_tool"
    assert result.data == {"known_tools": ["choir.core.list", "choir.fs.read"]}


async def test_valid_and_invalid_calls_keep_their_order(llm: LlmClient) -> None:
    completion = await run_tool_calls(
        llm,
        ScriptedCall(name="choir.core.list", id="a"),
        ScriptedCall(name="choir.nope.missing", id="b"),
        ScriptedCall(name="choir.fs.read", arguments={"path": "x"}, id="c"),
    )
    assert completion.tool_calls == [
        ToolCall(id="a", name="choir.core.list"),
        ToolCall(id="c", name="choir.fs.read", arguments={"path": "x"}),
    ]
    assert [bad.id for bad in completion.invalid_tool_calls] == ["b"]
    assert [call["id"] for call in completion.message["tool_calls"]] == ["a", "b", "c"]
    assert completion.message["content"] is None


async def test_a_dotted_tool_name_is_understood(llm: LlmClient) -> None:
    completion = await run_tool_calls(
        llm, ScriptedCall(name="choir.fs.read", raw_name="choir.fs.read", arguments={"path": "x"})
    )
    assert completion.tool_calls[0].name == "choir.fs.read"
    assert completion.invalid_tool_calls == []
    assert completion.message["tool_calls"][0]["function"]["name"] == "choir__fs__read"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ({"type": "function", "function": {"name": "choir__core__list", "arguments": ""}}, {}),
        (
            {"id": "k", "function": {"name": "choir__fs__read", "arguments": {"path": "p"}}},
            {"path": "p"},
        ),
    ],
)
async def test_lenient_call_shapes(llm: LlmClient, call: Any, expected: Any) -> None:
    body = completion_body({"role": "assistant", "content": None, "tool_calls": [call]})
    async with ScriptedModelServer(Script(steps=[RawStep(body=body)])) as server:
        completion = await llm.complete(ask(settings_for(server), tools=TOOLS))
    [parsed] = completion.tool_calls
    assert parsed.arguments == expected
    assert parsed.id == call.get("id", "call_0")


async def test_a_call_that_is_not_an_object_is_answered_not_dropped(llm: LlmClient) -> None:
    body = completion_body({"role": "assistant", "content": None, "tool_calls": ["junk"]})
    async with ScriptedModelServer(Script(steps=[RawStep(body=body)])) as server:
        completion = await llm.complete(ask(settings_for(server), tools=TOOLS))
    [bad] = completion.invalid_tool_calls
    assert (bad.id, bad.error_code) == ("call_0", "unknown_tool")
    assert completion.message["tool_calls"][0]["id"] == "call_0"


async def test_cached_tokens_and_the_providers_cost_are_read_when_reported(
    llm: LlmClient,
) -> None:
    reported = ScriptedUsage(
        prompt_tokens=100, completion_tokens=7, total_tokens=107, cached_tokens=64, cost=0.00042
    )
    plain = Usage(prompt_tokens=5, completion_tokens=1, total_tokens=6)
    script = Script(steps=[ReplyStep(text="a", usage=reported), ReplyStep(text="b", usage=plain)])
    async with ScriptedModelServer(script) as server:
        first = await llm.complete(ask(settings_for(server)))
        second = await llm.complete(ask(settings_for(server)))
    assert (first.cached_tokens, first.provider_cost_usd) == (64, 0.00042)
    assert (second.cached_tokens, second.provider_cost_usd) == (0, None)  # none: unknown
