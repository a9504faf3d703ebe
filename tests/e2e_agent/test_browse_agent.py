"""`choir.web.browse` end to end: a real choir-agent whose scripted model calls the tool, choird's
browser worker driving real Chromium against a web site on loopback, the screenshot landing in
the workspace's `.choirtmp/send/`, the context closed at agent stop; with the worker off, the
tool is absent from the request the model server received and the status says why."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from choir.protocol.names import to_wire_name
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.test_agent_process import Agent, choir_root, running_agent
from tests.harness.chromium import chromium_processes, require_chromium
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.website import LocalSite

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _chromium() -> None:
    require_chromium()


WIRE = to_wire_name("choir.web.browse")
Start = Callable[..., Awaitable[tuple[Agent, LocalSite]]]


def script(site: LocalSite) -> Script:
    return Script(
        steps=[
            ToolCallsStep(
                match="browse the site",
                calls=[
                    ScriptedCall(
                        name="choir.web.browse", arguments={"action": "open", "url": site.url("/")}
                    )
                ],
            ),
            ToolCallsStep(
                match="show me",
                calls=[ScriptedCall(name="choir.web.browse", arguments={"action": "screenshot"})],
            ),
            ToolCallsStep(
                match="read it again",
                repeat=True,
                calls=[ScriptedCall(name="choir.web.browse", arguments={"action": "read"})],
            ),
            ReplyStep(after="tool", repeat=True, text="Done browsing."),
        ]
    )


@pytest.fixture
async def start(root: Path, pg_params: ConnectParams) -> AsyncIterator[Start]:
    async with contextlib.AsyncExitStack() as stack:

        async def launch(*, enabled: bool) -> tuple[Agent, LocalSite]:
            site = await stack.enter_async_context(LocalSite())
            model = await stack.enter_async_context(ScriptedModelServer(script(site)))
            home = make_home(root, postgres=external_postgres(pg_params))
            data = read_config(home)
            data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
            data["browser"] = {"enabled": enabled, "allow_private_networks": True}
            workspace = data["agents"]["agent-1"]["defaults"]["workspace"]
            data["workspaces"][workspace] = {"path": str(root / "ws")}  # where screenshots go
            write_config(home, data)
            (root / "ws").mkdir()
            agent = await stack.enter_async_context(
                running_agent(home, root, model, root / "ws", tree=choir_root(root))
            )
            return agent, site

        yield launch


def offered(body: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools") or []}


def last_tool_result(agent: Agent) -> dict[str, Any]:
    bodies = [r.body for r in agent.model.requests if r.path.endswith("/completions")]
    messages = [m for m in bodies[-1]["messages"] if m["role"] == "tool"]
    result: dict[str, Any] = json.loads(messages[-1]["content"])
    return result


async def test_an_agent_browses_and_screenshots_through_choird(start: Start) -> None:
    agent, site = await start(enabled=True)
    worker = agent.daemon.browser
    assert worker is not None
    assert await worker.wait_ready(30)
    for _ in range(100):  # made at agent start, before any call
        if agent.session_id in worker.contexts():
            break
        await asyncio.sleep(0.05)
    assert worker.contexts() == {agent.session_id: "agent-1"}

    replies = await agent.chat("please browse the site")
    assert replies[-1]["text"] == "Done browsing."
    first = next(r.body for r in agent.model.requests if r.path.endswith("/completions"))
    assert WIRE in offered(first)
    opened = last_tool_result(agent)
    assert opened["status"] == "success", opened
    assert opened["data"]["title"] == "Choir test site"
    assert "Welcome to the test site" in opened["data"]["text"]
    assert site.hits["/"] == 1
    assert (
        "choir.web.browse" not in (await agent.operator.agent_status("agent-1")).unavailable_tools
    )

    await agent.chat("now show me")
    shot = last_tool_result(agent)
    assert shot["status"] == "success", shot
    saved = agent.workspace / shot["data"]["path"]
    assert saved.parent == agent.workspace / ".choirtmp" / "send"
    assert saved.read_bytes().startswith(b"\x89PNG")

    [chromium] = chromium_processes()  # Chromium dies mid-session: a clear error, choird up
    chromium.kill()
    for _ in range(100):
        if worker.state != "running":
            break
        await asyncio.sleep(0.05)
    await agent.chat("please read it again")
    down = last_tool_result(agent)
    assert (down["status"], down["error_code"]) == ("error", "service_unavailable"), down
    assert (await agent.operator.status()).uptime_s > 0  # choird answers
    assert await worker.wait_ready(30)  # restarted; the session's context is made again
    await agent.chat("please read it again")
    back = last_tool_result(agent)
    assert back["error_code"] == "no_such_tab", back  # a fresh context: its tabs are gone
    assert "older tabs are gone" in back["data"]["note"]

    await agent.operator.agent_stop("agent-1")
    assert worker.contexts() == {}


async def test_with_the_worker_off_the_tool_is_not_offered(start: Start) -> None:
    agent, site = await start(enabled=False)
    await agent.chat("please browse the site")
    first, second = [r.body for r in agent.model.requests if r.path.endswith("/completions")][:2]
    assert WIRE not in offered(first)
    assert to_wire_name("choir.fs.read") in offered(first)
    refused = [m for m in second["messages"] if m["role"] == "tool"]
    result = json.loads(refused[-1]["content"])
    assert result["error_code"] == "tool_unavailable", result
    assert "set browser.enabled to true" in result["summary"]
    assert site.hits["/"] == 0
    unavailable = (await agent.operator.agent_status("agent-1")).unavailable_tools
    assert "the browser worker is not running" in unavailable["choir.web.browse"]
