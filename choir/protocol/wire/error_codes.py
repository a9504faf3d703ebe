"""Why choird refused or failed a call. A module of its own, free of pydantic, so clients that
only need the codes (every choirctl command) load it in microseconds."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Why choird refused or failed a call; stable so the agent can act on it."""

    UNAUTHORIZED = "unauthorized"
    """Unknown session or wrong lease token."""
    PROTOCOL_MISMATCH = "protocol_mismatch"
    """INIT_HELLO's protocol_version is not one choird speaks."""
    INVALID_REQUEST = "invalid_request"
    """Malformed envelope or payload."""
    PAYLOAD_TOO_LARGE = "payload_too_large"
    RATE_LIMITED = "rate_limited"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    """A service choird needs (Postgres, browser worker) is down; retry later."""
    INTERNAL = "internal"
