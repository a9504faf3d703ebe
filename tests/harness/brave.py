"""A local stand-in for the Brave Search API (`GET /res/v1/web/search`), over real HTTP.

It checks the `X-Subscription-Token` header against its key (401 otherwise, as Brave does),
answers each query with `per_page`-sized pages of made-up results that name the query, the
offset and the result's rank (10 pages, `more_results_available` until the last), and records
every request. `fail_next(status, headers)` makes the next answers fail — a 429 with
`X-RateLimit-Reset`, a 500 — for the client's error paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

from tests.harness.local_http import serve

API_PATH = "/res/v1"
PAGES = 10


@dataclass
class SearchRequest:
    params: dict[str, str]
    token: str | None
    status: int


@dataclass
class BraveServer:
    key: str
    requests: list[SearchRequest] = field(default_factory=list)
    _failures: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    port: int = 0

    @property
    def endpoint(self) -> str:
        """What `search.<name>.endpoint` is set to."""
        return f"http://127.0.0.1:{self.port}{API_PATH}"

    def fail_next(self, status: int, headers: dict[str, str] | None = None, times: int = 1) -> None:
        self._failures.extend([(status, headers or {})] * times)

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get(f"{API_PATH}/web/search", self._search)
        self._runner, self.port = await serve(app)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _search(self, request: web.Request) -> web.Response:
        params = dict(request.query)
        token = request.headers.get("X-Subscription-Token")
        status, headers, body = self._answer(params, token)
        self.requests.append(SearchRequest(params, token, status))
        return web.json_response(body, status=status, headers=headers)

    def _answer(
        self, params: dict[str, str], token: str | None
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        if token != self.key:
            error = {"code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The token is invalid."}
            return 401, {}, {"type": "ErrorResponse", "error": error}
        if self._failures:
            status, headers = self._failures.pop(0)
            error = {"code": "FAILED", "detail": f"Injected failure {status}."}
            return status, headers, {"type": "ErrorResponse", "error": error}
        query = params.get("q", "")
        count, offset = int(params.get("count", "20")), int(params.get("offset", "0"))
        results = [
            {
                "title": f"<strong>{query}</strong> result {offset}.{rank}",
                "url": f"https://example.org/{offset}/{rank}?q={query}",
                "description": f"About <strong>{query}</strong> &amp; more (rank {rank}).",
                "age": "2 days ago",
            }
            for rank in range(count)
        ]
        return (
            200,
            {},
            {
                "type": "search",
                "query": {"original": query, "more_results_available": offset < PAGES - 1},
                "web": {"type": "search", "results": results},
            },
        )
