"""The Unix-socket listener: length-prefixed JSON frames (`frames`) served by a `Handler`.

Many requests may run at once on one connection (answers carry the request id); streams and push
subscriptions share it. Nothing a client sends can stop the listener: garbage, an oversized length
prefix, invalid JSON or a handler bug each get an error frame, and the connection is dropped only
when the byte stream can no longer be trusted (a half-sent frame, a length prefix beyond
`Limits.max_discard`). Nor can a client's numbers: connections beyond `Limits.max_connections`
(or `max_connections_per_peer` from one process) are closed at once (`acceptor`), and a client
that sends requests without reading the answers is no longer read from until it does. A call
runs to completion once received, even if its client goes away, because its effects may already
be durable; streams and subscriptions stop with their reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.acceptor import Admission, accept_forever
from choir.transport.connection import FrameProtocol
from choir.transport.dispatch import authorize_events, invoke, log, pump, request_fields
from choir.transport.errors import RpcError
from choir.transport.frames import (
    CANCEL,
    REQUEST,
    SUBSCRIBE,
    FrameError,
    SubscribeRequest,
    end_frame,
    error_frame,
    item_frame,
    ok_frame,
    parse_cancel,
    parse_request,
    parse_subscribe,
    protocol_error_frame,
    push_frame,
)
from choir.transport.framing import FrameTooLarge
from choir.transport.handler import Handler, Payload, Peer, Request, Stream
from choir.transport.limits import Limits
from choir.transport.pushhub import PushHub
from choir.transport.uds import sockfile

_PEERCRED = struct.Struct("3i")


class UdsServer:
    """Serve `handler` on a Unix socket at `path` (mode 0600) until closed."""

    def __init__(
        self,
        path: Path,
        handler: Handler,
        *,
        hub: PushHub | None = None,
        limits: Limits | None = None,
        owner: str = "choird",
    ) -> None:
        self.path = path
        """Where the socket file lives."""
        self.handler = handler
        """The business logic answering calls."""
        self.hub = hub if hub is not None else PushHub()
        """Where business logic pushes to this listener's subscribers."""
        self.limits = limits or Limits()
        """Frame cap, timeouts and per-connection concurrency."""
        self.owner = owner
        """Named in the error when another live server holds the path."""
        self.connections: set[_ServerConnection] = set()
        """Open client connections."""
        self.admission = Admission(
            self.limits.max_connections, self.limits.max_connections_per_peer
        )
        """Open connections per peer pid; refuses those beyond the caps of `limits`."""
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._inode = 0

    async def start(self) -> None:
        """Claim the path and listen; ConflictError if a live server already answers there."""
        listener, temporary = sockfile.bind_private(self.path, self.owner)
        try:
            listener.setblocking(False)
            listener.listen(128)
            self._inode = sockfile.publish(temporary, self.path)
        except BaseException:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            raise
        self._listener = listener
        self._accepting = asyncio.get_running_loop().create_task(self._accept(listener))

    async def close(self) -> None:
        """Stop accepting, end streams, let running calls finish (up to the grace), disconnect."""
        if self._listener is None or self._accepting is None:
            return
        listener, self._listener = self._listener, None
        sockfile.unpublish(self.path, self._inode)
        self._accepting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._accepting
        listener.close()
        connections = tuple(self.connections)
        await asyncio.gather(*(c.shutdown(self.limits.close_grace) for c in connections))

    async def _accept(self, listener: socket.socket) -> None:
        """Accept connections one by one; our own loop (not `asyncio.Server`) so that close()
        never strands a connection accepted just before it, and so that the caps apply before
        a connection costs more than its descriptor (`acceptor`)."""
        await accept_forever(listener, str(self.path), self._refusal, self._serve)

    def _refusal(self, connection: socket.socket) -> str | None:
        return self.admission.refusal(_peer_of(connection, self.path).pid)

    async def _serve(self, connection: socket.socket) -> None:
        peer = _peer_of(connection, self.path)
        if peer.pid is None:
            log.warning("no peer credentials on a socket connection", fields={"path": peer.address})
        loop = asyncio.get_running_loop()
        await loop.connect_accepted_socket(lambda: _ServerConnection(self, peer), connection)

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


class _ServerConnection(FrameProtocol):
    """One client connection: decodes frames, runs each request as a task, writes answers."""

    def __init__(self, server: UdsServer, peer: Peer) -> None:
        super().__init__(server.limits.max_frame, server.limits.frame_timeout)
        self._server = server
        self._handler = server.handler
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cancellable: set[str] = set()
        self.peer = peer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._server.connections.add(self)
        self._server.admission.opened(self.peer.pid)

    def pause_writing(self) -> None:
        # A client that sends requests without reading the answers would have us buffer answers
        # without bound: read no more of its requests until it has taken what is written.
        super().pause_writing()
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.transport is not None:
            self.transport.resume_reading()

    def frame_received(self, frame: dict[str, Any], size: int) -> None:
        kind = frame["t"]
        try:
            if kind == REQUEST:
                request = parse_request(frame, self.peer, size)
                self._spawn(request.request_id, self._answer(request), request.stream)
            elif kind == SUBSCRIBE:
                subscription = parse_subscribe(frame)
                self._spawn(subscription.request_id, self._subscribe(subscription), True)
            elif kind == CANCEL:
                self._cancel(parse_cancel(frame))
            else:
                self.send(
                    protocol_error_frame(ErrorCode.INVALID_REQUEST, f"unknown frame type {kind!r}")
                )
        except FrameError as error:
            self.frame_invalid(error)

    def frame_invalid(self, error: FrameError) -> None:
        if error.request_id is None:
            self.send(protocol_error_frame(ErrorCode.INVALID_REQUEST, error.message))
        else:
            rpc_error = RpcError(ErrorCode.INVALID_REQUEST, error.message)
            self.send(error_frame(error.request_id, rpc_error))

    def frame_too_large(self, error: FrameTooLarge) -> None:
        message = f"{error}; send large data as a file, not in one call"
        self.send(protocol_error_frame(ErrorCode.PAYLOAD_TOO_LARGE, message, size=error.size))
        if error.size > self._server.limits.max_discard:
            self.close()

    def partial_timeout(self) -> None:
        timeout = self._server.limits.frame_timeout
        message = f"a frame started but did not finish within {timeout} s; closing"
        self.send(protocol_error_frame(ErrorCode.INVALID_REQUEST, message))
        self.close()

    def lost(self, exc: Exception | None) -> None:
        self._server.connections.discard(self)
        self._server.admission.closed(self.peer.pid)
        for request_id in tuple(self._cancellable):
            self._tasks[request_id].cancel()

    async def shutdown(self, grace: float) -> None:
        """End streams now, give running calls `grace` seconds, then close the connection."""
        for request_id in tuple(self._cancellable):
            self._tasks[request_id].cancel()
        running = tuple(self._tasks.values())
        if running:
            _, late = await asyncio.wait(running, timeout=grace)
            for task in late:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
        self.close()

    def _spawn(self, request_id: str, work: Coroutine[Any, Any, None], cancellable: bool) -> None:
        refusal = self._refusal(request_id)
        if refusal is not None:
            work.close()
            self.send(refusal)
            return
        task = asyncio.get_running_loop().create_task(work)
        self._tasks[request_id] = task
        if cancellable:
            self._cancellable.add(request_id)
        task.add_done_callback(lambda _: self._finished(request_id))

    def _refusal(self, request_id: str) -> dict[str, Any] | None:
        if request_id in self._tasks:
            message = f"request id {request_id} is already in flight on this connection"
            return protocol_error_frame(ErrorCode.INVALID_REQUEST, message)
        limit = self._server.limits.max_inflight
        if len(self._tasks) >= limit:
            message = f"more than {limit} requests in flight on one connection; wait for answers"
            return error_frame(request_id, RpcError(ErrorCode.RATE_LIMITED, message))
        return None

    def _finished(self, request_id: str) -> None:
        self._tasks.pop(request_id, None)
        self._cancellable.discard(request_id)

    def _cancel(self, request_id: str) -> None:
        if request_id in self._cancellable:
            self._tasks[request_id].cancel()

    async def _answer(self, request: Request) -> None:
        request_id = request.request_id
        try:
            result = await invoke(self._handler, request)
        except RpcError as error:
            self.send(error_frame(request_id, error))
            return
        if type(result) is dict:
            self.send(ok_frame(request_id, result))
            return
        assert isinstance(result, Stream)

        async def send_item(item: Payload) -> None:
            self.send(item_frame(request_id, item))
            await self.drain()

        try:
            failure = await pump(result, send_item, request_fields(request))
        except ConnectionError:
            return
        self.send(end_frame(request_id, failure))

    async def _subscribe(self, subscription: SubscribeRequest) -> None:
        request_id, session_id = subscription.request_id, subscription.session_id
        try:
            await authorize_events(self._handler, session_id, subscription.lease_token)
        except RpcError as error:
            self.send(error_frame(request_id, error))
            return
        pushes = self._server.hub.subscribe(session_id, after_seq=subscription.after_seq)
        self.send(ok_frame(request_id, {}))

        async def send_push(envelope: Payload) -> None:
            self.send(push_frame(request_id, envelope))
            await self.drain()

        context = {"session_id": session_id, "transport": "uds"}
        try:
            failure = await pump(Stream(pushes), send_push, context)
        except ConnectionError:
            return
        self.send(end_frame(request_id, failure))


def _peer_of(sock: socket.socket, path: Path) -> Peer:
    """The peer's pid/uid/gid from SO_PEERCRED, when the kernel tells."""
    try:
        credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except OSError:
        return Peer("uds", str(path))
    pid, uid, gid = _PEERCRED.unpack(credentials)
    return Peer("uds", str(path), pid=pid, uid=uid, gid=gid)
