"""`choir.notion.query` through the official `notion-client` against a local server speaking the
Notion API over real HTTP: search, a page as text (nested blocks, long pages cut and continued),
a database's rows with a filter, and every refusal an error code the model can act on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from choir.agent.integrations import notion
from choir.agent.integrations.notion import NotionInput
from choir.agent.integrations.notion_text import notion_id
from choir.core.integrations import NotionAccess
from choir.protocol.tooling.tools import ToolResult
from tests.harness.notion import NotionServer, block, page, status

TOKEN = "secret_notion-test-token"


@pytest.fixture
async def server() -> AsyncIterator[NotionServer]:
    async with NotionServer(TOKEN) as running:
        running.add_page(
            page("Roadmap", {"Status": status("Active")}),
            [
                block("heading_1", "Q1"),
                block("paragraph", "Ship the gateway."),
                block(
                    "bulleted_list_item",
                    "Telegram",
                    [block("bulleted_list_item", "files"), block("to_do", "cards", checked=True)],
                ),
                block("code", "choir up", language="shell"),
                block("divider"),
            ],
        )
        running.add_page(
            page("Long notes"), [block("paragraph", f"{n:04} " + "x" * 95) for n in range(300)]
        )
        running.add_database(
            "Tasks",
            [page(f"Task {n}", {"Status": status("Done" if n % 2 else "Open")}) for n in range(5)],
        )
        yield running


async def ask(server: NotionServer, token: str = TOKEN, **arguments: Any) -> ToolResult:
    access = NotionAccess(server.endpoint, "notion-key")
    return await notion.query(access, token, NotionInput.model_validate(arguments), 10)


async def test_search_finds_pages_and_data_sources_by_title(server: NotionServer) -> None:
    found = await ask(server, action="search", query="road")
    assert found.status == "success", found
    [item] = found.data["results"]
    assert (item["object"], item["title"]) == ("page", "Roadmap")
    assert server.requests[0].version == "2025-09-03"

    tasks = await ask(server, action="search", query="tasks")
    assert [(r["object"], r["title"]) for r in tasks.data["results"]] == [("data_source", "Tasks")]


async def test_a_page_reads_as_text_with_nested_blocks_from_its_url(server: NotionServer) -> None:
    url = server.pages[next(iter(server.pages))]["url"] + "?pvs=4"
    result = await ask(server, action="get_page", page_id=url)
    assert result.status == "success", result
    assert result.data["title"] == "Roadmap"
    assert result.data["properties"] == {"Name": "Roadmap", "Status": "Active"}
    assert result.data["content"] == (
        "# Q1\nShip the gateway.\n- Telegram\n  - files\n  - [x] cards\n"
        "```shell\nchoir up\n```\n---"
    )
    assert "next_cursor" not in result.data


async def test_a_long_page_is_cut_and_continued_from_its_cursor(server: NotionServer) -> None:
    page_id = list(server.pages)[1]
    first = await ask(server, action="get_page", page_id=page_id)
    assert first.truncated
    lines = first.data["content"].splitlines()
    assert lines[0].startswith("0000 ")
    assert len(first.data["content"]) <= notion.MAX_CHARS + 200
    rest = await ask(server, action="get_page", page_id=page_id, cursor=first.data["next_cursor"])
    assert not rest.truncated
    more = rest.data["content"].splitlines()
    assert int(more[0][:4]) == int(lines[-1][:4]) + 1  # nothing skipped, nothing twice
    assert more[-1].startswith("0299 ")


async def test_a_database_query_takes_the_filter_and_pages_on(server: NotionServer) -> None:
    database_id = next(iter(server.databases))
    rows = await ask(
        server,
        action="query_database",
        database_id=database_id.replace("-", ""),
        filter={"property": "Status", "select": {"equals": "Open"}},
        limit=2,
    )
    assert rows.status == "success", rows
    assert [r["properties"]["Name"] for r in rows.data["rows"]] == ["Task 0", "Task 2"]
    assert rows.summary == "2 rows of 'Tasks'; more with cursor"
    rest = await ask(
        server,
        action="query_database",
        database_id=database_id,
        filter={"property": "Status", "select": {"equals": "Open"}},
        cursor=rows.data["next_cursor"],
    )
    assert [r["properties"]["Name"] for r in rest.data["rows"]] == ["Task 4"]


@pytest.mark.parametrize(
    ("arguments", "fail", "code", "says"),
    [
        ({"action": "search", "token": "wrong"}, None, "auth_failed", "choirctl secret set"),
        ({"action": "get_page", "page_id": "0" * 32}, None, "not_found", "Connections"),
        ({"action": "get_page", "page_id": "no id here"}, None, "invalid_input", "neither"),
        ({"action": "get_page"}, None, "invalid_input", "needs page_id"),
        ({"action": "search"}, (429, "rate_limited"), "rate_limited", "try again later"),
        ({"action": "search"}, (400, "validation_error"), "invalid_request", "Injected"),
    ],
)
async def test_refusals_name_what_to_do(
    server: NotionServer,
    arguments: dict[str, Any],
    fail: tuple[int, str] | None,
    code: str,
    says: str,
) -> None:
    token = arguments.pop("token", TOKEN)
    if fail is not None:
        server.fail_next(*fail, times=3)  # outlasts the client's own retries
    result = await ask(server, token, **arguments)
    assert (result.status, result.error_code) == ("error", code), result
    assert says in result.summary
    assert TOKEN not in result.model_dump_json()


async def test_an_unreachable_notion_is_an_error() -> None:
    access = NotionAccess("http://127.0.0.1:9", "notion-key")
    result = await notion.query(access, TOKEN, NotionInput(action="search"), 5)
    assert result.error_code == "unreachable"


def test_ids_come_from_urls_or_ids_with_or_without_dashes() -> None:
    dashed = "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
    plain = dashed.replace("-", "")
    assert notion_id(plain) == dashed
    assert notion_id(dashed) == dashed
    assert notion_id(f"https://www.notion.so/team/Plan-{plain}?pvs=4") == dashed
    assert notion_id("https://www.notion.so/team/Plan") is None
