"""Why an LLM call failed (§7.7), as one typed error the lanes can act on.

A lane never sees an HTTP client's exception or a JSON error: every failure of a call —
transport, status, body — becomes an `LlmError` whose `kind` drives what the lane does (edge: tell
the user and go back to IDLE; core: terminate) and whose message is one line fit to show the user.
Messages are scrubbed of the API key before the error exists, so no later `str(error)` can leak it.
"""

from __future__ import annotations

from enum import StrEnum

from choir.errors import ChoirError

REDACTED = "[REDACTED]"


class LlmErrorKind(StrEnum):
    """What went wrong with an LLM call."""

    RATE_LIMITED = "rate_limited"
    """HTTP 429, still limited after the one retry (or asked to wait longer than allowed)."""
    SERVER_ERROR = "server_error"
    """HTTP 5xx: the provider failed."""
    TIMEOUT = "timeout"
    """No complete answer within the call's timeout."""
    MALFORMED = "malformed"
    """The answer is not a usable chat completion (not JSON, no choices, no message…)."""
    CONTENT_FILTER = "content_filter"
    """The provider's content filter blocked the response (finish_reason `content_filter`)."""
    HTTP_ERROR = "http_error"
    """HTTP 4xx other than 429: bad key, unknown model, rejected request."""
    UNREACHABLE = "unreachable"
    """The endpoint could not be reached (DNS, refused connection, TLS, reset)."""


class LlmError(ChoirError):
    """A failed LLM call; `message` is one line naming the problem and what to do."""

    def __init__(self, kind: LlmErrorKind, message: str, status: int | None = None) -> None:
        super().__init__(one_line(message))
        self.kind = kind
        """Why the call failed."""
        self.status = status
        """The HTTP status of the failing response, when there was one."""

    def __repr__(self) -> str:
        return (
            f"LlmError(kind={self.kind.value!r}, status={self.status!r}, message={self.message!r})"
        )


def one_line(text: str, limit: int = 300) -> str:
    """`text` with whitespace runs collapsed to single spaces, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def scrub(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` replaced, for text that may echo a request."""
    return text.replace(secret, REDACTED) if secret else text
