"""The scripted server over real HTTP: request validation, recording, script selection, latency."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from choir.scripted import (
    SCRIPT_HEADER,
    HttpErrorStep,
    ReplyStep,
    Script,
    ScriptedCall,
    ScriptedModelServer,
    ToolCallsStep,
)

HELLO = [{"role": "user", "content": "hello"}]
CALL = {"id": "c1", "type": "function", "function": {"name": "choir__fs__read", "arguments": "{}"}}
TOOL = {
    "type": "function",
    "function": {"name": "choir__fs__read", "parameters": {"type": "object"}},
}


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


def reply(text: str, **fields: Any) -> Script:
    return Script(steps=[ReplyStep(text=text, repeat=True, **fields)])


async def post(
    http: httpx.AsyncClient, server: ScriptedModelServer, body: Any, **kw: Any
) -> httpx.Response:
    return await http.post(f"{server.url}/chat/completions", json=body, **kw)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ([1], "must be a JSON object"),
        ({"messages": HELLO}, "model: Field required"),
        ({"model": "m", "messages": []}, "messages: List should have at least 1 item"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        (
            {"model": "m", "messages": HELLO, "tools": [{"name": "choir__fs__read"}]},
            "tools[0].type",
        ),
        (
            {
                "model": "m",
                "messages": HELLO,
                "tools": [{"type": "function", "function": {"name": "choir.fs.read"}}],
            },
            "tools[0].function.name: String should match pattern",
        ),
        ({"model": "m", "messages": HELLO, "stream": True}, "stream: "),
        ({"model": "m", "messages": HELLO, "temperature": 3}, "temperature: "),
        (
            {
                "model": "m",
                "messages": [*HELLO, {"role": "tool", "tool_call_id": "c9", "content": "x"}],
            },
            "not a pending tool call",
        ),
        (
            {
                "model": "m",
                "messages": [*HELLO, {"role": "assistant", "tool_calls": [CALL]}, *HELLO],
            },
            "tool calls ['c1'] were not answered",
        ),
        (
            {"model": "m", "messages": [*HELLO, {"role": "assistant", "tool_calls": [CALL]}]},
            "tool calls ['c1'] were not answered",
        ),
    ],
)
async def test_malformed_requests_are_refused_and_recorded(
    http: httpx.AsyncClient, body: Any, problem: str
) -> None:
    async with ScriptedModelServer(reply("x")) as server:
        response = await post(http, server, body)
    assert response.status_code == 400
    assert problem in response.json()["error"]["message"]
    [recorded] = server.requests
    assert recorded.problem is not None
    assert problem in recorded.problem
    assert recorded.body == body


async def test_a_body_that_is_not_json_is_refused(http: httpx.AsyncClient) -> None:
    async with ScriptedModelServer(reply("x")) as server:
        response = await http.post(f"{server.url}/chat/completions", content=b"{nope")
    assert response.status_code == 400
    assert server.requests[0].body is None


async def test_a_complete_tool_round_is_accepted(http: httpx.AsyncClient) -> None:
    messages = [
        *HELLO,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    ]
    async with ScriptedModelServer(reply("done")) as server:
        response = await post(http, server, {"model": "m", "messages": messages, "tools": [TOOL]})
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "done"


async def test_tool_calls_are_sent_with_wire_names(http: httpx.AsyncClient) -> None:
    script = Script(
        steps=[ToolCallsStep(calls=[ScriptedCall(name="choir.fs.read", arguments={"path": "a"})])]
    )
    async with ScriptedModelServer(script) as server:
        response = await post(http, server, {"model": "m", "messages": HELLO})
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "choir__fs__read", "arguments": '{"path":"a"}'},
        }
    ]


async def test_scripts_are_chosen_by_model_then_header(http: httpx.AsyncClient) -> None:
    scripts = {"edge-model": reply("from edge"), "core-model": reply("from core")}
    async with ScriptedModelServer(scripts) as server:
        edge = await post(http, server, {"model": "edge-model", "messages": HELLO})
        core = await post(http, server, {"model": "core-model", "messages": HELLO})
        chosen = await post(
            http,
            server,
            {"model": "edge-model", "messages": HELLO},
            headers={SCRIPT_HEADER: "core-model"},
        )
        unknown = await post(http, server, {"model": "other", "messages": HELLO})
    texts = [r.json()["choices"][0]["message"]["content"] for r in (edge, core, chosen)]
    assert texts == ["from edge", "from core", "from core"]
    assert unknown.status_code == 400
    assert "no script for model 'other' (scripts: core-model, edge-model)" in unknown.text
    assert len(server.requests_for("core-model")) == 2
    assert [r.script for r in server.requests] == ["edge-model", "core-model", "core-model", None]


async def test_a_single_script_answers_any_model(http: httpx.AsyncClient) -> None:
    async with ScriptedModelServer(reply("hi")) as server:
        response = await post(http, server, {"model": "whatever/model", "messages": HELLO})
    assert response.json()["model"] == "whatever/model"
    assert server.requests[0].script == "*"


async def test_an_exhausted_script_says_so(http: httpx.AsyncClient) -> None:
    async with ScriptedModelServer(Script(steps=[ReplyStep(text="only once")])) as server:
        first = await post(http, server, {"model": "m", "messages": HELLO})
        second = await post(http, server, {"model": "m", "messages": HELLO})
    assert first.status_code == 200
    assert second.status_code == 400
    message = second.json()["error"]["message"]
    assert "script '*' is exhausted" in message
    assert "last user message 'hello'" in message


async def test_delays_are_kept_or_skipped(http: httpx.AsyncClient) -> None:
    script = reply("slow", delay_ms=300)
    async with (
        ScriptedModelServer(script) as slow,
        ScriptedModelServer(script, zero_latency=True) as fast,
    ):
        started = time.perf_counter()
        await post(http, slow, {"model": "m", "messages": HELLO})
        middle = time.perf_counter()
        await post(http, fast, {"model": "m", "messages": HELLO})
        ended = time.perf_counter()
    assert middle - started >= 0.3
    assert ended - middle < 0.2


async def test_http_errors_send_their_body(http: httpx.AsyncClient) -> None:
    steps = [
        HttpErrorStep(status=503, body={"detail": "down"}),
        HttpErrorStep(status=500, message="boom"),
    ]
    async with ScriptedModelServer(Script(steps=steps)) as server:
        custom = await post(http, server, {"model": "m", "messages": HELLO})
        standard = await post(http, server, {"model": "m", "messages": HELLO})
    assert (custom.status_code, custom.json()) == (503, {"detail": "down"})
    assert standard.status_code == 500
    assert standard.json()["error"]["message"] == "boom"
    assert [r.problem for r in server.requests] == [None, None]


async def test_requests_are_recorded_with_path_and_headers(http: httpx.AsyncClient) -> None:
    async with ScriptedModelServer(reply("x")) as server:
        await http.post(
            f"{server.url}/chat/completions",
            json={"model": "m", "messages": HELLO, "temperature": 0.3},
            headers={"Authorization": "Bearer k"},
        )
    [recorded] = server.requests
    assert (recorded.path, recorded.status) == ("/v1/chat/completions", 200)
    assert recorded.headers["Authorization"] == "Bearer k"
    assert recorded.body["temperature"] == 0.3
