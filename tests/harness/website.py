"""A small web site on loopback for the browser tests (real HTTP, served by aiohttp).

- `/` — a title, headings, links (one opens a new tab: `target=_blank`) and a search form
  (`GET /result?q=…`);
- `/form` — a text field and a button whose script writes what was typed into the page;
- `/page2` — a plain page;
- `/slow` — answers after `SLOW_S`;
- `/never` — sends its headers and the start of a body, then nothing: it never finishes
  loading (until the test ends);
- `/large` — `LARGE_PARAGRAPHS` numbered paragraphs (hundreds of KB of text);
- `/redirect?to=URL` — a 302 to `URL`.

It listens on `host` (another loopback address, 127.0.0.2, stands for a private host).

`hits` counts requests by path (what the browser really fetched).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from html import escape
from typing import Self

from aiohttp import web

SLOW_S = 1.0
LARGE_PARAGRAPHS = 4_000
INDEX = """<!doctype html><html><head><title>Choir test site</title></head><body>
<h1>Welcome to the test site</h1>
<p>This page has   a few   links and a form.</p>
<ul>
  <li><a href="/page2">Second page</a></li>
  <li><a href="/large">A large page</a></li>
  <li><a href="/page2" target="_blank" id="popup">Open in a new tab</a></li>
</ul>
<form action="/result" method="get">
  <input name="q" id="q" placeholder="search terms">
  <button type="submit">Search</button>
</form>
</body></html>"""
FORM = """<!doctype html><html><head><title>Form</title></head><body>
<input id="name" name="name" placeholder="your name">
<button id="greet" onclick="document.getElementById('out').innerText =
  'Hello, ' + document.getElementById('name').value + '!'">Greet</button>
<p id="out">nobody greeted yet</p>
</body></html>"""


def _page(title: str, body: str) -> str:
    return f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"


@dataclass
class LocalSite:
    host: str = "127.0.0.1"
    hits: Counter[str] = field(default_factory=Counter)
    port: int = 0
    _runner: web.AppRunner | None = None
    _hanging: set[asyncio.Event] = field(default_factory=set)

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"

    async def __aenter__(self) -> Self:
        app = web.Application()
        for path, handler in {
            "/": self._index,
            "/form": self._form,
            "/page2": self._page2,
            "/result": self._result,
            "/slow": self._slow,
            "/never": self._never,
            "/large": self._large,
            "/redirect": self._redirect,
        }.items():
            app.router.add_get(path, handler)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *_: object) -> None:
        for hanging in self._hanging:
            hanging.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def _html(self, request: web.Request, text: str) -> web.Response:
        self.hits[request.path] += 1
        return web.Response(text=text, content_type="text/html")

    async def _index(self, request: web.Request) -> web.Response:
        return self._html(request, INDEX)

    async def _form(self, request: web.Request) -> web.Response:
        return self._html(request, FORM)

    async def _page2(self, request: web.Request) -> web.Response:
        return self._html(request, _page("Second page", "<p>You reached the second page.</p>"))

    async def _result(self, request: web.Request) -> web.Response:
        query = escape(request.query.get("q", ""))
        return self._html(request, _page("Results", f"<p>Results for {query}</p>"))

    async def _slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(SLOW_S)
        return self._html(request, _page("Slow", "<p>Worth the wait.</p>"))

    async def _never(self, request: web.Request) -> web.StreamResponse:
        self.hits[request.path] += 1
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        await response.write(b"<!doctype html><html><head><title>Never</title></head><body><p>")
        released = asyncio.Event()
        self._hanging.add(released)
        await released.wait()  # the test's end; until then the page never finishes loading
        return response

    async def _large(self, request: web.Request) -> web.Response:
        body = "".join(
            f"<p>Paragraph {n} of the large page, with some words to fill it out.</p>"
            for n in range(LARGE_PARAGRAPHS)
        )
        return self._html(request, _page("Large", body))

    async def _redirect(self, request: web.Request) -> web.Response:
        self.hits[request.path] += 1
        raise web.HTTPFound(request.query["to"])
