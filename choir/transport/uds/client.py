"""The Unix-socket client: `call`, `stream` and `pushes` over one connection.

One connection carries any number of concurrent calls (answers are matched by request id),
streams and push subscriptions. Reconnecting is the caller's job: after the connection is lost
every pending call and open iterator raises `TransportError`; connect again and resubscribe with
the last seq seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.connection import FrameProtocol
from choir.transport.dispatch import log
from choir.transport.errors import CallTimeout, RpcError, TransportError
from choir.transport.frames import (
    END,
    ERROR,
    ITEM,
    PUSH,
    RESPONSE,
    FrameError,
    cancel_frame,
    error_from_body,
    request_frame,
    subscribe_frame,
)
from choir.transport.framing import HEADER, FrameTooLarge, encode_frame
from choir.transport.handler import Payload
from choir.transport.limits import DEFAULT_MAX_FRAME

_LOST = None


class UdsClient:
    """A client of a `UdsServer`; create it with `await UdsClient.connect(path)`."""

    def __init__(
        self,
        connection: _ClientConnection,
        *,
        session_id: str,
        lease_token: str,
        call_timeout: float | None,
        max_frame: int,
    ) -> None:
        self.session_id = session_id
        """Sent with every call unless the call names another."""
        self.lease_token = lease_token
        """Sent with every call unless the call names another; never logged."""
        self.call_timeout = call_timeout
        """Seconds to wait for a call's answer (CallTimeout after); None waits forever. For a
        shorter wait on one call, wrap it in `asyncio.timeout`."""
        self._connection = connection
        self._max_frame = max_frame
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def connect(
        cls,
        path: Path | str,
        *,
        session_id: str = "",
        lease_token: str = "",
        call_timeout: float | None = 30.0,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> Self:
        """Connect to the socket at `path`; TransportError if nothing listens there."""
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_unix_connection(
                lambda: _ClientConnection(str(path), max_frame), str(path)
            )
        except OSError as error:
            reason = error.strerror or type(error).__name__
            raise TransportError(f"cannot connect to socket {path}: {reason.lower()}") from None
        return cls(
            connection,
            session_id=session_id,
            lease_token=lease_token,
            call_timeout=call_timeout,
            max_frame=max_frame,
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
        connection = self._connection
        request_id = uuid.uuid4().hex
        data = self._encode(request_id, verb, payload, session_id, lease_token, stream=False)
        answer: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        connection.calls[request_id] = (answer, len(data) - HEADER.size)
        connection.write(data)
        timeout = self.call_timeout
        try:
            if timeout is None:
                frame = await answer
            else:
                async with asyncio.timeout(timeout):
                    frame = await answer
        except TimeoutError:
            raise CallTimeout(f"no answer to {verb} within {timeout} s") from None
        finally:
            connection.calls.pop(request_id, None)
        if frame["t"] == RESPONSE and frame.get("ok") is True:
            result = frame.get("payload")
            if type(result) is dict:
                return result
        raise _failure(frame)

    async def stream(
        self,
        verb: str,
        payload: Payload | None = None,
        *,
        session_id: str | None = None,
        lease_token: str | None = None,
    ) -> AsyncGenerator[Payload, None]:
        """The verb's items as they come. Close it (`contextlib.aclosing`, or cancel the task
        reading it) to stop the server's side too."""
        request_id = uuid.uuid4().hex
        data = self._encode(request_id, verb, payload, session_id, lease_token, stream=True)
        async with contextlib.aclosing(self._channel(request_id, data)) as frames:
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
        `after_seq`; RpcError(unauthorized) if the lease may not listen."""
        request_id = uuid.uuid4().hex
        frame = subscribe_frame(
            request_id,
            self.session_id if session_id is None else session_id,
            self.lease_token if lease_token is None else lease_token,
            after_seq,
        )
        async with contextlib.aclosing(self._channel(request_id, encode_frame(frame))) as frames:
            async for push in frames:
                yield {"session_id": push["session_id"], "seq": push["seq"], "push": push["push"]}

    async def close(self) -> None:
        """Close the connection; pending calls and iterators raise TransportError."""
        connection = self._connection
        connection.close()
        await connection.done

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _encode(
        self,
        request_id: str,
        verb: str,
        payload: Payload | None,
        session_id: str | None,
        lease_token: str | None,
        *,
        stream: bool,
    ) -> bytes:
        if self._connection.closed:
            raise self._connection.failure()
        frame = request_frame(
            request_id,
            verb,
            self.session_id if session_id is None else session_id,
            self.lease_token if lease_token is None else lease_token,
            {} if payload is None else payload,
            stream,
        )
        data = encode_frame(frame)
        if len(data) - HEADER.size > self._max_frame:
            message = (
                f"{verb} request of {len(data) - HEADER.size} bytes exceeds the "
                f"{self._max_frame}-byte limit; send large data as a file"
            )
            raise RpcError(ErrorCode.PAYLOAD_TOO_LARGE, message)
        return data

    async def _channel(self, request_id: str, data: bytes) -> AsyncGenerator[dict[str, Any], None]:
        """The item or push frames answering a stream or subscribe frame, until its end."""
        connection = self._connection
        if connection.closed:
            raise connection.failure()
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        connection.channels[request_id] = queue
        connection.write(data)
        finished = False
        try:
            while True:
                frame = await queue.get()
                if frame is _LOST:
                    finished = True
                    raise connection.failure()
                kind = frame["t"]
                if kind in (ITEM, PUSH):
                    yield frame
                    # `queue.get` does not suspend while frames wait: without this a stream that
                    # never runs dry (a busy log followed) would never let a cancellation in
                    await asyncio.sleep(0)
                elif kind == END or (kind == RESPONSE and frame.get("ok") is not True):
                    finished = True
                    if frame.get("ok") is True:
                        return
                    raise _failure(frame)
        finally:
            del connection.channels[request_id]
            if not finished:
                connection.send(cancel_frame(request_id))


class _ClientConnection(FrameProtocol):
    """Routes each incoming frame to the call or channel waiting for its request id."""

    def __init__(self, path: str, max_frame: int) -> None:
        super().__init__(max_frame, frame_timeout=None)
        self.path = path
        self.calls: dict[str, tuple[asyncio.Future[dict[str, Any]], int]] = {}
        """Pending calls: request id -> (answer, body size sent)."""
        self.channels: dict[str, asyncio.Queue[dict[str, Any] | None]] = {}
        """Open streams and subscriptions: request id -> their incoming frames."""
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reason = "closed"

    def frame_received(self, frame: dict[str, Any], size: int) -> None:
        request_id = frame.get("request_id")
        if type(request_id) is str:
            call = self.calls.pop(request_id, None)
            if call is not None:
                if not call[0].done():
                    call[0].set_result(frame)
                return
            queue = self.channels.get(request_id)
            if queue is not None:
                queue.put_nowait(frame)
                return
        if frame["t"] == ERROR:
            self._protocol_error(frame)

    def frame_too_large(self, error: FrameTooLarge) -> None:
        self._reason = f"the server sent a frame of {error.size} bytes"
        self.close()

    def frame_invalid(self, error: FrameError) -> None:
        self._reason = f"the server sent an invalid frame ({error.message})"
        self.close()

    def lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self._reason = str(exc) or type(exc).__name__
        for answer, _ in self.calls.values():
            if not answer.done():
                answer.set_exception(self.failure())
        self.calls.clear()
        for queue in self.channels.values():
            queue.put_nowait(_LOST)
        if not self.done.done():
            self.done.set_result(None)

    def failure(self) -> TransportError:
        return TransportError(f"connection to socket {self.path} lost: {self._reason}")

    def _protocol_error(self, frame: dict[str, Any]) -> None:
        """An `err` frame: fail the call whose request was refused unread, if it can be told."""
        error = error_from_body(frame.get("error"))
        size = frame.get("size")
        for request_id, (answer, sent) in self.calls.items():
            if size is not None and sent == size and not answer.done():
                del self.calls[request_id]
                answer.set_exception(error)
                return
        log.warning(
            "server reported a protocol error",
            fields={"code": error.code.value, "message": error.message, "path": self.path},
        )


def _failure(frame: dict[str, Any]) -> RpcError:
    if frame.get("ok") is False:
        return error_from_body(frame.get("error"))
    kind = frame.get("t")
    return RpcError(ErrorCode.INTERNAL, f"the server answered a call with a {kind!r} frame")
