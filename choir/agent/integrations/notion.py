"""`choir.notion.query` (§8.7, §18.3): read the bound Notion integration's workspace, as text.

Through the official client (`notion-client`, Notion API 2025-09-03): `search` finds pages and
data sources by title, `get_page` reads a page's properties and blocks (nested blocks indented,
up to `MAX_DEPTH`), `query_database` reads a database's rows (its first data source) with the
caller's filter and sorts. Each answer is bounded (`MAX_CHARS` of page text, `limit` results)
and says how to go on (`next_cursor`, passed back as `cursor`). The client retries 429s and 5xx
itself; what still fails is an error code the model can act on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final, Literal

import httpx
from notion_client import AsyncClient
from notion_client.client import RetryOptions
from notion_client.errors import APIResponseError, HTTPResponseError, RequestTimeoutError
from pydantic import BaseModel, ConfigDict, Field

from choir.agent.integrations.notion_text import (
    block_line,
    notion_id,
    properties_text,
    title_of,
)
from choir.core.integrations import NOTION_QUERY, NotionAccess
from choir.protocol.tooling.tools import ToolResult

TOOL: Final = NOTION_QUERY
MAX_CHARS: Final = 20_000
"""Page text per answer; past it the answer is cut at a block and says `next_cursor`."""
MAX_DEPTH: Final = 3
"""Nesting levels of blocks read under a top-level block (list items, toggles)."""
MAX_REQUESTS: Final = 40
"""Block-children requests per `get_page` call: a huge page is cut, not read forever."""
PAGE_SIZE: Final = 100
_QUIET: Final = logging.getLogger("choir.agent.notion")


class NotionInput(BaseModel):
    """The call's arguments (already checked against the manifest's JSON schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["search", "get_page", "query_database"]
    query: str | None = None
    page_id: str | None = None
    database_id: str | None = None
    filter: dict[str, Any] | None = None
    sorts: list[dict[str, Any]] | None = None
    limit: int = Field(default=20, ge=1, le=100)
    cursor: str | None = None


async def query(
    access: NotionAccess, token: str, call: NotionInput, timeout_s: float
) -> ToolResult:
    """Run `call` against the integration `access` with its `token`."""
    client = AsyncClient(
        auth=token,
        base_url=access.endpoint,
        timeout_ms=int(timeout_s * 1000),
        logger=_QUIET,
        retry=RetryOptions(max_retries=2, initial_retry_delay_ms=500, max_retry_delay_ms=4000),
    )
    try:
        async with client:
            match call.action:
                case "search":
                    return await _search(client, call)
                case "get_page":
                    return await _get_page(client, call)
                case "query_database":
                    return await _query_database(client, call)
    except APIResponseError as error:
        return _refused(error, access)
    except RequestTimeoutError:
        return ToolResult.fail("timeout", "Notion did not answer in time; try again later")
    except HTTPResponseError as error:
        return ToolResult.fail("provider_error", f"Notion failed (HTTP {error.status})")
    except httpx.HTTPError as error:
        return ToolResult.fail("unreachable", f"Notion cannot be reached ({type(error).__name__})")


async def _search(client: AsyncClient, call: NotionInput) -> ToolResult:
    body: dict[str, Any] = {"page_size": call.limit}
    if call.query:
        body["query"] = call.query
    if call.cursor:
        body["start_cursor"] = call.cursor
    answer = await client.search(**body)
    results = [
        {
            "id": item.get("id"),
            "object": item.get("object"),
            "title": title_of(item),
            "url": item.get("url"),
            "last_edited_time": item.get("last_edited_time"),
        }
        for item in _results(answer)
    ]
    what = repr(call.query) if call.query else "everything shared with the integration"
    return _page_of(f"{len(results)} found for {what}", answer, results=results)


async def _get_page(client: AsyncClient, call: NotionInput) -> ToolResult:
    page_id = _required_id(call.page_id, "page_id")
    if isinstance(page_id, ToolResult):
        return page_id
    page = await client.pages.retrieve(page_id=page_id)
    reader = _BlockReader(client)
    next_cursor = await reader.read(page_id, call.cursor)
    data: dict[str, Any] = {
        "id": page.get("id"),
        "title": title_of(page),
        "url": page.get("url"),
        "properties": properties_text(page),
        "content": "\n".join(reader.lines),
    }
    if next_cursor is not None:
        data["next_cursor"] = next_cursor
    more = "; more with cursor" if next_cursor is not None else ""
    summary = f"page {data['title']!r}: {len(reader.lines)} blocks{more}"
    return ToolResult(
        status="success", summary=summary, data=data, truncated=next_cursor is not None
    )


async def _query_database(client: AsyncClient, call: NotionInput) -> ToolResult:
    database_id = _required_id(call.database_id, "database_id")
    if isinstance(database_id, ToolResult):
        return database_id
    database = await client.databases.retrieve(database_id=database_id)
    sources = database.get("data_sources") or []
    if not sources:
        return ToolResult.fail("not_found", f"database {database_id} has no data source to query")
    body: dict[str, Any] = {"page_size": call.limit}
    if call.filter is not None:
        body["filter"] = call.filter
    if call.sorts is not None:
        body["sorts"] = call.sorts
    if call.cursor:
        body["start_cursor"] = call.cursor
    answer = await client.data_sources.query(data_source_id=sources[0]["id"], **body)
    rows = [
        {"id": row.get("id"), "url": row.get("url"), "properties": properties_text(row)}
        for row in _results(answer)
    ]
    summary = f"{len(rows)} rows of {title_of(database) or database_id!r}"
    return _page_of(summary, answer, rows=rows)


class _BlockReader:
    """A page's blocks as lines, nested ones indented, until `MAX_CHARS` or `MAX_REQUESTS`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self.lines: list[str] = []
        self._chars = 0
        self._requests = 0

    async def read(self, page_id: str, cursor: str | None) -> str | None:
        """Read the page's top-level blocks from `cursor`; the cursor to go on from, or None
        when the page was read to its end."""
        while True:
            answer = await self._children(page_id, cursor)
            for block in _results(answer):
                if self._full():
                    return str(block.get("id"))  # the next answer starts at this block
                await self._take(block, 0)
            cursor = answer.get("next_cursor") if answer.get("has_more") else None
            if cursor is None:
                return None
            if self._full():
                return str(cursor)

    async def _take(self, block: Mapping[str, Any], depth: int) -> None:
        line = "  " * depth + block_line(block)
        self.lines.append(line)
        self._chars += len(line) + 1
        if (
            block.get("has_children")
            and depth + 1 < MAX_DEPTH
            and block.get("type")
            not in (
                "child_page",
                "child_database",
            )
        ):
            cursor: str | None = None
            while not self._full():
                answer = await self._children(str(block["id"]), cursor)
                for child in _results(answer):
                    if self._full():
                        return
                    await self._take(child, depth + 1)
                cursor = answer.get("next_cursor") if answer.get("has_more") else None
                if cursor is None:
                    return

    async def _children(self, block_id: str, cursor: str | None) -> Mapping[str, Any]:
        self._requests += 1
        arguments: dict[str, Any] = {"block_id": block_id, "page_size": PAGE_SIZE}
        if cursor:
            arguments["start_cursor"] = cursor
        answer = await self._client.blocks.children.list(**arguments)
        return answer if isinstance(answer, Mapping) else {}

    def _full(self) -> bool:
        return self._chars >= MAX_CHARS or self._requests >= MAX_REQUESTS


def _results(answer: Any) -> list[Mapping[str, Any]]:
    items = answer.get("results") if isinstance(answer, Mapping) else None
    return [item for item in items or [] if isinstance(item, Mapping)]


def _page_of(summary: str, answer: Any, **data: Any) -> ToolResult:
    if isinstance(answer, Mapping) and answer.get("has_more") and answer.get("next_cursor"):
        data["next_cursor"] = answer["next_cursor"]
        summary += "; more with cursor"
    return ToolResult.ok(summary, **data)


def _required_id(value: str | None, name: str) -> str | ToolResult:
    if not value:
        return ToolResult.fail("invalid_input", f"this action needs {name}")
    found = notion_id(value)
    if found is None:
        return ToolResult.fail(
            "invalid_input", f"{name} {value!r} is neither a Notion id nor a URL ending in one"
        )
    return found


def _refused(error: APIResponseError, access: NotionAccess) -> ToolResult:
    code = str(getattr(error.code, "value", error.code))
    message = str(error).splitlines()[0] if str(error) else code
    if code == "unauthorized":
        return ToolResult.fail(
            "auth_failed",
            f"Notion refused the integration's token (secret {access.secret!r}): the operator "
            f"sets a valid one with choirctl secret set {access.secret}",
        )
    if code in ("object_not_found", "restricted_resource"):
        return ToolResult.fail(
            "not_found",
            f"{message} — it does not exist or is not shared with the integration (in Notion: "
            "the page's ••• menu → Connections)",
        )
    if code == "rate_limited":
        return ToolResult.fail(
            "rate_limited", "Notion is rate limiting the integration: try again later"
        )
    if code in ("validation_error", "invalid_request", "invalid_request_url", "invalid_json"):
        return ToolResult.fail("invalid_request", f"Notion refused the request: {message}")
    return ToolResult.fail("provider_error", f"Notion failed ({code}): {message}; try again later")
