"""The LLM client's HTTP behaviour against a real local server: kept-alive connections, redirects
not followed, a body that cannot be decoded.

The scripted model server answers only well-formed completions; these need a server that can
answer anything, so each test runs a small aiohttp application on loopback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import orjson
import pytest
from aiohttp import web

from choir.adapters.llm import LlmClient, LlmError, LlmErrorKind, ModelSettings
from tests.adapters.support import ask

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

COMPLETION = orjson.dumps(
    {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ]
    }
)


@asynccontextmanager
async def serving(routes: dict[str, Handler]) -> AsyncIterator[ModelSettings]:
    """Settings for a model whose endpoint is a loopback server with `routes` (POST)."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield ModelSettings(name="test-model", model="m", endpoint=f"http://127.0.0.1:{port}/v1")
    finally:
        await runner.cleanup()


async def test_calls_reuse_one_kept_alive_connection(llm: LlmClient) -> None:
    peers: list[object] = []

    async def complete(request: web.Request) -> web.Response:
        await request.read()
        peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        return web.Response(body=COMPLETION, content_type="application/json")

    async with serving({"/v1/chat/completions": complete}) as settings:
        for _ in range(3):
            assert (await llm.complete(ask(settings))).text == "ok"
    assert len(peers) == 3
    assert len(set(peers)) == 1, f"each call opened its own connection: {peers}"


async def test_a_redirect_is_not_followed(llm: LlmClient) -> None:
    followed: list[str] = []

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("/elsewhere/chat/completions")

    async def elsewhere(request: web.Request) -> web.Response:
        followed.append(request.path)
        return web.Response(body=COMPLETION, content_type="application/json")

    routes = {"/v1/chat/completions": moved, "/elsewhere/chat/completions": elsewhere}
    async with serving(routes) as settings:
        with pytest.raises(LlmError) as caught:
            await llm.complete(ask(settings))
    assert caught.value.status == 307
    assert followed == []


async def test_a_body_that_cannot_be_decoded_is_malformed(llm: LlmClient) -> None:
    async def garbled(request: web.Request) -> web.Response:
        await request.read()
        headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        return web.Response(body=b"this is not gzip at all", headers=headers)

    async with serving({"/v1/chat/completions": garbled}) as settings:
        with pytest.raises(LlmError) as caught:
            await llm.complete(ask(settings))
    assert caught.value.kind == LlmErrorKind.MALFORMED
    assert "could not be decoded" in caught.value.message


async def test_a_proxy_named_in_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        await request.read()
        asked.append(f"{request.host}{request.path}")
        return web.Response(body=COMPLETION, content_type="application/json")

    async with serving({"/v1/chat/completions": proxy}) as proxy_settings:
        proxy_url = proxy_settings.endpoint.removesuffix("/v1")
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.setenv("http_proxy", proxy_url)
        settings = ModelSettings(name="test-model", model="m", endpoint="http://model.test/v1")
        async with LlmClient() as llm:
            assert (await llm.complete(ask(settings))).text == "ok"
    assert asked == ["model.test/v1/chat/completions"]
