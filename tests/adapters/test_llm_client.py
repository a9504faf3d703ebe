"""The LLM client against the real scripted server over real HTTP: requests and answers."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from choir.adapters.llm.client import CompletionRequest, LlmClient, ModelSettings
from choir.config.llm import ModelConfig
from choir.errors import ConfigError
from choir.protocol.log.events import ModelOutput, ToolCall, Usage
from choir.protocol.tooling.tools import ToolResult
from choir.scripted import (
    ReplyStep,
    Script,
    ScriptedCall,
    ScriptedModelServer,
    ToolCallsStep,
)
from tests.adapters.support import ask, llm_log_lines, settings_for, tool_view


async def test_a_text_reply_comes_back_with_its_metadata(llm: LlmClient) -> None:
    async with ScriptedModelServer(Script(steps=[ReplyStep(text="Hello there.")])) as server:
        completion = await llm.complete(ask(settings_for(server, model="vendor/m-1")))
    assert completion.text == "Hello there."
    assert completion.tool_calls == []
    assert completion.invalid_tool_calls == []
    assert completion.finish_reason == "stop"
    assert completion.model == "test-model"
    assert completion.provider_model == "vendor/m-1"
    assert completion.lane == "edge"
    assert completion.retried is False
    assert completion.message == {"role": "assistant", "content": "Hello there."}


async def test_tool_calls_round_trip_with_wire_names(llm: LlmClient) -> None:
    script = Script(
        steps=[
            ToolCallsStep(calls=[ScriptedCall(name="choir.fs.read", arguments={"path": "a.txt"})]),
            ReplyStep(after="tool", text="a.txt says hi"),
        ]
    )
    tools = [tool_view("choir.fs.read"), tool_view("choir.core.list")]
    async with ScriptedModelServer(script) as server:
        request = ask(settings_for(server), "read a.txt", tools=tools)
        first = await llm.complete(request)
        result = ToolResult.ok("read 1 line", content="hi")
        answer = {
            "role": "tool",
            "tool_call_id": first.tool_calls[0].id,
            "content": result.model_dump_json(),
        }
        follow_up = CompletionRequest(
            request.settings,
            [*request.messages, first.message, answer],
            lane="edge",
            tools=tools,
        )
        second = await llm.complete(follow_up)
    assert first.tool_calls == [
        ToolCall(id="call_1", name="choir.fs.read", arguments={"path": "a.txt"})
    ]
    assert first.finish_reason == "tool_calls"
    sent = server.requests[0].body
    assert [tool["function"]["name"] for tool in sent["tools"]] == [
        "choir__fs__read",
        "choir__core__list",
    ]
    echoed = server.requests[1].body["messages"][2]
    assert echoed["tool_calls"][0]["function"]["name"] == "choir__fs__read"
    assert [request.status for request in server.requests] == [200, 200]
    assert second.text == "a.txt says hi"


async def test_null_settings_and_empty_tools_are_omitted(llm: LlmClient) -> None:
    async with ScriptedModelServer(Script(steps=[ReplyStep(text="ok")])) as server:
        await llm.complete(ask(settings_for(server, temperature=None, reasoning_effort=None)))
    body = server.requests[0].body
    assert set(body) == {"model", "messages"}


async def test_set_settings_are_sent_as_given(llm: LlmClient) -> None:
    async with ScriptedModelServer(Script(steps=[ReplyStep(text="ok")])) as server:
        settings = settings_for(server, temperature=0.2, reasoning_effort="high")
        await llm.complete(ask(settings, max_tokens=50))
    body = server.requests[0].body
    assert (body["temperature"], body["reasoning_effort"], body["max_tokens"]) == (0.2, "high", 50)


async def test_usage_and_latency_are_returned_and_logged(llm: LlmClient) -> None:
    usage = Usage(prompt_tokens=30, completion_tokens=5, total_tokens=35)
    script = Script(steps=[ReplyStep(text="ok", usage=usage, delay_ms=60)])
    async with ScriptedModelServer(script) as server:
        with llm_log_lines() as lines:
            completion = await llm.complete(
                ask(settings_for(server), "secret plans", lane="core:fix-bug")
            )
    assert completion.usage == usage
    assert completion.latency_ms >= 60
    [line] = lines
    assert line["message"] == "llm call"
    assert line["lane"] == "core:fix-bug"
    assert (line["model"], line["total_tokens"], line["latency_ms"]) == (
        "test-model",
        35,
        completion.latency_ms,
    )
    assert "secret plans" not in orjson.dumps(line).decode()


async def test_the_model_output_event_carries_the_call(llm: LlmClient) -> None:
    script = Script(steps=[ReplyStep(text="done")])
    async with ScriptedModelServer(script) as server:
        completion = await llm.complete(ask(settings_for(server), lane="core:refactor-auth"))
    output = completion.model_output()
    assert isinstance(output, ModelOutput)
    assert (output.lane, output.text, output.model) == ("core:refactor-auth", "done", "test-model")
    assert output.usage == completion.usage
    assert output.latency_ms == completion.latency_ms


async def test_the_api_key_is_sent_as_a_bearer_token(llm: LlmClient) -> None:
    script = Script(steps=[ReplyStep(text="a"), ReplyStep(text="b")])
    async with ScriptedModelServer(script) as server:
        await llm.complete(ask(settings_for(server, api_key="sk-test-123")))
        await llm.complete(ask(settings_for(server)))
    assert server.requests[0].headers["Authorization"] == "Bearer sk-test-123"
    assert "Authorization" not in server.requests[1].headers


async def test_an_endpoint_without_v1_works_too(llm: LlmClient) -> None:
    async with ScriptedModelServer(Script(steps=[ReplyStep(text="ok")])) as server:
        settings = ModelSettings(name="x", model="m", endpoint=server.url.removesuffix("/v1") + "/")
        completion = await llm.complete(ask(settings))
    assert completion.text == "ok"
    assert server.requests[0].path == "/chat/completions"


async def test_a_borrowed_http_client_stays_open() -> None:
    async with (
        aiohttp.ClientSession() as http,
        ScriptedModelServer(Script(steps=[ReplyStep(text="ok", repeat=True)])) as server,
    ):
        async with LlmClient(http) as llm:
            await llm.complete(ask(settings_for(server)))
        assert not http.closed


def test_settings_come_from_the_model_config() -> None:
    config = ModelConfig(
        provider="openrouter",
        model="openai/o3",
        endpoint="https://openrouter.ai/api/v1",
        temperature=None,
        reasoning_effort="medium",
        secret="openrouter-key",
    )
    settings = ModelSettings.from_config("o3", config, api_key="sk-or-abc")
    assert settings == ModelSettings(
        name="o3",
        model="openai/o3",
        endpoint="https://openrouter.ai/api/v1",
        api_key="sk-or-abc",
        temperature=None,
        reasoning_effort="medium",
    )


def test_a_scripted_model_needs_its_server_endpoint() -> None:
    config = ModelConfig(provider="scripted", model="choir-demo", endpoint=None)
    with pytest.raises(ConfigError, match=r"models\.demo\.endpoint"):
        ModelSettings.from_config("demo", config)
    settings = ModelSettings.from_config("demo", config, endpoint="http://127.0.0.1:9/v1")
    assert settings.endpoint == "http://127.0.0.1:9/v1"
