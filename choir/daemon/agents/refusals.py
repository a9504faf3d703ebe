"""Refusals of agent calls, and how any error becomes the RPC error the agent sees (§12.5).

A verb raises `RpcFault` when the refusal has a specific wire code (a stale `base_rev`, a
forged token), or a `ChoirError` when the operator-facing class says enough. The agent and the
operator socket turn either into an error response with `rpc_error_of`, so no handler formats
wire errors; the class <-> code table is `choir.errors.REFUSAL_CODES`.
"""

from __future__ import annotations

from choir.errors import ChoirError, wire_code
from choir.protocol import ErrorCode, ErrorDetails, RpcError


class RpcFault(ChoirError):
    """An agent call refused with a stable `code`; `message` is one line without secrets, and
    `details` what the agent acts on, as data (it never parses the message)."""

    def __init__(self, code: ErrorCode, message: str, details: ErrorDetails | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details


UNAUTHORIZED_MESSAGE = "unknown session or wrong lease token"
"""Deliberately the same for both cases, so a caller cannot probe which sessions exist."""


def unauthorized() -> RpcFault:
    return RpcFault(ErrorCode.UNAUTHORIZED, UNAUTHORIZED_MESSAGE)


DATABASE_DOWN = "choird cannot reach its database right now; nothing was stored, retry later"
DISK_FAILING = "choird's disk is full or failing; nothing was stored, retry later"


def database_down(exc: BaseException) -> bool:
    """Whether `exc` means Postgres is unreachable or cannot write (its disk is full or failing),
    as opposed to a bug or a bad query: the caller should retry, nothing was stored."""
    from choir.store.postgres.failures import classify

    return classify(exc) is not None


def rpc_error_of(exc: BaseException) -> RpcError:
    """The wire error for `exc`, on the agent and the operator socket alike (codes:
    `choir.errors.REFUSAL_CODES`); anything unexpected is `internal` with no detail leaked."""
    from choir.store.postgres.failures import disk_failure

    if database_down(exc):
        message = DISK_FAILING if disk_failure(exc) else DATABASE_DOWN
        return RpcError(code=ErrorCode.UNAVAILABLE, message=message)
    if isinstance(exc, RpcFault):
        return RpcError(code=exc.code, message=exc.message, details=exc.details)
    if isinstance(exc, ChoirError):
        return RpcError(code=wire_code(exc), message="; ".join(exc.message.splitlines()))
    return RpcError(code=ErrorCode.INTERNAL, message="internal error in choird (see choird.log)")
