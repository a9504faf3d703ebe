"""The demo model an agent gets with nothing configured, driven through the real LLM client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from choir.adapters.llm.client import Completion, CompletionRequest, LlmClient, ModelSettings
from choir.core.prompt.window import full_result, json_text
from choir.protocol.tooling.tools import ToolResult
from choir.scripted import DEMO_MODEL_ID, ScriptedModelServer, demo_script
from tests.adapters.support import tool_view

TOOLS = [
    tool_view("choir.fs.read"),
    tool_view("choir.core.list"),
    tool_view("choir.propose.tool"),
    tool_view("choir.memory.upsert"),
    tool_view("choir.memory.query"),
]


class Chat:
    """An edge-lane conversation with the demo model."""

    def __init__(self, llm: LlmClient, server: ScriptedModelServer) -> None:
        self.llm = llm
        self.settings = ModelSettings(name="demo", model=DEMO_MODEL_ID, endpoint=server.url)
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": "You are choir."}]

    async def send(self, message: dict[str, Any]) -> Completion:
        self.messages.append(message)
        request = CompletionRequest(self.settings, list(self.messages), lane="edge", tools=TOOLS)
        completion = await self.llm.complete(request)
        self.messages.append(completion.message)
        return completion

    async def say(self, text: str) -> Completion:
        return await self.send({"role": "user", "content": text})


@pytest.fixture
async def chat() -> AsyncIterator[Chat]:
    async with LlmClient() as llm, ScriptedModelServer(demo_script()) as server:
        yield Chat(llm, server)


@pytest.mark.parametrize("greeting", ["hello", "Hi!", "hey there", "Good morning"])
async def test_it_greets_and_says_it_is_a_demo(chat: Chat, greeting: str) -> None:
    completion = await chat.say(greeting)
    assert completion.text.startswith("Hello!")
    assert "demo model" in completion.text
    assert "not a real LLM" in completion.text


async def test_it_explains_how_to_configure_a_real_model(chat: Chat) -> None:
    text = (await chat.say("How do I set up a real model?")).text
    for needed in ("OPENROUTER_API_KEY", "choirctl secret set", "config.json", "defaults.llm"):
        assert needed in text


async def test_it_demonstrates_a_tool_call_and_answers_its_result(chat: Chat) -> None:
    called = await chat.say("show me a demo")
    [call] = called.tool_calls
    assert (call.name, call.arguments) == ("choir.core.list", {"include_finished": False})
    result = ToolResult.ok("no core jobs", jobs=[])
    answered = await chat.send(
        {"role": "tool", "tool_call_id": call.id, "content": result.model_dump_json()}
    )
    assert answered.tool_calls == []
    assert "real tool call" in answered.text


async def test_anything_else_gets_the_menu(chat: Chat) -> None:
    text = (await chat.say("this is a long request to refactor my code")).text
    assert "demo model" in text
    assert "'help'" in text


async def test_it_never_runs_out_and_is_deterministic() -> None:
    prompts = ["hello", "demo", "help", "what?", "", "tools please", "bye"] * 8
    answers: list[list[str]] = []
    async with LlmClient() as llm:
        for _ in range(2):
            async with ScriptedModelServer(demo_script(), zero_latency=True) as server:
                settings = ModelSettings(name="demo", model=DEMO_MODEL_ID, endpoint=server.url)
                run = []
                for prompt in prompts:
                    messages = [{"role": "user", "content": prompt}]
                    completion = await llm.complete(
                        CompletionRequest(settings, messages, lane="edge")
                    )
                    run.append(completion.text)
                answers.append(run)
            assert all(request.status == 200 for request in server.requests)
    assert answers[0] == answers[1]


async def test_it_proposes_a_tool_for_the_operator_to_approve(chat: Chat) -> None:
    called = await chat.say("please propose something")
    [call] = called.tool_calls
    assert call.name == "choir.propose.tool"
    assert call.arguments["manifest"]["llm"]["name"] == "demo.greet"
    result = ToolResult.ok("proposal submitted for approval as ap-1; the outcome will follow")
    answered = await chat.send(
        {"role": "tool", "tool_call_id": call.id, "content": result.model_dump_json()}
    )
    assert answered.tool_calls == []
    assert "approve or reject it in choir tui" in answered.text


async def test_it_answers_the_stop_summary_request_with_a_summary(chat: Chat) -> None:
    from choir.agent.lanes.summary import SUMMARY_MARKER, parse_summary

    # the request quotes the session, whose words would match the demo's other answers
    quoted = '[{"role": "user", "content": "hello, propose a tool, demo"}]'
    body = f"{SUMMARY_MARKER}.\n\nThe conversation, as chat messages:\n{quoted}"
    completion = await chat.say(body)
    summary = parse_summary(completion.text)
    assert summary is not None
    assert summary.topics == ["demo"]


async def answer_with(chat: Chat, call_id: str, tool: str, result: ToolResult) -> Completion:
    """Send `result` back the way a lane's prompt shows it (compact JSON, nulls left out)."""
    content = json_text(full_result(tool, result))
    return await chat.send({"role": "tool", "tool_call_id": call_id, "content": content})


async def test_it_remembers_what_it_is_told_in_its_knowledge_base(chat: Chat) -> None:
    called = await chat.say('Remember that my editor is "helix"')
    [call] = called.tool_calls
    assert call.name == "choir.memory.upsert"
    assert call.arguments == {"op": "add", "text": 'my editor is "helix"', "tags": ["demo"]}
    stored = ToolResult.ok(
        "stored knowledge 'my-editor-is-helix-0b5c0000'",
        op="add",
        id="0b5c",
        name="my-editor-is-helix-0b5c0000",
    )
    answered = await answer_with(chat, call.id, call.name, stored)
    assert "outlives this session" in answered.text
    assert "recall" in answered.text


async def test_it_recalls_what_memory_finds_and_says_when_nothing_is_found(chat: Chat) -> None:
    called = await chat.say("recall editor")
    [call] = called.tool_calls
    assert call.name == "choir.memory.query"
    assert call.arguments == {"store": "knowledge", "mode": "hybrid", "query": "editor"}
    hit = {"text": 'my editor is "helix"', "score": 0.03, "agent": "agent-1", "store": "knowledge"}
    found = ToolResult.ok("1 hit(s) in your knowledge memory for 'editor'", hits=[hit])
    answered = await answer_with(chat, call.id, call.name, found)
    assert answered.text == 'From my memory: my editor is "helix"'

    again = (await chat.say("recall spaceships")).tool_calls[0]
    empty = ToolResult.ok("0 hit(s) in your knowledge memory for 'spaceships'", hits=[])
    assert "found nothing" in (await answer_with(chat, again.id, again.name, empty)).text


async def test_a_memory_tool_error_is_read_out(chat: Chat) -> None:
    call = (await chat.say("recall anything")).tool_calls[0]
    failed = ToolResult.fail("memory_unavailable", "agent-1's memory is unavailable: retry later")
    answered = await answer_with(chat, call.id, call.name, failed)
    assert answered.text == (
        "The tool answered with an error: agent-1's memory is unavailable: retry later"
    )
