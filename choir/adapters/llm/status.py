"""Pure mapping of a provider's failure answers to `LlmError`, and `Retry-After` parsing.

Provider error messages are included (they often say exactly what is wrong: "model not found",
"insufficient credits") but cut to one short line and scrubbed of the API key, since some
providers echo request details back.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from choir.adapters.llm.errors import LlmError, LlmErrorKind, one_line, scrub
from choir.adapters.llm.types import ModelSettings

DETAIL_LIMIT = 160
"""Characters of the provider's own error message kept in ours."""


def status_error(settings: ModelSettings, status: int, body: bytes) -> LlmError:
    """The error for a non-2xx answer."""
    return _by_status(settings, status, provider_detail(body, settings.api_key))


def body_error(settings: ModelSettings, error: Any) -> LlmError:
    """The error for a 2xx body that carries `{"error": …}` instead of choices (OpenRouter
    reports some upstream failures this way)."""
    detail = _error_message(error, settings.api_key) or "no details"
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return _by_status(settings, code, detail)
    return LlmError(
        LlmErrorKind.MALFORMED,
        f"model {settings.name!r}: the provider answered with an error ({detail}); "
        "try again or choose another model",
    )


def rate_limited(settings: ModelSettings, why: str) -> LlmError:
    return LlmError(
        LlmErrorKind.RATE_LIMITED,
        f"model {settings.name!r} is rate limited by its provider (HTTP 429, {why}); "
        "wait a minute, then send the message again",
        429,
    )


def _by_status(settings: ModelSettings, status: int, detail: str) -> LlmError:
    name = settings.name
    said = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
    if status == 429:
        return rate_limited(settings, detail or "no details")
    if status == 408:
        return LlmError(
            LlmErrorKind.TIMEOUT, f"model {name!r} timed out ({said}); try again", status
        )
    if status >= 500:
        return LlmError(
            LlmErrorKind.SERVER_ERROR,
            f"model {name!r}: the provider failed ({said}); try again in a moment",
            status,
        )
    return LlmError(
        LlmErrorKind.HTTP_ERROR, f"model {name!r}: {_rejected(name, status, said)}", status
    )


def _rejected(name: str, status: int, said: str) -> str:
    if status in (401, 403):
        return f"the provider refused the API key ({said}); check the secret of models.{name}"
    if status == 404:
        return f"not found ({said}); check models.{name}.model and models.{name}.endpoint"
    if 400 <= status < 500:
        return f"the provider rejected the request ({said}); check models.{name} in config.json"
    return f"unexpected answer ({said}); check models.{name}.endpoint"


def provider_detail(body: bytes, secret: str | None) -> str:
    """The provider's own error message in `body`, one short line; empty when it has none."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return one_line(scrub(body.decode("utf-8", "replace"), secret), DETAIL_LIMIT)
    if isinstance(data, dict):
        return _error_message(data.get("error", data.get("message")), secret)
    return ""


def _error_message(error: Any, secret: str | None) -> str:
    if isinstance(error, dict):
        error = error.get("message")
    if not isinstance(error, str):
        return ""
    return one_line(scrub(error, secret), DETAIL_LIMIT)


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait per a `Retry-After` header: delay-seconds or an HTTP-date; None when the
    header is absent or unreadable. A date in the past means no wait."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        return _until(text, now or datetime.now(UTC))
    return seconds if seconds >= 0 and seconds == seconds else None


def _until(http_date: str, now: datetime) -> float | None:
    # imported here: email.utils (~3 ms) is needed only for a Retry-After given as a date, and
    # choir-agent's first model call waits for this module
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
