"""Errors that reach the operator as one line.

Every failure the operator can fix is a `ChoirError`: the CLI prints `error: <message>` and exits
with the error's code, never a traceback. Messages name the problem and the fix.

A refusal crosses the wire as an `ErrorCode`; `REFUSAL_CODES` is the one table between the two,
read one way by choird (agent and operator sockets: `wire_code`) and the other by its clients
(`error_class`), so `except NotFoundError` works on either side of the socket.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from choir.protocol.wire.error_codes import ErrorCode


class ExitCode(IntEnum):
    """Documented exit codes shared by every choir command."""

    OK = 0
    ERROR = 1
    """A runtime failure that is not the caller's fault."""
    USAGE = 2
    """Bad arguments or input: fix the command line."""
    CONFIG = 3
    """config.json or secrets.json is invalid: fix the file."""
    NOT_FOUND = 4
    """A named thing (agent, secret, session…) does not exist."""
    CONFLICT = 5
    """The action conflicts with current state (already exists, already running, leased)."""
    UNAVAILABLE = 6
    """A needed service (choird, Postgres, Docker) is not reachable."""


class ChoirError(Exception):
    """An error with a one-line, operator-facing message and an exit code."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(ChoirError):
    exit_code = ExitCode.USAGE


class ConfigError(ChoirError):
    """One or more configuration problems; `problems` holds every one of them."""

    exit_code = ExitCode.CONFIG

    def __init__(self, problems: list[str], *, header: str | None = None) -> None:
        self.problems = problems
        lines = [header] if header else []
        lines.extend(problems)
        super().__init__("\n".join(lines))


class NotFoundError(ChoirError):
    exit_code = ExitCode.NOT_FOUND


class ConflictError(ChoirError):
    exit_code = ExitCode.CONFLICT


class UnavailableError(ChoirError):
    exit_code = ExitCode.UNAVAILABLE


REFUSAL_CODES: Final[tuple[tuple[type[ChoirError], ErrorCode], ...]] = (
    (NotFoundError, ErrorCode.NOT_FOUND),
    (ConflictError, ErrorCode.CONFLICT),
    (UnavailableError, ErrorCode.UNAVAILABLE),
    (UsageError, ErrorCode.INVALID_REQUEST),
    # a config problem is the caller's to fix like a usage error: it leaves as invalid_request
    (ConfigError, ErrorCode.INVALID_REQUEST),
    # codes only choird's transport sends, received as the class the caller should handle
    (UsageError, ErrorCode.PAYLOAD_TOO_LARGE),
    (UnavailableError, ErrorCode.RATE_LIMITED),
)
"""Error class <-> wire code. Sending: the first row the error is an instance of; receiving:
the first row with the code. Anything else is `internal` / a plain `ChoirError` (exit 1)."""


def wire_code(error: ChoirError) -> ErrorCode:
    """The code a refusal goes out with: its own `code` if it carries one (an RPC fault, a
    relayed `RpcError`), else its class's."""
    code = getattr(error, "code", None)
    if isinstance(code, ErrorCode):
        return code
    return next(
        (code for kind, code in REFUSAL_CODES if isinstance(error, kind)), ErrorCode.INTERNAL
    )


def error_class(code: ErrorCode) -> type[ChoirError]:
    """The class a refusal with `code` is raised as on the receiving side."""
    return next((kind for kind, known in REFUSAL_CODES if known == code), ChoirError)


def one_line(message: str) -> str:
    """A multi-line message (a ConfigError's header and problems) as one line for stderr."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {'; '.join(lines[1:])}"
    return "; ".join(lines)
