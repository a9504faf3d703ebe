"""The HTTP listener's own edges: status codes, headers, plain HTTP, TLS trust, SSE format."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from choir.protocol.wire.envelope import ErrorCode
from choir.transport import HttpClient, HttpServer, Limits, PushHub, RpcError, TransportError, tls
from choir.transport.errors import UntrustedServer
from tests.transport.conftest import EchoHandler, Served


@pytest.fixture
async def plain(tls_files: tuple[Path, Path]) -> AsyncIterator[HttpServer]:
    async with HttpServer(EchoHandler(), limits=Limits(max_frame=1000)) as server:
        yield server


async def post(server: HttpServer, path: str, **options: object) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url) as client:
        return await client.post(path, **options)  # type: ignore[arg-type]


async def test_plain_http_on_loopback_serves_the_same_handler(plain: HttpServer) -> None:
    assert plain.url.startswith("http://127.0.0.1:")
    async with HttpClient(plain.url, session_id="s", lease_token="t") as client:
        answer = await client.call("echo", {"a": 1})
    assert (answer["payload"], answer["lease_token"], answer["transport"]) == (
        {"a": 1},
        "t",
        "http",
    )


async def test_envelope_headers_reach_the_handler_and_the_id_is_echoed(plain: HttpServer) -> None:
    headers = {
        "X-Choir-Request-Id": "req-1",
        "X-Choir-Session-Id": "s-1",
        "Authorization": "Bearer lease-s-1",
    }
    response = await post(plain, "/rpc/echo", json={"k": "v"}, headers=headers)
    assert response.status_code == 200
    assert response.headers["X-Choir-Request-Id"] == "req-1"
    assert response.json() == {
        "payload": {"k": "v"},
        "verb": "echo",
        "request_id": "req-1",
        "session_id": "s-1",
        "lease_token": "lease-s-1",
        "transport": "http",
        "size": 9,  # the body's bytes, as the listener measured them
    }


@pytest.mark.parametrize(
    ("path", "options", "status", "code"),
    [
        ("/rpc/echo", {"content": b"{not json"}, 400, "invalid_request"),
        ("/rpc/echo", {"content": b"[1]"}, 400, "invalid_request"),
        ("/rpc/echo", {"content": b"x" * 2000}, 413, "payload_too_large"),
        ("/rpc/echo", {"headers": {"Authorization": "Basic abc"}}, 401, "unauthorized"),
        ("/rpc/secure", {"headers": {"Authorization": "Bearer wrong"}}, 401, "unauthorized"),
        ("/rpc/UNKNOWN", {}, 404, "not_found"),
        (
            "/rpc/fail",
            {"json": {"code": "rate_limited", "message": "slow down"}},
            429,
            "rate_limited",
        ),
        ("/rpc/fail", {"json": {"code": "conflict", "message": "busy"}}, 409, "conflict"),
        ("/rpc/fail", {"json": {"code": "unavailable", "message": "db down"}}, 503, "unavailable"),
        ("/rpc/boom", {}, 500, "internal"),
        ("/nowhere", {}, 404, "not_found"),
    ],
)
async def test_errors_have_a_status_and_a_json_body(
    plain: HttpServer, path: str, options: dict[str, object], status: int, code: str
) -> None:
    response = await post(plain, path, **options)
    assert response.status_code == status
    assert response.json()["code"] == code
    assert response.json()["message"]
    assert (await post(plain, "/rpc/empty")).json() == {}


async def test_a_chunked_body_over_the_cap_is_413_too(plain: HttpServer) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b'"' + b"x" * 300 + b'"'

    response = await post(plain, "/rpc/echo", content=chunks())
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


async def test_wrong_method_is_a_json_error(plain: HttpServer) -> None:
    async with httpx.AsyncClient(base_url=plain.url) as client:
        response = await client.get("/rpc/echo")
    assert response.status_code == 405
    assert response.json()["code"] == "invalid_request"


async def test_events_need_a_session_and_a_valid_lease(plain: HttpServer) -> None:
    async with httpx.AsyncClient(base_url=plain.url) as client:
        missing = await client.get("/events")
        wrong = await client.get(
            "/events", params={"session_id": "s"}, headers={"Authorization": "Bearer nope"}
        )
    assert (missing.status_code, missing.json()["code"]) == (400, "invalid_request")
    assert (wrong.status_code, wrong.json()["code"]) == (401, "unauthorized")


async def test_sse_events_carry_the_seq_as_id(tls_files: tuple[Path, Path]) -> None:
    hub = PushHub()
    hub.push("s", {"kind": "compact"})
    async with HttpServer(EchoHandler(), hub=hub) as server:
        hub.push("s", {"kind": "compact"})
        async with httpx.AsyncClient(base_url=server.url) as client:
            headers = {"Authorization": "Bearer lease-s", "Last-Event-ID": "1"}
            async with client.stream(
                "GET", "/events", params={"session_id": "s"}, headers=headers
            ) as response:
                assert response.headers["content-type"] == "text/event-stream"
                lines = []
                async for line in response.aiter_lines():
                    lines.append(line)
                    if line.startswith("data:"):
                        break
    assert lines == [
        "id: 2",
        "event: push",
        'data: {"session_id":"s","seq":2,"push":{"kind":"compact"}}',
    ]


async def test_a_client_that_does_not_trust_the_certificate_fails(https_served: Served) -> None:
    async with HttpClient(https_served.target) as client:
        with pytest.raises(UntrustedServer, match="CERTIFICATE_VERIFY_FAILED"):
            await client.call("empty")
    assert https_served.handler.seen == []


async def test_a_server_that_is_not_there_is_not_an_untrusted_one(tmp_path: Path) -> None:
    """Refused, it is an outage (worth waiting for); only a failed verification is not."""
    async with HttpServer(EchoHandler()) as server:
        url = server.url
    async with HttpClient(url) as client:
        with pytest.raises(TransportError) as refused:
            await client.call("empty")
    assert not isinstance(refused.value, UntrustedServer)


async def test_a_certificate_for_another_name_fails(tmp_path: Path) -> None:
    tls.create_self_signed(tmp_path / "c.pem", tmp_path / "k.pem", names=["choird.internal"])
    context = tls.server_context(tmp_path / "c.pem", tmp_path / "k.pem")
    async with (
        HttpServer(EchoHandler(), ssl_context=context) as server,
        HttpClient(server.url, ca_file=tmp_path / "c.pem") as client,
    ):
        with pytest.raises(UntrustedServer, match="IP address mismatch"):
            await client.call("empty")


async def test_the_trusting_client_verifies_with_hostname_checks_on(https_served: Served) -> None:
    context = tls.client_context(https_served.ca_file)
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    async with await https_served.client() as client:
        assert await client.call("empty") == {}


def test_the_key_and_certificate_are_private(tmp_path: Path) -> None:
    assert tls.ensure_self_signed(tmp_path / "tls" / "c.pem", tmp_path / "tls" / "k.pem")
    assert not tls.ensure_self_signed(tmp_path / "tls" / "c.pem", tmp_path / "tls" / "k.pem")
    for name in ("c.pem", "k.pem"):
        assert (tmp_path / "tls" / name).stat().st_mode & 0o777 == 0o600


async def test_rpc_error_status_without_a_json_body_maps_by_status() -> None:
    from choir.transport.http.status import error_from_response

    error = error_from_response(429, b"<html>too many</html>")
    assert (error.code, error.message) == (ErrorCode.RATE_LIMITED, "the server answered HTTP 429")
    assert isinstance(error, RpcError)


async def test_connections_beyond_the_cap_are_closed_at_once(
    tls_files: tuple[Path, Path],
) -> None:
    """TLS handshakes in progress count too: a peer cannot hold more than the cap open by
    never finishing them."""
    context = tls.server_context(*tls_files)
    limits = Limits(max_connections=3)
    async with HttpServer(EchoHandler(), ssl_context=context, limits=limits) as server:
        held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(3)]
        extra_reader, extra_writer = await asyncio.open_connection("127.0.0.1", server.port)
        async with asyncio.timeout(5):
            assert await extra_reader.read() == b""
        extra_writer.close()
        for _, writer in held[1:]:
            writer.close()
        _, first = held[0]
        first.close()
        await asyncio.sleep(0.1)
        async with HttpClient(server.url, ca_file=tls_files[0]) as client:
            assert await client.call("empty") == {}
