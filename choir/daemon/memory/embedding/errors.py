"""Why an embedding call failed, as one typed error the queue can act on.

Every failure of a provider — transport, status, body, the local model — becomes an
`EmbeddingError` whose `kind` says whether trying again can help. Messages are one line and are
scrubbed of the API key before the error exists, so no later `str(error)` or log line can leak it.
"""

from __future__ import annotations

from enum import StrEnum

from choir.adapters.llm.errors import one_line, scrub
from choir.errors import ChoirError


class EmbeddingErrorKind(StrEnum):
    """What went wrong with an embedding call."""

    RATE_LIMITED = "rate_limited"
    """HTTP 429."""
    SERVER_ERROR = "server_error"
    """HTTP 5xx: the provider failed."""
    UNREACHABLE = "unreachable"
    """The endpoint could not be reached (DNS, refused connection, TLS, reset)."""
    TIMEOUT = "timeout"
    """No complete answer within the call's timeout."""
    HTTP_ERROR = "http_error"
    """HTTP 4xx other than 429: bad key, unknown model, rejected input. Trying again won't help."""
    MALFORMED = "malformed"
    """The answer is not a list of embeddings (not JSON, missing or extra items, non-numbers)."""
    WRONG_DIMENSIONS = "wrong_dimensions"
    """The vectors are not of the configured size: storing them would corrupt the index."""
    MODEL_UNAVAILABLE = "model_unavailable"
    """The local model could not be loaded."""
    PAUSED = "paused"
    """Not called: the provider failed batch after batch and its circuit breaker is open."""


RETRYABLE = frozenset(
    {
        EmbeddingErrorKind.RATE_LIMITED,
        EmbeddingErrorKind.SERVER_ERROR,
        EmbeddingErrorKind.UNREACHABLE,
        EmbeddingErrorKind.TIMEOUT,
    }
)
"""§11.9 retries what may pass (429, 5xx, the network); a bad answer is refused at once."""


class EmbeddingError(ChoirError):
    """A failed embedding call; `message` is one line naming the problem and what to do."""

    def __init__(
        self,
        kind: EmbeddingErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        secret: str | None = None,
    ) -> None:
        super().__init__(one_line(scrub(message, secret)))
        self.kind = kind
        """Why the call failed."""
        self.status = status
        """The HTTP status of the failing response, when there was one."""
        self.retry_after_s = retry_after_s
        """How long the server asked to wait (`Retry-After`), when it did."""

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later."""
        return self.kind in RETRYABLE

    def __repr__(self) -> str:
        return (
            f"EmbeddingError(kind={self.kind.value!r}, status={self.status!r}, "
            f"message={self.message!r})"
        )
