"""Calling the handler the same way from every listener, so both transports behave identically.

A handler's `RpcError` is the answer; any other exception is a bug: it is logged with the verb
and request id (never the lease token) and the caller gets `internal`, the listener lives on.
That line carries a traceback and a peer can repeat the call at will, so it is throttled per
peer and verb (`choir.logs.throttle`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from choir.logs import get_logger
from choir.logs.throttle import ThrottledLog
from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.errors import RpcError
from choir.transport.handler import Handler, Payload, Peer, Request, Stream

log = get_logger("choir.transport")

INTERNAL_MESSAGE = "internal error; the server log has the details"
UNAUTHORIZED_MESSAGE = "unknown session or wrong lease token"

_failed = ThrottledLog(log, "handler failed", level=logging.ERROR)


async def invoke(handler: Handler, request: Request) -> Payload | Stream:
    """The handler's answer, shaped for what the client asked (a call or a stream)."""
    try:
        result = await handler.handle(request)
    except RpcError:
        raise
    except Exception:
        key = (peer_key(request.peer), request.verb)
        _failed.emit(key, request_fields(request), exc_info=True)
        raise RpcError(ErrorCode.INTERNAL, INTERNAL_MESSAGE) from None
    if type(result) is dict:
        return Stream(_single(result)) if request.stream else result
    if isinstance(result, Stream):
        if request.stream:
            return result
        await result.aclose()
        raise RpcError(
            ErrorCode.INVALID_REQUEST, f"{request.verb} answers with a stream; read it as a stream"
        )
    log.error(
        f"handler returned {type(result).__name__}, not a dict or Stream",
        fields=request_fields(request),
    )
    raise RpcError(ErrorCode.INTERNAL, INTERNAL_MESSAGE)


async def pump(
    stream: Stream, send: Callable[[Payload], Awaitable[None]], context: dict[str, Any]
) -> RpcError | None:
    """Send each item; the error that ended the stream, or None when it finished.

    The iterator is closed however this ends, cancellation included. Errors raised by `send`
    (the client went away) propagate; errors raised by the iterator end the stream.
    """
    try:
        while True:
            try:
                item = await anext(stream.items)
            except StopAsyncIteration:
                return None
            except RpcError as error:
                return error
            except Exception:
                log.exception("stream failed", fields=context)
                return RpcError(ErrorCode.INTERNAL, INTERNAL_MESSAGE)
            if type(item) is not dict:
                log.error(f"stream yielded {type(item).__name__}, not a dict", fields=context)
                return RpcError(ErrorCode.INTERNAL, INTERNAL_MESSAGE)
            await send(item)
    finally:
        await _close(stream, context)


async def authorize_events(handler: Handler, session_id: str, lease_token: str) -> None:
    """Raise RpcError unless the handler lets this lease listen to the session's pushes."""
    try:
        allowed = await handler.authorize_events(session_id, lease_token)
    except RpcError:
        raise
    except Exception:
        log.exception("authorize_events failed", fields={"session_id": session_id})
        raise RpcError(ErrorCode.INTERNAL, INTERNAL_MESSAGE) from None
    if allowed is not True:
        raise RpcError(ErrorCode.UNAUTHORIZED, UNAUTHORIZED_MESSAGE)


def peer_key(peer: Peer) -> str:
    """Who a log line about a peer's call is throttled by: the socket (on an agent's own, one
    agent) or the HTTP client's host (its port changes with every connection)."""
    if peer.transport == "http":
        return peer.address.rpartition(":")[0] or peer.address
    return peer.address


def request_fields(request: Request) -> dict[str, Any]:
    """What a log line about a request may say (never the lease token or payload)."""
    return {
        "verb": request.verb,
        "request_id": request.request_id,
        "session_id": request.session_id,
        "transport": request.peer.transport,
    }


async def _single(payload: Payload) -> AsyncIterator[Payload]:
    yield payload


async def _close(stream: Stream, context: dict[str, Any]) -> None:
    try:
        await stream.aclose()
    except Exception:
        log.exception("closing a stream failed", fields=context)
