"""The LLM client's HTTP behaviour against a real local server: kept-alive connections, redirects
not followed, a body that cannot be decoded, environment proxies, verified https.

The scripted model server answers only well-formed completions; these need a server that can
answer anything, so each test runs a small aiohttp application on loopback.
"""

from __future__ import annotations

import asyncio
import gzip
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from choir.adapters.llm.client import LlmClient, LlmError, LlmErrorKind, ModelSettings
from choir.transport.tls import create_self_signed, server_context
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


FIRST_CALL = """
import asyncio, sys, threading
from choir.adapters.llm.client import CompletionRequest, LlmClient, ModelSettings

loaded_on = []


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "aiohttp":
            loaded_on.append(threading.current_thread() is threading.main_thread())
        return None


BODY = b'{"choices": [{"message": {"role": "assistant", "content": "ok"}}]}'


async def answer(reader, writer):
    while (await reader.readline()) not in (b"\\r\\n", b""):
        pass  # headers; the body is not needed
    head = b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n"
    writer.write(head + b"Content-Length: %d\\r\\n\\r\\n" % len(BODY) + BODY)
    await writer.drain()
    writer.close()


async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = ModelSettings(name="m", model="m", endpoint=f"http://127.0.0.1:{port}/v1")
    request = CompletionRequest(settings, [{"role": "user", "content": "hi"}], lane="edge")
    sys.meta_path.insert(0, Watch())
    async with LlmClient() as llm:
        print((await llm.complete(request)).text, loaded_on)


asyncio.run(main())
"""


def test_a_call_without_a_proxy_loads_no_aiohttp() -> None:
    """Loading aiohttp takes ~0.13 s of CPU (two TLS contexts from the system's CA store) and
    ~14 MB: the agent's first model call, and every one after, go without it."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALL], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "[]"]


@asynccontextmanager
async def raw_server(
    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[ModelSettings]:
    """A loopback server writing whatever `answer` writes: HTTP an aiohttp app cannot send."""
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield ModelSettings(name="test-model", model="m", endpoint=f"http://127.0.0.1:{port}/v1")
    finally:
        server.close()


async def _request_read(reader: asyncio.StreamReader) -> None:
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)


async def test_a_kept_alive_connection_the_server_closed_is_not_reused(llm: LlmClient) -> None:
    """Providers close idle connections (after 60-90 s): the next call opens a new one, it
    does not fail on the closed one."""
    connections = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await _request_read(reader)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        writer.write(head + b"Content-Length: %d\r\n\r\n" % len(COMPLETION) + COMPLETION)
        await writer.drain()
        writer.close()  # kept alive by HTTP/1.1's default, closed by the server while idle

    async with raw_server(answer) as settings:
        for _ in range(3):
            assert (await llm.complete(ask(settings))).text == "ok"
            await asyncio.sleep(0.05)  # the close reaches the client while the connection idles
    assert connections == 3


async def test_a_chunked_gzipped_answer_is_read_whole(llm: LlmClient) -> None:
    packed = gzip.compress(COMPLETION)
    chunks = [packed[:7], packed[7:20], packed[20:]]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request_read(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for chunk in chunks:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async with raw_server(answer) as settings:
        assert (await llm.complete(ask(settings))).text == "ok"


@pytest.mark.parametrize(
    ("said", "kind"),
    [
        (b"", LlmErrorKind.UNREACHABLE),  # closed before answering
        (b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"choi', LlmErrorKind.MALFORMED),
        (b"this is not HTTP\r\n\r\n", LlmErrorKind.UNREACHABLE),
    ],
    ids=["closed", "cut-short", "not-http"],
)
async def test_a_broken_answer_is_one_clear_error(
    llm: LlmClient, said: bytes, kind: LlmErrorKind
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request_read(reader)
        writer.write(said)
        await writer.drain()
        writer.close()

    async with raw_server(answer) as settings:
        with pytest.raises(LlmError) as failed:
            await llm.complete(ask(settings))
    assert failed.value.kind is kind
    assert "test-model" in failed.value.message


async def test_https_endpoints_are_verified_against_ssl_cert_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """certifi's CAs by default (a self-signed model server is refused), `SSL_CERT_FILE` when
    set, as with httpx: each client reads them at its first https call."""
    cert, key = tmp_path / "model.crt", tmp_path / "model.key"
    create_self_signed(cert, key, names=("127.0.0.1",))

    async def complete(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=COMPLETION, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(cert, key))
    await site.start()
    port = runner.addresses[0][1]
    settings = ModelSettings(name="test-model", model="m", endpoint=f"https://127.0.0.1:{port}/v1")
    try:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        async with LlmClient() as llm:
            with pytest.raises(LlmError) as caught:
                await llm.complete(ask(settings))
        assert caught.value.kind == LlmErrorKind.UNREACHABLE
        assert "certificate" in caught.value.message.lower()

        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        async with LlmClient() as llm:
            assert (await llm.complete(ask(settings))).text == "ok"
    finally:
        await runner.cleanup()
