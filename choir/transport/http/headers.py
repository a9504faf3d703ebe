"""Envelope fields carried in HTTP headers, read and written the same way on both ends."""

from __future__ import annotations

import uuid

from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.errors import RpcError
from choir.transport.frames import MAX_ID_LENGTH


def new_request_id() -> str:
    """A fresh request id (a UUID, §12.5)."""
    return uuid.uuid4().hex


def header_id(value: str | None) -> str | None:
    """A client-chosen request id, if it is usable (non-empty, not absurdly long)."""
    if value and len(value) <= MAX_ID_LENGTH:
        return value
    return None


def bearer_token(authorization: str | None) -> str:
    """The lease token of an `Authorization: Bearer <lease>` header; empty when absent."""
    if not authorization:
        return ""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise RpcError(ErrorCode.UNAUTHORIZED, "Authorization must be 'Bearer <lease token>'")
    return token.strip()


def bearer_header(lease_token: str) -> dict[str, str]:
    """The Authorization header for a lease token; none when there is no token."""
    return {"Authorization": f"Bearer {lease_token}"} if lease_token else {}
