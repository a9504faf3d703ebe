"""The frames of the socket protocol, built and checked by hand (no pydantic on the hot path).

Every frame is a JSON object with a type tag `t`:

    client -> server
      req     {request_id, verb, session_id, lease_token, payload, stream}   a call (§12.5 envelope)
      sub     {request_id, session_id, lease_token, after_seq}               subscribe to pushes
      cancel  {request_id}                                                   end a stream or sub
    server -> client
      res     {request_id, ok, payload | error}                              a call's answer
      item    {request_id, payload}                                          one stream item
      push    {request_id, session_id, seq, push}                            one push (PushEnvelope)
      end     {request_id, ok, error?}                                       a stream or sub ended
      err     {error, size?}                                                 a frame that could not
                                                                             be tied to a request

`req` and `res` are `RequestEnvelope` / `ResponseEnvelope` plus the tag, so one schema serves
both transports (§12.3); HTTP streams carry the same `item` / `end` objects as JSON lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.errors import RpcError
from choir.transport.handler import Payload, Peer, Request

REQUEST = "req"
SUBSCRIBE = "sub"
CANCEL = "cancel"
RESPONSE = "res"
ITEM = "item"
PUSH = "push"
END = "end"
ERROR = "err"

MAX_ID_LENGTH = 200
"""Longest request id, session id or verb accepted; they end up in logs."""

_REQUEST_KEYS = frozenset(("t", "request_id", "verb", "session_id", "lease_token", "payload"))
_REQUEST_KEYS_WITH_STREAM = _REQUEST_KEYS | {"stream"}
_SUBSCRIBE_KEYS = frozenset(("t", "request_id", "session_id", "lease_token", "after_seq"))


class FrameError(Exception):
    """A frame that is not valid; answered on the request when its id is known."""

    def __init__(self, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id


class SubscribeRequest(NamedTuple):
    request_id: str
    session_id: str
    lease_token: str
    after_seq: int


def decode_frame(body: bytes) -> dict[str, Any]:
    """Parse a frame body into an object with a string `t`; FrameError otherwise."""
    try:
        frame = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise FrameError("frame is not valid JSON") from None
    if type(frame) is not dict or type(frame.get("t")) is not str:
        raise FrameError("frame is not a JSON object with a string 't'")
    return frame


def parse_request(frame: dict[str, Any], peer: Peer, size: int | None = None) -> Request:
    """The `Request` a `req` frame carries (`size`: the frame body's length, if known);
    FrameError naming the first problem."""
    request_id = _identifier(frame, "request_id", None)
    if not _REQUEST_KEYS_WITH_STREAM.issuperset(frame):
        unknown = sorted(set(frame) - _REQUEST_KEYS_WITH_STREAM)
        raise FrameError(f"unknown request fields: {', '.join(unknown)}", request_id)
    payload = frame.get("payload", {})
    if type(payload) is not dict:
        raise FrameError("payload must be a JSON object", request_id)
    stream = frame.get("stream", False)
    if type(stream) is not bool:
        raise FrameError("stream must be true or false", request_id)
    return Request(
        verb=_identifier(frame, "verb", request_id),
        request_id=request_id,
        session_id=_string(frame, "session_id", request_id),
        lease_token=_string(frame, "lease_token", request_id, limit=None),
        payload=payload,
        peer=peer,
        stream=stream,
        size=size,
    )


def parse_subscribe(frame: dict[str, Any]) -> SubscribeRequest:
    """The subscription a `sub` frame asks for; FrameError naming the first problem."""
    request_id = _identifier(frame, "request_id", None)
    if not _SUBSCRIBE_KEYS.issuperset(frame):
        unknown = sorted(set(frame) - _SUBSCRIBE_KEYS)
        raise FrameError(f"unknown subscribe fields: {', '.join(unknown)}", request_id)
    after_seq = frame.get("after_seq", 0)
    if type(after_seq) is not int or after_seq < 0:
        raise FrameError("after_seq must be a non-negative integer", request_id)
    return SubscribeRequest(
        request_id=request_id,
        session_id=_identifier(frame, "session_id", request_id),
        lease_token=_string(frame, "lease_token", request_id, limit=None),
        after_seq=after_seq,
    )


def parse_cancel(frame: dict[str, Any]) -> str:
    """The request id a `cancel` frame names."""
    return _identifier(frame, "request_id", None)


def _string(
    frame: Mapping[str, Any], key: str, request_id: str | None, limit: int | None = MAX_ID_LENGTH
) -> str:
    value = frame.get(key, "")
    if type(value) is not str:
        raise FrameError(f"{key} must be a string", request_id)
    if limit is not None and len(value) > limit:
        raise FrameError(f"{key} is longer than {limit} characters", request_id)
    return value


def _identifier(frame: Mapping[str, Any], key: str, request_id: str | None) -> str:
    value = _string(frame, key, request_id)
    if not value:
        raise FrameError(f"{key} is missing or empty", request_id)
    return value


def request_frame(
    request_id: str, verb: str, session_id: str, lease_token: str, payload: Payload, stream: bool
) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "t": REQUEST,
        "request_id": request_id,
        "verb": verb,
        "session_id": session_id,
        "lease_token": lease_token,
        "payload": payload,
    }
    if stream:
        frame["stream"] = True
    return frame


def subscribe_frame(
    request_id: str, session_id: str, lease_token: str, after_seq: int
) -> dict[str, Any]:
    return {
        "t": SUBSCRIBE,
        "request_id": request_id,
        "session_id": session_id,
        "lease_token": lease_token,
        "after_seq": after_seq,
    }


def cancel_frame(request_id: str) -> dict[str, Any]:
    return {"t": CANCEL, "request_id": request_id}


def ok_frame(request_id: str, payload: Payload) -> dict[str, Any]:
    return {"t": RESPONSE, "request_id": request_id, "ok": True, "payload": payload}


def error_frame(request_id: str, error: RpcError) -> dict[str, Any]:
    return {"t": RESPONSE, "request_id": request_id, "ok": False, "error": error_body(error)}


def item_frame(request_id: str, payload: Payload) -> dict[str, Any]:
    return {"t": ITEM, "request_id": request_id, "payload": payload}


def push_frame(request_id: str, envelope: Payload) -> dict[str, Any]:
    """A push; `envelope` is a `PushEnvelope` in JSON form (session_id, seq, push)."""
    return {"t": PUSH, "request_id": request_id, **envelope}


def end_frame(request_id: str, error: RpcError | None = None) -> dict[str, Any]:
    if error is None:
        return {"t": END, "request_id": request_id, "ok": True}
    return {"t": END, "request_id": request_id, "ok": False, "error": error_body(error)}


def protocol_error_frame(code: ErrorCode, message: str, size: int | None = None) -> dict[str, Any]:
    """An `err` frame; `size` is the byte length of an oversized frame, so the client can tell
    which of its requests was refused."""
    frame: dict[str, Any] = {"t": ERROR, "error": {"code": code.value, "message": message}}
    if size is not None:
        frame["size"] = size
    return frame


def error_body(error: RpcError) -> dict[str, Any]:
    """`{code, message}`, and `details` when the error has them (left out otherwise, so a body
    without them is what it always was)."""
    body: dict[str, Any] = {"code": error.code.value, "message": error.message}
    if error.details is not None:
        body["details"] = error.details
    return body


def error_from_body(body: object) -> RpcError:
    """The RpcError an `error` object describes, tolerating a peer that sends something odd."""
    if not isinstance(body, Mapping):
        return RpcError(ErrorCode.INTERNAL, "the server sent an error without details")
    raw_code = body.get("code")
    codes = ErrorCode.__members__.values()
    code = next((c for c in codes if c.value == raw_code), ErrorCode.INTERNAL)
    message = body.get("message")
    details = body.get("details")
    return RpcError(
        code,
        message if isinstance(message, str) else f"{code.value} error",
        details if isinstance(details, dict) else None,
    )
