"""A local server speaking OpenAI's `/v1/embeddings`, with faults queued per request.

Every answer is a deterministic vector per text (`vector_for`), listed in reverse order with its
`index`, as the protocol allows, so a client that ignores `index` mixes texts up. `faults` are
taken one per request: a fault answers instead of the model (or delays it); an empty queue means
a normal answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import numpy as np
import orjson
from aiohttp import web

Fault = Callable[[list[str]], Awaitable[web.Response | None]]
"""Answers a request (None: answer normally, after whatever the fault did)."""


def vector_for(text: str, dimensions: int) -> list[float]:
    """The server's embedding of `text`: the same text always gets the same vector."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    values: list[float] = np.random.default_rng(seed).standard_normal(dimensions).tolist()
    return values


def status(code: int, body: Any = None, headers: dict[str, str] | None = None) -> Fault:
    async def fault(texts: list[str]) -> web.Response:
        return web.json_response(
            body or {"error": {"message": f"fault {code}"}}, status=code, headers=headers
        )

    return fault


def slow(seconds: float) -> Fault:
    async def fault(texts: list[str]) -> None:
        await asyncio.sleep(seconds)

    return fault


def raw(body: bytes) -> Fault:
    async def fault(texts: list[str]) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    return fault


def answer(data: Any) -> Fault:
    async def fault(texts: list[str]) -> web.Response:
        return web.json_response(data)

    return fault


def dimensions(size: int) -> Fault:
    async def fault(texts: list[str]) -> web.Response:
        return web.json_response(_body(texts, size))

    return fault


def _body(texts: list[str], size: int) -> dict[str, Any]:
    items = [
        {"object": "embedding", "index": i, "embedding": vector_for(text, size)}
        for i, text in enumerate(texts)
    ]
    tokens = words(texts)  # billed as OpenAI reports it
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": items[::-1], "model": "test-embed", "usage": usage}


def words(texts: list[str]) -> int:
    """The tokens the server bills for `texts`: one per word."""
    return sum(len(text.split()) for text in texts)


@dataclass
class EmbeddingsServer:
    dimensions: int = 8
    faults: deque[Fault] = field(default_factory=deque)
    batches: list[list[str]] = field(default_factory=list)
    """The `input` of every request received, in order."""
    authorizations: list[str | None] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    """The `model` of every request received."""
    port: int = 0
    refuse: Callable[[list[str]], bool] | None = None
    """While set, a request whose texts it matches answers 500 (an embedder failing on some
    agent's memory only), whatever `faults` holds."""
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def fail(self, *faults: Fault) -> None:
        self.faults.extend(faults)

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        texts: list[str] = body["input"]
        self.batches.append(texts)
        self.authorizations.append(request.headers.get("Authorization"))
        self.models.append(body.get("model"))
        if self.refuse is not None and self.refuse(texts):
            return web.json_response({"error": {"message": "refused"}}, status=500)
        if self.faults and (response := await self.faults.popleft()(texts)) is not None:
            return response
        return web.json_response(_body(texts, self.dimensions))

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._embeddings)
        runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()  # 0: any free port
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def refused_url() -> str:
    """A loopback URL where nothing listens: a port just released by this process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
