"""The browser's egress proxy on real sockets: plain HTTP forwarded, CONNECT tunnels opened, and
both refused (403, the reason in the body) for an address the policy does not allow — here
127.0.0.1 plays a public host and 127.0.0.2 a private one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from choir.daemon.workers.egress_proxy import EgressProxy
from tests.harness.website import LocalSite


@pytest.fixture
async def proxy() -> AsyncIterator[EgressProxy]:
    async with EgressProxy(lambda address: address == "127.0.0.1") as running:
        yield running


async def exchange(proxy: EgressProxy, head: str, then: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(head.encode() + then)
        await writer.drain()
        async with asyncio.timeout(10):
            if head.startswith("CONNECT") and then:
                established = await reader.readuntil(b"\r\n\r\n")
                return established + await reader.read()
            return await reader.read()
    finally:
        writer.close()


async def test_plain_http_is_forwarded_to_an_allowed_address(proxy: EgressProxy) -> None:
    async with LocalSite() as site:
        answer = await exchange(
            proxy,
            f"GET {site.url('/page2')} HTTP/1.1\r\nHost: x\r\nProxy-Connection: keep-alive\r\n\r\n",
        )
    assert answer.startswith(b"HTTP/1.1 200")
    assert b"You reached the second page." in answer
    assert site.hits["/page2"] == 1


async def test_a_private_address_is_refused_by_both_methods(proxy: EgressProxy) -> None:
    async with LocalSite(host="127.0.0.2") as internal:
        plain = await exchange(proxy, f"GET {internal.url('/')} HTTP/1.1\r\nHost: x\r\n\r\n")
        tunnel = await exchange(
            proxy, f"CONNECT 127.0.0.2:{internal.port} HTTP/1.1\r\nHost: x\r\n\r\n"
        )
    for answer in (plain, tunnel):
        assert answer.startswith(b"HTTP/1.1 403")
        assert b"private or loopback address" in answer
    assert internal.hits["/"] == 0
    assert proxy.refusals == 2


async def test_a_connect_tunnel_carries_bytes_both_ways(proxy: EgressProxy) -> None:
    async with LocalSite() as site:
        inner = b"GET /page2 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        answer = await exchange(
            proxy, f"CONNECT 127.0.0.1:{site.port} HTTP/1.1\r\nHost: x\r\n\r\n", inner
        )
    assert answer.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200")
    assert b"You reached the second page." in answer
