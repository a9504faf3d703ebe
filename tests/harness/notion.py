"""A local stand-in for the Notion API (version 2025-09-03), over real HTTP, for `notion-client`.

It serves one small workspace — pages with properties and (nested) blocks, a database with one
data source and its rows — through the endpoints `choir.notion.query` uses: `POST /v1/search`,
`GET /v1/pages/{id}`, `GET /v1/blocks/{id}/children`, `GET /v1/databases/{id}` and
`POST /v1/data_sources/{id}/query`. Lists are paginated as Notion does (`page_size`,
`start_cursor` = the id of the next item, `has_more`, `next_cursor`); the bearer token is
checked (401 `unauthorized`), unknown ids are 404 `object_not_found`, and `fail_next` makes the
next answers fail (a 429 `rate_limited`, a 500). Every request is recorded.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

from tests.harness.local_http import serve


def nid(name: str) -> str:
    """A stable dashed id for a fixture object's name."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"notion:{name}"))


def text(content: str) -> list[dict[str, Any]]:
    return [{"type": "text", "plain_text": content, "text": {"content": content}}]


def block(
    kind: str, content: str = "", children: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"rich_text": text(content), **extra} if content or extra else {}
    return {
        "object": "block",
        "id": nid(f"block:{kind}:{content}:{uuid.uuid4()}"),
        "type": kind,
        kind: body,
        "has_children": bool(children),
        "_children": children or [],
    }


def page(title: str, properties: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    props = {"Name": {"id": "title", "type": "title", "title": text(title)}, **(properties or {})}
    page_id = nid(f"page:{title}")
    return {
        "object": "page",
        "id": page_id,
        "url": f"https://www.notion.so/{title.replace(' ', '-')}-{page_id.replace('-', '')}",
        "last_edited_time": "2026-11-20T10:00:00.000Z",
        "properties": props,
        **more,
    }


def status(name: str) -> dict[str, Any]:
    return {"type": "select", "select": {"name": name}}


@dataclass
class NotionRequest:
    method: str
    path: str
    body: Any
    version: str | None


@dataclass
class NotionServer:
    token: str
    pages: dict[str, dict[str, Any]] = field(default_factory=dict)
    blocks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Children by parent id (a page or a block)."""
    databases: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Rows by data source id."""
    requests: list[NotionRequest] = field(default_factory=list)
    _failures: list[tuple[int, str]] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    port: int = 0

    @property
    def endpoint(self) -> str:
        """What `notion_integrations.<name>.endpoint` is set to (the client adds `/v1/`)."""
        return f"http://127.0.0.1:{self.port}"

    def add_page(self, item: dict[str, Any], children: list[dict[str, Any]]) -> str:
        self.pages[item["id"]] = item
        self._add_children(item["id"], children)
        return str(item["id"])

    def add_database(self, title: str, rows: list[dict[str, Any]]) -> str:
        database_id, source_id = nid(f"db:{title}"), nid(f"ds:{title}")
        self.databases[database_id] = {
            "object": "database",
            "id": database_id,
            "title": text(title),
            "data_sources": [{"id": source_id, "name": title}],
        }
        self.rows[source_id] = rows
        return database_id

    def fail_next(self, status: int, code: str, times: int = 1) -> None:
        self._failures.extend([(status, code)] * times)

    def _add_children(self, parent: str, children: list[dict[str, Any]]) -> None:
        self.blocks[parent] = children
        for child in children:
            self._add_children(child["id"], child.pop("_children"))

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/v1/search", self._search)
        app.router.add_get("/v1/pages/{id}", self._page)
        app.router.add_get("/v1/blocks/{id}/children", self._children)
        app.router.add_get("/v1/databases/{id}", self._database)
        app.router.add_post("/v1/data_sources/{id}/query", self._query)
        self._runner, self.port = await serve(app)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _gate(self, request: web.Request) -> tuple[Any, web.Response | None]:
        body = await request.json() if request.can_read_body else None
        self.requests.append(
            NotionRequest(request.method, request.path, body, request.headers.get("Notion-Version"))
        )
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return body, _error(401, "unauthorized", "API token is invalid.")
        if self._failures:
            status, code = self._failures.pop(0)
            return body, _error(status, code, f"Injected {code}.")
        return body, None

    async def _search(self, request: web.Request) -> web.Response:
        body, refused = await self._gate(request)
        if refused is not None:
            return refused
        wanted = str(body.get("query", "")).lower()
        found: list[dict[str, Any]] = [
            p for p in self.pages.values() if wanted in _title(p).lower()
        ]
        for database in self.databases.values():
            for source in database["data_sources"]:
                if wanted in source["name"].lower():
                    found.append(
                        {
                            "object": "data_source",
                            "id": source["id"],
                            "title": text(source["name"]),
                            "url": None,
                        }
                    )
        return _paged(found, body.get("page_size", 100), body.get("start_cursor"))

    async def _page(self, request: web.Request) -> web.Response:
        _, refused = await self._gate(request)
        if refused is not None:
            return refused
        item = self.pages.get(request.match_info["id"])
        if item is None:
            return _not_found(request.match_info["id"])
        return web.json_response(item)

    async def _children(self, request: web.Request) -> web.Response:
        _, refused = await self._gate(request)
        if refused is not None:
            return refused
        children = self.blocks.get(request.match_info["id"])
        if children is None:
            return _not_found(request.match_info["id"])
        query = request.query
        return _paged(children, int(query.get("page_size", "100")), query.get("start_cursor"))

    async def _database(self, request: web.Request) -> web.Response:
        _, refused = await self._gate(request)
        if refused is not None:
            return refused
        database = self.databases.get(request.match_info["id"])
        if database is None:
            return _not_found(request.match_info["id"])
        return web.json_response(database)

    async def _query(self, request: web.Request) -> web.Response:
        body, refused = await self._gate(request)
        if refused is not None:
            return refused
        rows = self.rows.get(request.match_info["id"])
        if rows is None:
            return _not_found(request.match_info["id"])
        wanted = (body or {}).get("filter")
        if wanted is not None:
            name, equals = wanted["property"], wanted["select"]["equals"]
            rows = [r for r in rows if r["properties"][name]["select"]["name"] == equals]
        return _paged(rows, body.get("page_size", 100), body.get("start_cursor"))


def _title(item: dict[str, Any]) -> str:
    return "".join(t["plain_text"] for t in item["properties"]["Name"]["title"])


def _paged(items: list[dict[str, Any]], size: int, cursor: str | None) -> web.Response:
    start = next((i for i, item in enumerate(items) if item["id"] == cursor), 0) if cursor else 0
    chunk = items[start : start + size]
    more = start + size < len(items)
    return web.json_response(
        {
            "object": "list",
            "results": [{k: v for k, v in item.items() if k != "_children"} for item in chunk],
            "has_more": more,
            "next_cursor": items[start + size]["id"] if more else None,
        }
    )


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response(
        {"object": "error", "status": status, "code": code, "message": message}, status=status
    )


def _not_found(object_id: str) -> web.Response:
    return _error(
        404,
        "object_not_found",
        f"Could not find object with ID: {object_id}. Make sure the relevant pages and databases "
        "are shared with your integration.",
    )
