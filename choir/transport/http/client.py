"""The HTTP(S) client: the same `call` / `stream` / `pushes` as `UdsClient`, over httpx.

One `httpx.AsyncClient` keeps HTTP/1.1 connections alive between calls. HTTPS verifies the
server against `ca_file` (the self-signed certificate from `tls`), never skipping verification.
Streams read JSON lines (`item`, then `end`); pushes read SSE via httpx-sse. Reconnecting is the
caller's job: resubscribe with the last seq seen.
"""

from __future__ import annotations

import contextlib
import ssl
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import orjson
from httpx_sse import SSEError, aconnect_sse

from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.errors import CallTimeout, RpcError, TransportError, UntrustedServer
from choir.transport.frames import END, ITEM, error_from_body
from choir.transport.handler import Payload
from choir.transport.http.headers import bearer_header, new_request_id
from choir.transport.http.status import (
    NDJSON,
    REQUEST_ID_HEADER,
    SESSION_ID_HEADER,
    error_from_response,
)
from choir.transport.limits import DEFAULT_MAX_FRAME
from choir.transport.tls import client_context


class HttpClient:
    """A client of an `HttpServer` at `base_url` (http://… or https://…)."""

    def __init__(
        self,
        base_url: str,
        *,
        session_id: str = "",
        lease_token: str = "",
        call_timeout: float | None = 30.0,
        ca_file: Path | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        idle_timeout: float | None = 60.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        """Where the server listens."""
        self.session_id = session_id
        """Sent with every call unless the call names another."""
        self.lease_token = lease_token
        """Sent as the Bearer token unless the call names another; never logged."""
        self.call_timeout = call_timeout
        """Seconds to wait for a call's answer (CallTimeout after); None waits forever. For a
        shorter wait on one call, wrap it in `asyncio.timeout`."""
        self._max_frame = max_frame
        self._idle_timeout = idle_timeout
        verify: Any = client_context(ca_file) if ca_file is not None else True
        self._http = httpx.AsyncClient(
            base_url=self.base_url, verify=verify, timeout=call_timeout, trust_env=False
        )

    async def call(
        self,
        verb: str,
        payload: Payload | None = None,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
    ) -> Payload:
        """The verb's answer payload; RpcError if refused, TransportError if the channel fails."""
        request_id = new_request_id()
        body = self._body(verb, payload)
        headers = self._headers(request_id, session_id, lease_token)
        with self._errors(verb, self.call_timeout):
            response = await self._http.post(_rpc_path(verb), content=body, headers=headers)
        if response.status_code != 200:
            raise error_from_response(response.status_code, response.content)
        result = _json(response.content)
        if type(result) is not dict:
            raise RpcError(ErrorCode.INTERNAL, f"the server answered {verb} with a non-object")
        return result

    async def stream(
        self,
        verb: str,
        payload: Payload | None = None,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
    ) -> AsyncGenerator[Payload, None]:
        """The verb's items as they come; closing it closes the response and ends the server's
        side too."""
        request_id = new_request_id()
        body = self._body(verb, payload)
        headers = self._headers(request_id, session_id, lease_token) | {"Accept": NDJSON}
        timeout = httpx.Timeout(self.call_timeout, read=None)
        with self._errors(verb, self.call_timeout):
            async with self._http.stream(
                "POST", _rpc_path(verb), content=body, headers=headers, timeout=timeout
            ) as response:
                await _check(response)
                async with contextlib.aclosing(_frames(response.aiter_lines())) as frames:
                    async for frame in frames:
                        yield frame["payload"]

    async def pushes(
        self,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
        after_seq: int = 0,
    ) -> AsyncGenerator[Payload, None]:
        """The session's pushes as `PushEnvelope` dicts (session_id, seq, push), starting after
        `after_seq` (sent as Last-Event-ID); RpcError(unauthorized) if the lease may not listen."""
        request_id = new_request_id()
        headers = self._headers(request_id, session_id, lease_token)
        if after_seq:
            headers["Last-Event-ID"] = str(after_seq)
        params = {"session_id": self.session_id if session_id is None else session_id}
        timeout = httpx.Timeout(self.call_timeout, read=self._idle_timeout)
        with self._errors("the push stream", self._idle_timeout):
            async with aconnect_sse(
                self._http, "GET", "/events", params=params, headers=headers, timeout=timeout
            ) as source:
                await _check(source.response)
                async for event in source.aiter_sse():
                    if event.event == "push":
                        yield _json(event.data.encode())
                    elif event.event == END:
                        _raise_unless_ok(_json(event.data.encode()))
                        return
                raise TransportError(f"push stream from {self.base_url} ended without an end event")

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _body(self, verb: str, payload: Payload | None) -> bytes:
        body = orjson.dumps({} if payload is None else payload)
        if len(body) > self._max_frame:
            message = (
                f"{verb} request of {len(body)} bytes exceeds the "
                f"{self._max_frame}-byte limit; send large data as a file"
            )
            raise RpcError(ErrorCode.PAYLOAD_TOO_LARGE, message)
        return body

    def _headers(
        self, request_id: str, session_id: str | None, lease_token: str | None
    ) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            REQUEST_ID_HEADER: request_id,
            SESSION_ID_HEADER: self.session_id if session_id is None else session_id,
            **bearer_header(self.lease_token if lease_token is None else lease_token),
        }

    @contextlib.contextmanager
    def _errors(self, what: str, timeout: float | None) -> Iterator[None]:
        """httpx failures as TransportError / CallTimeout, with the server named."""
        try:
            yield
        except httpx.TimeoutException:
            raise CallTimeout(
                f"no answer to {what} from {self.base_url} within {timeout} s"
            ) from None
        except (httpx.HTTPError, SSEError) as error:
            if _certificate_refused(error):
                raise UntrustedServer(
                    f"cannot reach {self.base_url}: its certificate is not the one trusted "
                    f"({error})"
                ) from None
            raise TransportError(f"cannot reach {self.base_url}: {error}") from None


def _certificate_refused(error: BaseException) -> bool:
    """Whether a failed certificate verification is among `error`'s causes (httpx wraps
    httpcore's error, which wraps ssl's)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def _frames(lines: AsyncIterator[str]) -> AsyncGenerator[dict[str, Any], None]:
    """The `item` frames of an NDJSON stream, until its `end` frame."""
    async for line in lines:
        if not line:
            continue
        frame = _json(line.encode())
        if type(frame) is not dict:
            raise TransportError("the server streamed a line that is not a JSON object")
        if frame.get("t") == ITEM:
            yield frame
        elif frame.get("t") == END:
            _raise_unless_ok(frame)
            return
    raise TransportError("the stream ended without an end line")


async def _check(response: httpx.Response) -> None:
    if response.status_code != 200:
        await response.aread()
        raise error_from_response(response.status_code, response.content)


def _raise_unless_ok(frame: Any) -> None:
    if not (isinstance(frame, dict) and frame.get("ok") is True):
        raise error_from_body(frame.get("error") if isinstance(frame, dict) else None)


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise TransportError("the server answered with invalid JSON") from None


def _rpc_path(verb: str) -> str:
    return f"/rpc/{urllib.parse.quote(verb, safe='')}"
