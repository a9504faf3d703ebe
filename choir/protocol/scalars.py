"""Scalar wire types whose text form must be canonical because it is hashed (§7.4, §13.1)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Final

from pydantic import AfterValidator, PlainSerializer, StringConstraints

SHA256_HEX_PATTERN: Final = r"^[0-9a-f]{64}$"

Sha256Hex = Annotated[str, StringConstraints(pattern=SHA256_HEX_PATTERN)]
"""A lowercase hex SHA-256 digest (64 characters)."""


def format_ts(moment: datetime) -> str:
    """The one text form of a timestamp on the wire: UTC, microseconds, `Z` suffix.

    Always six fraction digits and always `Z`, so re-serializing a parsed timestamp gives the
    same bytes — hash chains depend on it.
    """
    if moment.tzinfo is not UTC:
        moment = _require_aware(moment)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


def _require_aware(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("timestamp needs a UTC offset, e.g. 2024-05-01T12:00:00Z")
    return moment.astimezone(UTC)


UtcTimestamp = Annotated[
    datetime,
    AfterValidator(_require_aware),
    PlainSerializer(format_ts, return_type=str, when_used="json"),
]
"""A timezone-aware instant, normalized to UTC, serialized by `format_ts`."""
