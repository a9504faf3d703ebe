"""The HTTP(S) listener (§12.1): the same `Handler` as the socket, JSON over HTTP/1.1.

    POST /rpc/<verb>    body = payload JSON; X-Choir-Request-Id, X-Choir-Session-Id and
                        `Authorization: Bearer <lease>` carry the envelope. 200 with the answer
                        payload, or an error status with {code, message, details?} (see `status`).
                        With `Accept: application/x-ndjson` the answer streams: one `item`
                        frame per line, then an `end` frame, exactly the socket's frames.
    GET /events?session_id=…   SSE stream of the session's pushes (`event: push`, `id: <seq>`,
                        data = PushEnvelope JSON), resumable with Last-Event-ID; `event: end`
                        when the session closes. Authorized by `Handler.authorize_events`.

aiohttp cancels a handler whose client disconnects, which ends streams and subscriptions; calls
are shielded from that and run to completion, as on the socket. aiohttp bounds the request body
(`Limits.max_frame`, read within `Limits.frame_timeout`) but has no timeout for the request line
and headers: expose this listener on loopback or a private network only (§12.1, §12.4). The
connections it holds (TLS handshakes included) are capped at `Limits.max_connections`, the
others closed as soon as they are accepted (`acceptor`), so a flood of connections fills this
listener but never choird's file descriptors.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self

import orjson
from aiohttp import web
from aiohttp_sse import sse_response

from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.acceptor import BurstLog, accept_forever
from choir.transport.dispatch import authorize_events, invoke, pump, request_fields
from choir.transport.errors import RpcError
from choir.transport.frames import MAX_ID_LENGTH, end_frame, error_body, item_frame
from choir.transport.handler import Handler, Payload, Peer, Request, Stream
from choir.transport.http.headers import bearer_token, header_id, new_request_id
from choir.transport.http.status import (
    NDJSON,
    REQUEST_ID_HEADER,
    SESSION_ID_HEADER,
    STATUS_OF,
    code_of,
)
from choir.transport.limits import Limits
from choir.transport.pushhub import PushHub

_Route = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpServer:
    """Serve `handler` over HTTP, or HTTPS when given an ssl context (`tls.server_context`)."""

    def __init__(
        self,
        handler: Handler,
        *,
        hub: PushHub | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        limits: Limits | None = None,
        ping_interval: float = 15.0,
        reuse_port: bool = False,
    ) -> None:
        self.handler = handler
        """The business logic answering calls."""
        self.hub = hub if hub is not None else PushHub()
        """Where business logic pushes to this listener's SSE subscribers."""
        self.host = host
        """Interface listened on; loopback unless TLS protects the traffic (§12.1)."""
        self.port = port
        """Port listened on; 0 picks a free one, readable after start."""
        self.limits = limits or Limits()
        """Body cap, read timeout, shutdown grace."""
        self._ssl = ssl_context
        self._ping_interval = ping_interval
        self._reuse_port = reuse_port
        """SO_REUSEPORT: a listener on a wildcard address lets one on a specific address of the
        same port (choird's bridge listener) take that address's connections (Linux prefers
        the more specific bind). Only sockets of the same uid may share the port."""
        self._runner: web.AppRunner | None = None
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()
        self._failed_handshakes = BurstLog("connections failed before their first request", "http")
        self._calls: set[asyncio.Task[Payload | Stream]] = set()
        self._streams: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        """The base URL clients connect to."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._ssl else 'http'}://{host}:{self.port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=self.limits.max_frame, middlewares=[_json_errors])
        app.router.add_post("/rpc/{verb}", self._rpc)
        app.router.add_get("/events", self._events)
        runner = web.AppRunner(
            app,
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=self.limits.close_grace,
        )
        await runner.setup()
        try:
            listener = _listen(self.host, self.port, reuse_port=self._reuse_port)
        except BaseException:
            await runner.cleanup()
            raise
        self._runner, self._listener = runner, listener
        self.port = listener.getsockname()[1]
        where = f"{self.host}:{self.port}"
        self._accepting = asyncio.get_running_loop().create_task(
            accept_forever(listener, where, self._refusal, self._serve)
        )

    async def close(self) -> None:
        """Stop listening, end streams and subscriptions, give running calls the grace."""
        if self._runner is None:
            return
        runner, self._runner = self._runner, None
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()
        for task in (*self._handshakes, *self._streams):
            task.cancel()
        await asyncio.gather(*self._handshakes, return_exceptions=True)
        await runner.cleanup()

    def _refusal(self, connection: socket.socket) -> str | None:
        """Our own accept loop (`acceptor`) rather than aiohttp's site, so that connections
        beyond `Limits.max_connections` are closed before they cost a TLS handshake."""
        held = len(self._aiohttp().connections) + len(self._handshakes)
        if held >= self.limits.max_connections:
            return f"{held} connections open, the listener's limit"
        return None

    def _aiohttp(self) -> web.Server:
        """aiohttp's protocol factory; it keeps the connections that got past the handshake."""
        server = self._runner.server if self._runner is not None else None
        if server is None:
            raise ConnectionAbortedError("the HTTP listener is closing")
        return server

    async def _serve(self, connection: socket.socket) -> None:
        task = asyncio.get_running_loop().create_task(self._connect(connection))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _connect(self, connection: socket.socket) -> None:
        """Hand the connection to aiohttp, after the TLS handshake (bounded by the frame
        timeout) when serving HTTPS."""
        loop = asyncio.get_running_loop()
        timeout = self.limits.frame_timeout if self._ssl else None
        try:
            await loop.connect_accepted_socket(
                self._aiohttp(), connection, ssl=self._ssl, ssl_handshake_timeout=timeout
            )
        except Exception as error:
            connection.close()
            self._failed_handshakes.note(str(error) or type(error).__name__)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _rpc(self, http_request: web.Request) -> web.StreamResponse:
        request_id = header_id(http_request.headers.get(REQUEST_ID_HEADER)) or new_request_id()
        try:
            request = await self._read_request(http_request, request_id)
            result = await (self._stream(request) if request.stream else self._call(request))
        except RpcError as error:
            return error_response(error, request_id)
        if type(result) is dict:
            return web.Response(
                body=orjson.dumps(result),
                content_type="application/json",
                headers={REQUEST_ID_HEADER: request_id},
            )
        assert isinstance(result, Stream)
        return await self._send_stream(http_request, request, result)

    async def _call(self, request: Request) -> Payload | Stream:
        """Run the call in its own task so a client disconnect cannot cancel it halfway."""
        task = asyncio.get_running_loop().create_task(invoke(self.handler, request))
        self._calls.add(task)
        task.add_done_callback(self._call_done)
        return await asyncio.shield(task)

    async def _stream(self, request: Request) -> Payload | Stream:
        return await invoke(self.handler, request)

    def _call_done(self, task: asyncio.Task[Payload | Stream]) -> None:
        self._calls.discard(task)
        if not task.cancelled():
            task.exception()

    async def _read_request(self, http_request: web.Request, request_id: str) -> Request:
        session_id = http_request.headers.get(SESSION_ID_HEADER, "")
        if len(session_id) > MAX_ID_LENGTH:
            raise RpcError(ErrorCode.INVALID_REQUEST, f"{SESSION_ID_HEADER} is too long")
        payload, size = await self._read_payload(http_request)
        return Request(
            verb=http_request.match_info["verb"],
            request_id=request_id,
            session_id=session_id,
            lease_token=bearer_token(http_request.headers.get("Authorization")),
            payload=payload,
            peer=Peer("http", _remote(http_request)),
            stream=NDJSON in http_request.headers.get("Accept", ""),
            size=size,
        )

    async def _read_payload(self, http_request: web.Request) -> tuple[Payload, int]:
        """The body's JSON object and the body's length in bytes."""
        limit = self.limits.max_frame
        if (http_request.content_length or 0) > limit:
            raise _too_large(http_request.content_length or 0, limit)
        try:
            async with asyncio.timeout(self.limits.frame_timeout):
                body = await http_request.read()
        except web.HTTPRequestEntityTooLarge:
            raise _too_large(None, limit) from None
        except TimeoutError:
            message = f"request body did not arrive within {self.limits.frame_timeout} s"
            raise RpcError(ErrorCode.INVALID_REQUEST, message) from None
        if not body:
            return {}, 0
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise RpcError(ErrorCode.INVALID_REQUEST, "request body is not valid JSON") from None
        if type(payload) is not dict:
            raise RpcError(ErrorCode.INVALID_REQUEST, "request body must be a JSON object")
        return payload, len(body)

    async def _send_stream(
        self, http_request: web.Request, request: Request, stream: Stream
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": NDJSON, REQUEST_ID_HEADER: request.request_id}
        )

        async def send_item(item: Payload) -> None:
            await response.write(orjson.dumps(item_frame(request.request_id, item)) + b"\n")

        with self._tracked():
            try:
                await response.prepare(http_request)
            except BaseException:
                await stream.aclose()
                raise
            failure = await pump(stream, send_item, request_fields(request))
            await response.write(orjson.dumps(end_frame(request.request_id, failure)) + b"\n")
            await response.write_eof()
        return response

    async def _events(self, http_request: web.Request) -> web.StreamResponse:
        request_id = header_id(http_request.headers.get(REQUEST_ID_HEADER)) or new_request_id()
        session_id = http_request.query.get("session_id", "")
        try:
            if not session_id or len(session_id) > MAX_ID_LENGTH:
                raise RpcError(ErrorCode.INVALID_REQUEST, "GET /events needs ?session_id=<session>")
            lease_token = bearer_token(http_request.headers.get("Authorization"))
            after_seq = _last_event_id(http_request.headers.get("Last-Event-ID"))
            await authorize_events(self.handler, session_id, lease_token)
        except RpcError as error:
            return error_response(error, request_id)
        pushes = self.hub.subscribe(session_id, after_seq=after_seq)
        context = {"session_id": session_id, "transport": "http"}
        try:
            with self._tracked():
                async with sse_response(http_request, ping_interval=self._ping_interval) as sse:

                    async def send_push(envelope: Payload) -> None:
                        data = orjson.dumps(envelope).decode()
                        await sse.send(data, id=str(envelope["seq"]), event="push")

                    failure = await pump(Stream(pushes), send_push, context)
                    end = orjson.dumps(end_frame(request_id, failure)).decode()
                    await sse.send(end, event="end")
        finally:
            pushes.close()
        return sse

    def _tracked(self) -> _TaskTracker:
        return _TaskTracker(self._streams)


class _TaskTracker:
    """Registers the current task as a long-lived stream, so close() can cancel it."""

    def __init__(self, tasks: set[asyncio.Task[Any]]) -> None:
        self._tasks = tasks
        self._task = asyncio.current_task()

    def __enter__(self) -> None:
        if self._task is not None:
            self._tasks.add(self._task)

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._tasks.discard(self._task)


def error_response(error: RpcError, request_id: str, status: int | None = None) -> web.Response:
    """The JSON error answer: status from the code (unless given), body `error_body`."""
    return web.Response(
        status=status or STATUS_OF[error.code],
        body=orjson.dumps(error_body(error)),
        content_type="application/json",
        headers={REQUEST_ID_HEADER: request_id},
    )


@web.middleware
async def _json_errors(request: web.Request, handler: _Route) -> web.StreamResponse:
    """aiohttp's own refusals (unknown path, wrong method, oversized body) as JSON errors too."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = f"{exc.reason}: {request.method} {request.path}"
        if exc.status == 404:
            message += "; use POST /rpc/<verb> or GET /events"
        error = RpcError(code_of(exc.status), message)
        return error_response(error, new_request_id(), status=exc.status)


def _too_large(size: int | None, limit: int) -> RpcError:
    what = f"request body of {size} bytes" if size is not None else "request body"
    message = f"{what} exceeds the {limit}-byte limit; send large data as a file"
    return RpcError(ErrorCode.PAYLOAD_TOO_LARGE, message)


def _last_event_id(value: str | None) -> int:
    if not value:
        return 0
    if not value.isdecimal():
        raise RpcError(ErrorCode.INVALID_REQUEST, "Last-Event-ID must be a push seq number")
    return int(value)


def _listen(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A non-blocking TCP listening socket on `host`:`port` (0: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=128, reuse_port=reuse_port)
    listener.setblocking(False)
    return listener


def _remote(http_request: web.Request) -> str:
    peer = http_request.transport.get_extra_info("peername") if http_request.transport else None
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return http_request.remote or "unknown"
