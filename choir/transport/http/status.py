"""HTTP status codes for `ErrorCode`s, both ways; the JSON body (`error_body`) is the truth."""

from __future__ import annotations

from typing import Any

import orjson

from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.errors import RpcError
from choir.transport.frames import error_from_body

REQUEST_ID_HEADER = "X-Choir-Request-Id"
SESSION_ID_HEADER = "X-Choir-Session-Id"
NDJSON = "application/x-ndjson"
"""A streamed answer: one `item` frame per line, then an `end` frame."""

STATUS_OF = {
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.PROTOCOL_MISMATCH: 400,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.CONFLICT: 409,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.INTERNAL: 500,
}
"""The status an error is answered with."""

_CODE_OF = {
    status: code for code, status in STATUS_OF.items() if code is not ErrorCode.PROTOCOL_MISMATCH
}


def code_of(status: int) -> ErrorCode:
    """The ErrorCode for a status, for answers without our JSON body (a proxy, aiohttp itself)."""
    if status in _CODE_OF:
        return _CODE_OF[status]
    return ErrorCode.INVALID_REQUEST if 400 <= status < 500 else ErrorCode.INTERNAL


def error_from_response(status: int, body: bytes) -> RpcError:
    """The RpcError an error response carries."""
    try:
        parsed: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and "code" in parsed:
        return error_from_body(parsed)
    return RpcError(code_of(status), f"the server answered HTTP {status}")
