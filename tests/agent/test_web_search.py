"""`choir.web.search` against a local server speaking Brave Search's API over real HTTP: the
results as the model sees them, pages, 429s waited out or reported, and every refusal an error
code the model can act on. Which config makes the tool available is checked here too."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from pydantic import SecretStr

from choir.agent.integrations import web_search
from choir.agent.integrations.session import Integrations
from choir.agent.integrations.web_search import SearchInput, search
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.kernel.registry import RegisteredTool, ToolRegistry
from choir.agent.kernel.workspace import Workspace
from choir.agent.replication.live_config import DynamicConfig, DynamicState, Secrets
from choir.core.integrations import (
    SearchProvider,
    search_provider,
    unavailable_tools,
    withheld_tools,
)
from choir.protocol.tooling.manifest import ToolManifest
from choir.protocol.tooling.tools import ToolResult
from tests.harness.brave import BraveServer

SEEDS = Path(__file__).parents[2] / "seeds" / "global"

KEY = "brave-test-key"


@pytest.fixture
async def brave() -> AsyncIterator[BraveServer]:
    async with BraveServer(KEY) as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def provider(server: BraveServer) -> SearchProvider:
    return SearchProvider("brave", server.endpoint, "brave-key")


async def run(
    http: aiohttp.ClientSession,
    server: BraveServer,
    key: str = KEY,
    within: float = 10,
    **call: object,
) -> ToolResult:
    arguments = {"query": "choir agents", **call}
    deadline = time.monotonic() + within
    return await search(
        http, provider(server), key, SearchInput.model_validate(arguments), deadline=deadline
    )


async def test_results_are_plain_structured_and_say_where_the_next_page_is(
    http: aiohttp.ClientSession, brave: BraveServer
) -> None:
    result = await run(http, brave, count=3, freshness="pw", country="DE")
    assert result.status == "success", result
    assert result.summary == "3 results for 'choir agents'"
    assert result.data["results"][0] == {
        "title": "choir agents result 0.0",
        "url": "https://example.org/0/0?q=choir agents",
        "snippet": "About choir agents & more (rank 0).",
        "age": "2 days ago",
    }
    assert result.data["next_offset"] == 1
    [request] = brave.requests
    assert request.params == {
        "q": "choir agents",
        "count": "3",
        "offset": "0",
        "freshness": "pw",
        "country": "DE",
    }

    last = await run(http, brave, count=2, offset=9)
    assert last.data["results"][1]["title"] == "choir agents result 9.1"
    assert "next_offset" not in last.data  # the provider has no more


async def test_a_429_is_waited_out_when_the_provider_says_when(
    http: aiohttp.ClientSession, brave: BraveServer
) -> None:
    brave.fail_next(429, {"X-RateLimit-Reset": "1, 2592000"})
    began = time.monotonic()
    result = await run(http, brave)
    assert result.status == "success", result
    assert time.monotonic() - began >= 1.0
    assert [r.status for r in brave.requests] == [429, 200]


async def test_a_429_that_does_not_fit_the_call_is_reported_with_its_wait(
    http: aiohttp.ClientSession, brave: BraveServer
) -> None:
    brave.fail_next(429, {"Retry-After": "60"})
    result = await run(http, brave)
    assert (result.error_code, result.data) == ("rate_limited", {"retry_after_s": 60.0})
    assert result.summary == "the search provider is rate limiting this key: try again in 60 s"

    brave.fail_next(429, {"X-RateLimit-Reset": "0"}, times=3)  # keeps refusing: gives up
    result = await run(http, brave)
    assert result.error_code == "rate_limited"
    assert [r.status for r in brave.requests[1:]] == [429, 429, 429]


@pytest.mark.parametrize(
    ("key", "status", "code", "says"),
    [
        ("wrong-key", None, "auth_failed", "choirctl secret set brave-key"),
        (KEY, 422, "invalid_request", "Injected failure 422."),
        (KEY, 503, "provider_error", "try again later"),
    ],
)
async def test_refusals_name_what_to_do(
    http: aiohttp.ClientSession,
    brave: BraveServer,
    key: str,
    status: int | None,
    code: str,
    says: str,
) -> None:
    if status is not None:
        brave.fail_next(status)
    result = await run(http, brave, key=key)
    assert result.status == "error"
    assert result.error_code == code
    assert says in result.summary
    assert key not in result.model_dump_json()


async def test_an_unreachable_or_silent_provider_is_an_error_not_a_hang(
    http: aiohttp.ClientSession, brave: BraveServer
) -> None:
    gone = SearchProvider("brave", "http://127.0.0.1:9/res/v1", "brave-key")
    call = SearchInput(query="x")
    result = await search(http, gone, KEY, call, deadline=time.monotonic() + 5)
    assert result.error_code == "unreachable"

    result = await run(http, brave, within=0.0)
    assert result.error_code == "timeout"


def test_the_tool_is_withheld_until_a_provider_and_its_secret_are_there() -> None:
    assert "add search.<name>" in withheld_tools({}, frozenset())[web_search.TOOL]
    search = {"search": {"web": {"provider": "brave", "secret": "brave-key"}}}
    assert withheld_tools(search, frozenset())[web_search.TOOL] == (
        "search.web's secret 'brave-key' is not set: choirctl secret set brave-key"
    )
    assert web_search.TOOL not in withheld_tools(search, frozenset({"brave-key"}))
    chosen = search_provider(
        {"b": {"secret": "k2"}, "a": {"secret": "k1", "endpoint": "http://x/v1/"}}
    )
    assert chosen == SearchProvider("a", "http://x/v1", "k1")  # the first by name
    shown = unavailable_tools(search, frozenset({"brave-key"}))
    assert shown["choir.web.browse"] == "choird did not say its workers run"
    assert web_search.TOOL not in shown
    assert "no Notion integration is bound" in shown["choir.notion.query"]


async def test_what_is_withheld_follows_config_and_secret_swaps(
    brave: BraveServer, tmp_path: Path
) -> None:
    manifest = ToolManifest.model_validate_json(
        (SEEDS / "tools" / "choir.web.search.json").read_text()
    )
    tool = RegisteredTool(manifest, "tools/global/choir.web.search.json", "global")
    state = DynamicState()
    workspace = Workspace(tmp_path)
    integrations = Integrations(state, ToolRegistry({tool.name: tool}), workspace)
    try:
        refused = integrations.gate("edge", tool, {"query": "x"})
        assert refused is not None
        assert refused.error_code == "tool_unavailable"
        assert "no web search provider is configured" in refused.summary

        search = {"web": {"secret": "brave-key", "endpoint": brave.endpoint}}
        state.swap_config(DynamicConfig.of(2, {"search": search}))
        state.swap_secrets(Secrets.of({"brave-key": SecretStr(KEY)}))
        assert web_search.TOOL not in integrations.withheld()
        assert integrations.gate("edge", tool, {"query": "x"}) is None
        hook = integrations.hooks()[tool.name]
        proposal = ToolProposal(lane="edge", call_id="c1", tool=tool.name, arguments={})
        found = await hook(proposal, {"query": "choir", "count": 1})
        assert found.status == "success", found

        state.swap_config(DynamicConfig.of(3, {}))  # a reload removed it after admission
        gone = await hook(proposal, {"query": "choir"})
        assert gone.error_code == "tool_unavailable"
        assert len(brave.requests) == 1
    finally:
        await integrations.close()
        workspace.close()
