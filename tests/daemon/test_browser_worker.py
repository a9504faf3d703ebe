"""choird's browser worker and `choir.web.browse`, against real Chromium (Playwright) and a real
web site on loopback (`tests.harness.website`): every action, the page-load timeout, one
isolated context per session, contexts closed at session end, and Chromium killed mid-session
(a clear `service_unavailable`, then recovery)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from choir.config.browser import BrowserConfig
from choir.daemon.agents.host_tools import HostTools
from choir.daemon.sessions.state import LiveSession, SessionContext
from choir.daemon.workers.browser.chromium import BrowserWorker
from choir.daemon.workers.browser.tool import BrowseTool
from choir.protocol import ExecuteHostToolRequest, ResourceBindings, ToolResult
from tests.harness.chromium import chromium_processes, require_chromium
from tests.harness.website import LARGE_PARAGRAPHS, LocalSite

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _chromium() -> None:
    require_chromium()


Browse = Callable[..., Awaitable[ToolResult]]
PAGE_TIMEOUT_MS = 6_000
"""Long enough for the large page on a loaded machine; what the never-loading page waits."""
_calls = itertools.count()


def session(session_id: str, agent_id: str) -> SessionContext:
    bindings = ResourceBindings(workspace="ws", llm="demo", dm="console")
    live = LiveSession(session_id, agent_id, "hash", bindings, False, 0, "genesis", None)
    return live.context("token")


@pytest.fixture
async def site() -> AsyncIterator[LocalSite]:
    async with LocalSite() as served:
        yield served


def config(**changes: Any) -> BrowserConfig:
    return BrowserConfig(enabled=True, allow_private_networks=True, **changes)


@pytest.fixture
async def worker() -> AsyncIterator[BrowserWorker]:
    async with BrowserWorker(config(page_timeout_ms=PAGE_TIMEOUT_MS)) as running:
        assert await running.wait_ready(30)
        yield running


@pytest.fixture
def host_tools(worker: BrowserWorker, tmp_path: Path) -> HostTools:
    tools = HostTools()
    BrowseTool(worker, lambda call: tmp_path).register(tools)
    return tools


def browser_of(host_tools: HostTools, session_id: str = "s-1", agent_id: str = "agent-1") -> Browse:
    ctx = session(session_id, agent_id)

    async def browse(**arguments: Any) -> ToolResult:
        request = ExecuteHostToolRequest(
            tool_name="choir.web.browse", call_id=f"c{next(_calls)}", input=arguments
        )
        return (await host_tools.execute(ctx, request)).tool_result()

    return browse


async def test_open_reads_clean_text_and_lists_links(
    host_tools: HostTools, site: LocalSite
) -> None:
    browse = browser_of(host_tools)
    opened = await browse(action="open", url=site.url("/"))
    assert opened.status == "success", opened
    assert opened.data["title"] == "Choir test site"
    assert opened.data["status"] == 200
    assert "This page has a few links and a form." in opened.data["text"]  # spaces folded
    assert opened.data["next_offset"] is None

    links = await browse(action="links")
    assert [link["text"] for link in links.data["links"]] == [
        "Second page",
        "A large page",
        "Open in a new tab",
    ]
    assert links.data["links"][0]["url"] == site.url("/page2")


async def test_a_large_page_is_read_in_chunks(host_tools: HostTools, site: LocalSite) -> None:
    browse = browser_of(host_tools)
    first = await browse(action="open", url=site.url("/large"), max_chars=5_000)
    assert first.status == "success", first
    assert len(first.data["text"]) <= 5_000
    assert first.truncated
    total, offset = first.data["total_chars"], first.data["next_offset"]
    assert total > 250_000
    assert first.data["text"].startswith("Paragraph 0 of the large page")

    second = await browse(action="read", offset=offset, max_chars=5_000)
    assert second.data["offset"] == offset
    assert "Paragraph" in second.data["text"]
    assert second.data["text"] not in first.data["text"]
    capped = await browse(action="read", offset=0, max_chars=200_000)
    assert len(capped.data["text"]) <= 20_000  # the per-call cap, whatever is asked

    last = await browse(action="read", offset=total - 100)
    assert last.data["next_offset"] is None
    assert last.data["text"].endswith(
        f"Paragraph {LARGE_PARAGRAPHS - 1} of the large page, with some words to fill it out."
    )


async def test_find_click_and_type(host_tools: HostTools, site: LocalSite) -> None:
    browse = browser_of(host_tools)
    await browse(action="open", url=site.url("/form"))
    found = await browse(action="find", selector="input, button")
    assert [(e["tag"], e.get("name")) for e in found.data["elements"]] == [
        ("input", "name"),
        ("button", None),
    ]
    typed = await browse(action="type", selector="#name", value="Ada")
    assert typed.status == "success", typed
    clicked = await browse(action="click", text="Greet")
    assert clicked.status == "success", clicked
    assert (await browse(action="read", selector="#out")).data["text"] == "Hello, Ada!"

    await browse(action="open", url=site.url("/"))
    submitted = await browse(action="type", selector="#q", value="choir", submit=True)
    assert submitted.data["url"] == site.url("/result?q=choir"), submitted
    assert "Results for choir" in (await browse(action="read")).data["text"]
    missing = await browse(action="click", selector="#nothing-here")
    assert (missing.status, missing.error_code) == ("error", "not_found")


async def test_tabs_open_switch_and_close(host_tools: HostTools, site: LocalSite) -> None:
    browse = browser_of(host_tools)
    await browse(action="open", url=site.url("/"))
    await browse(action="click", selector="#popup")  # target=_blank: a second tab
    await asyncio.sleep(0.3)
    tabs = await browse(action="tabs")
    assert [(t["tab"], t["active"]) for t in tabs.data["tabs"]] == [(1, False), (2, True)]
    third = await browse(action="open", url=site.url("/form"), new_tab=True)
    assert third.data["tab"] == 3
    switched = await browse(action="switch", tab=1)
    assert switched.data["url"] == site.url("/")
    assert (await browse(action="read")).data["title"] == "Choir test site"
    closed = await browse(action="close_tab", tab=1)
    assert closed.data["active"] == 3
    gone = await browse(action="switch", tab=1)
    assert gone.error_code == "no_such_tab"


async def test_screenshot_goes_to_the_workspace_send_folder(
    host_tools: HostTools, site: LocalSite, tmp_path: Path
) -> None:
    browse = browser_of(host_tools)
    await browse(action="open", url=site.url("/"))
    shot = await browse(action="screenshot")
    assert shot.status == "success", shot
    path = tmp_path / shot.data["path"]
    assert path.parent == tmp_path / ".choirtmp" / "send"
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


async def test_a_screenshot_never_follows_a_link_out_of_the_workspace(
    host_tools: HostTools, site: LocalSite, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / ".choirtmp").mkdir()
    (tmp_path / ".choirtmp" / "send").symlink_to(outside)
    browse = browser_of(host_tools)
    await browse(action="open", url=site.url("/"))
    shot = await browse(action="screenshot")
    assert (shot.status, shot.error_code) == ("error", "path_outside_workspace"), shot
    assert list(outside.iterdir()) == []


async def test_only_web_urls_and_public_addresses_open(tmp_path: Path, site: LocalSite) -> None:
    async with BrowserWorker(BrowserConfig(enabled=True)) as worker:  # private networks off
        assert await worker.wait_ready(30)
        tools = HostTools()
        BrowseTool(worker, lambda call: tmp_path).register(tools)
        browse = browser_of(tools)
        local = await browse(action="open", url=site.url("/"))
        assert (local.status, local.error_code) == ("error", "blocked_address")
        assert "browser.allow_private_networks" in local.summary
        assert site.hits["/"] == 0
        files = await browse(action="open", url="file:///etc/passwd")
        assert files.error_code == "invalid_input"


async def test_a_redirect_to_a_private_address_is_refused(tmp_path: Path, site: LocalSite) -> None:
    """127.0.0.1 plays a public host, 127.0.0.2 a private one: a redirect from one to the
    other (which Playwright's request routing never sees) goes through the egress proxy."""
    config = BrowserConfig(enabled=True, page_timeout_ms=5_000)
    async with (
        LocalSite(host="127.0.0.2") as internal,
        BrowserWorker(config, egress=lambda address: address == "127.0.0.1") as worker,
    ):
        assert await worker.wait_ready(30)
        tools = HostTools()
        BrowseTool(worker, lambda call: tmp_path).register(tools)
        browse = browser_of(tools)
        public = await browse(action="open", url=site.url("/page2"))
        assert public.status == "success", public  # through the proxy
        bounced = await browse(action="open", url=site.url("/redirect?to=" + internal.url("/")))
        assert site.hits["/redirect"] == 1
        assert internal.hits["/"] == 0
        assert "private or loopback address" in bounced.data.get("text", ""), bounced
        direct = await browse(action="open", url=internal.url("/"))
        assert direct.error_code == "blocked_address"
        assert internal.hits["/"] == 0


async def test_a_page_that_never_loads_times_out_with_a_clear_error(
    host_tools: HostTools, site: LocalSite
) -> None:
    browse = browser_of(host_tools)
    started = asyncio.get_running_loop().time()
    hung = await browse(action="open", url=site.url("/never"))
    waited = asyncio.get_running_loop().time() - started
    assert (hung.status, hung.error_code) == ("timeout", "timeout"), hung
    assert f"no answer within {PAGE_TIMEOUT_MS // 1000} s" in hung.summary
    assert waited < 3 * PAGE_TIMEOUT_MS / 1000
    slow = await browse(action="open", url=site.url("/slow"))  # the tab still works
    assert slow.status == "success"
    assert "Worth the wait." in slow.data["text"]


async def test_each_session_has_its_own_context(
    host_tools: HostTools, worker: BrowserWorker, site: LocalSite
) -> None:
    alice, bob = browser_of(host_tools, "s-a", "alice"), browser_of(host_tools, "s-b", "bob")
    await alice(action="open", url=site.url("/form"))
    await alice(action="type", selector="#name", value="secret")
    assert (await bob(action="tabs")).data["tabs"] == []  # none of alice's tabs
    await bob(action="open", url=site.url("/page2"))
    assert [t["url"] for t in (await alice(action="tabs")).data["tabs"]] == [site.url("/form")]
    assert [t["url"] for t in (await bob(action="tabs")).data["tabs"]] == [site.url("/page2")]
    assert worker.contexts() == {"s-a": "alice", "s-b": "bob"}
    a, b = worker._sessions["s-a"].context, worker._sessions["s-b"].context
    await a.add_cookies([{"name": "k", "value": "v", "url": site.url("/")}])
    assert await b.cookies() == []


async def test_contexts_follow_sessions(worker: BrowserWorker, host_tools: HostTools) -> None:
    worker.session_started("s-new", "agent-2")  # agent start: the context is made at once
    for _ in range(100):
        if "s-new" in worker.contexts():
            break
        await asyncio.sleep(0.05)
    assert worker.contexts() == {"s-new": "agent-2"}
    context = worker._sessions["s-new"].context
    worker.session_ended("s-new")  # agent stop
    assert worker.contexts() == {}
    for _ in range(100):
        if not context.pages and context not in worker._browser.contexts:  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.05)
    assert context not in worker._browser.contexts  # type: ignore[union-attr]


async def test_chromium_killed_answers_unavailable_then_recovers(
    worker: BrowserWorker, host_tools: HostTools, site: LocalSite
) -> None:
    browse = browser_of(host_tools)
    assert (await browse(action="open", url=site.url("/"))).status == "success"
    [chromium] = chromium_processes()
    chromium.kill()
    for _ in range(100):
        if worker.state != "running":
            break
        await asyncio.sleep(0.05)
    down = await browse(action="read")
    assert (down.status, down.error_code) == ("error", "service_unavailable"), down
    assert "retry in a few seconds" in down.summary
    assert worker.unavailable() is None  # still offered: it is coming back
    assert await worker.wait_ready(30)
    back = await browse(action="open", url=site.url("/page2"))
    assert back.status == "success", back
    assert "older tabs are gone" in back.data["note"]


async def test_a_disabled_or_missing_browser_says_why(tmp_path: Path) -> None:
    async with BrowserWorker(BrowserConfig()) as off:
        assert "set browser.enabled to true" in (off.unavailable() or "")
        tools = HostTools()
        BrowseTool(off, lambda call: tmp_path).register(tools)
        assert tools.unavailable() == {"choir.web.browse": off.unavailable()}
        answer = await browser_of(tools)(action="open", url="https://example.org/")
        assert answer.error_code == "tool_unavailable"
    missing = BrowserConfig(enabled=True, executable=str(tmp_path / "no-chromium"))
    async with BrowserWorker(missing) as broken:
        for _ in range(50):
            if broken.state == "failed":
                break
            await asyncio.sleep(0.02)
        assert "apt-get install chromium" in (broken.unavailable() or "")


def test_config_check_names_a_bad_browser_section() -> None:
    from choir.config import validate_config_data

    example = Path(__file__).parents[2] / "seeds" / "config.example.json"
    data = json.loads(example.read_text())
    data["browser"] = {"enabled": "yes", "page_timeout_ms": 90_000, "tabs": 3}
    errors = validate_config_data(data, None).errors
    assert any(e.startswith("browser.enabled") for e in errors), errors
    assert any(e.startswith("browser.page_timeout_ms") for e in errors), errors
    assert any(e.startswith("browser.tabs") for e in errors), errors
    data["browser"] = {"enabled": True}
    assert validate_config_data(data, None).errors == []


async def test_tabs_are_capped_for_the_agent_and_for_pages(tmp_path: Path, site: LocalSite) -> None:
    async with BrowserWorker(config(max_tabs=2)) as worker:
        assert await worker.wait_ready(30)
        tools = HostTools()
        BrowseTool(worker, lambda call: tmp_path).register(tools)
        browse = browser_of(tools)
        await browse(action="open", url=site.url("/"))
        await browse(action="click", selector="#popup")  # a second tab, the page's
        await browse(action="switch", tab=1)
        await browse(action="click", selector="#popup")  # a third: closed at once
        await asyncio.sleep(0.5)
        assert [t["tab"] for t in (await browse(action="tabs")).data["tabs"]] == [1, 2]
        refused = await browse(action="open", url=site.url("/page2"), new_tab=True)
        assert refused.error_code == "too_many_tabs", refused


def test_a_choird_without_the_worker_says_the_tool_is_unavailable() -> None:
    assert HostTools().unavailable() == {"choir.web.browse": "this choird does not serve it"}
