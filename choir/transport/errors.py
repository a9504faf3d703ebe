"""What a transport raises: a refused call (`RpcError`) or a broken channel (`TransportError`).

Both are `ChoirError`s, so a CLI that lets one escape prints one line and exits with a code that
matches the reason. Handlers raise `RpcError` too: the listener turns it into the error response.
An `RpcError` may carry `details`, a JSON object the transport passes through untouched; what
they mean is the protocol's business (`choir.protocol.error_details` reads them typed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from choir.errors import ChoirError, UnavailableError, error_class
from choir.protocol.wire.error_codes import ErrorCode


class RpcError(ChoirError):
    """The server refused or failed a call; `code` is stable, the message is one line, and
    `details` (a JSON object, or None) says what the refusal means as data."""

    def __init__(
        self, code: ErrorCode, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message, exit_code=error_class(code).exit_code)
        self.code = code
        self.details = details

    def __repr__(self) -> str:
        return f"RpcError({self.code.value!r}, {self.message!r})"


class TransportError(UnavailableError):
    """The channel failed: cannot connect, connection lost, or the peer broke the framing."""


class UntrustedServer(TransportError):
    """The server's TLS certificate failed verification: another server answers at the address,
    or the client was given the wrong certificate to trust. Unlike a lost channel, waiting does
    not mend it."""


class CallTimeout(TransportError):
    """No answer within the call's timeout; the call may still have run on the server."""
