"""`choir.web.search` in the real choir-agent: offered to the model only when a search provider and
its secret are configured, run with the session's copy of the key against a local Brave Search
stand-in (real HTTP), the key never in a log; called while unconfigured, a clear tool error."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from choir.config import SecretStore
from choir.core.integrations import NOT_BUILT
from choir.ctl.agent.views import unavailable_lines
from choir.protocol.names import to_wire_name
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.test_agent_process import Agent, choir_root, running_agent
from tests.harness.agent_logs import agent_log_text
from tests.harness.brave import BraveServer
from tests.harness.homes import external_postgres, make_home, read_config, write_config

pytestmark = pytest.mark.slow

KEY = "brave-e2e-key-7c1f"
WIRE = to_wire_name("choir.web.search")
SCRIPT = Script(
    steps=[
        ToolCallsStep(
            match="search the web",
            calls=[ScriptedCall(name="choir.web.search", arguments={"query": "choir", "count": 2})],
        ),
        ReplyStep(after="tool", repeat=True, text="Here is what I found."),
    ]
)

Start = Callable[..., Awaitable[tuple[Agent, BraveServer]]]


@pytest.fixture
async def start(root: Path, pg_params: ConnectParams) -> AsyncIterator[Start]:
    async with contextlib.AsyncExitStack() as stack:

        async def launch(*, configured: bool) -> tuple[Agent, BraveServer]:
            brave = await stack.enter_async_context(BraveServer(KEY))
            model = await stack.enter_async_context(ScriptedModelServer(SCRIPT))
            home = make_home(root, postgres=external_postgres(pg_params))
            data = read_config(home)
            data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
            if configured:
                data["search"] = {"web": {"secret": "brave-key", "endpoint": brave.endpoint}}
                SecretStore.load(home.secrets_file).with_secret("brave-key", KEY).save(
                    home.secrets_file
                )
            write_config(home, data)
            (root / "ws").mkdir()
            agent = await stack.enter_async_context(
                running_agent(home, root, model, root / "ws", tree=choir_root(root))
            )
            return agent, brave

        yield launch


def offered(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools") or []}


def tool_message(body: dict[str, Any]) -> dict[str, Any]:
    [message] = [m for m in body["messages"] if m["role"] == "tool"]
    content: dict[str, Any] = json.loads(message["content"])
    return content


async def test_a_configured_search_runs_with_the_sessions_key(start: Start) -> None:
    agent, brave = await start(configured=True)
    replies = await agent.chat("please search the web for choir")
    assert replies[-1]["text"] == "Here is what I found."

    first, second = [r.body for r in agent.model.requests if r.path.endswith("/completions")][:2]
    assert WIRE in offered(first)
    [request] = brave.requests
    assert (request.token, request.params["q"], request.params["count"]) == (KEY, "choir", "2")
    result = tool_message(second)
    assert result["status"] == "success", result
    assert [r["title"] for r in result["data"]["results"]] == [
        "choir result 0.0",
        "choir result 0.1",
    ]
    assert KEY not in agent_log_text(agent.daemon.home, "agent-1")
    unavailable = (await agent.operator.agent_status("agent-1")).unavailable_tools
    assert "choir.web.search" not in unavailable
    assert unavailable["choir.notion.query"] == NOT_BUILT


async def test_an_unconfigured_search_is_not_offered_and_a_call_says_why(start: Start) -> None:
    agent, brave = await start(configured=False)
    await agent.chat("please search the web for choir")

    first, second = [r.body for r in agent.model.requests if r.path.endswith("/completions")][:2]
    assert WIRE not in offered(first)
    assert to_wire_name("choir.fs.read") in offered(first)
    result = tool_message(second)
    assert result["status"] == "error"
    assert result["error_code"] == "tool_unavailable", result
    assert "no web search provider is configured" in result["summary"]
    assert not brave.requests
    unavailable = (await agent.operator.agent_status("agent-1")).unavailable_tools
    assert unavailable["choir.web.search"] == result["summary"].split(": ", 1)[1]
    lines = unavailable_lines(unavailable)
    assert lines[0] == f"tools      choir.web.search not offered: {unavailable['choir.web.search']}"
    assert lines[1].startswith(f"           not offered ({NOT_BUILT}): choir.email.check, ")
