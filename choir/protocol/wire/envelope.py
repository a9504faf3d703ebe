"""The common RPC envelope (§12.3, §12.5) and its response counterpart.

Every call carries request id, session id and lease token whatever the transport; the payload
is parsed separately per verb (`choir.protocol.wire.verbs.parse_request_payload`), so a listener can
authenticate the envelope before it spends time on a large payload.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field, model_validator

from choir.protocol.base import WireModel
from choir.protocol.problems import invalid
from choir.protocol.wire.error_codes import ErrorCode
from choir.protocol.wire.error_details import ErrorDetails
from choir.protocol.wire.verbs import Verb


class RequestEnvelope(WireModel):
    request_id: str = Field(min_length=1)
    """Unique per call (a UUID); echoed in the response."""
    session_id: str
    """The caller's session."""
    lease_token: str = Field(repr=False)
    """Scoped to the session, compared in constant time; never logged."""
    verb: Verb
    """What is asked."""
    payload: dict[str, Any] = Field(default_factory=dict)
    """The verb's request payload in JSON form."""


class RpcError(WireModel):
    code: ErrorCode
    """Stable reason the agent can act on."""
    message: str
    """One line for logs and operators; never contains secret values."""
    details: ErrorDetails | None = Field(default=None, exclude_if=lambda details: details is None)
    """What the refusal means as data, for a caller that acts on it (left out when none)."""


class ResponseEnvelope(WireModel):
    """Exactly one of `payload` (when ok) or `error` (when not)."""

    request_id: str
    """Echo of the request's id."""
    ok: bool
    """Whether the call succeeded."""
    payload: dict[str, Any] | None = None
    """The verb's response payload in JSON form."""
    error: RpcError | None = None
    """Why it failed, when it did."""

    @model_validator(mode="after")
    def _one_outcome(self) -> Self:
        if self.ok and (self.payload is None or self.error is not None):
            raise invalid("an ok response has a payload and no error")
        if not self.ok and (self.error is None or self.payload is not None):
            raise invalid("a failed response has an error and no payload")
        return self

    @classmethod
    def success(cls, request_id: str, payload: WireModel) -> Self:
        return cls(request_id=request_id, ok=True, payload=payload.model_dump(mode="json"))

    @classmethod
    def failure(
        cls, request_id: str, code: ErrorCode, message: str, details: ErrorDetails | None = None
    ) -> Self:
        error = RpcError(code=code, message=message, details=details)
        return cls(request_id=request_id, ok=False, error=error)
