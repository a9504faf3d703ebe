"""What a refusal means as data: typed details an error may carry next to its code and message.

The message is one line for people and logs; a program that must act on a refusal (resend from
another revision, stop on a fork) reads `RpcError.details` instead of parsing that line. The
details are optional and left out of the JSON when absent, so documents without them — those of
choird before them included — keep parsing and re-serialize unchanged. A reader that meets a
`kind` it does not know (a newer choird) treats it as "no details" (`error_details`), never as a
broken answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from choir.protocol.base import WireModel


class BaseRevConflict(WireModel):
    """A HEARTBEAT whose `base_rev` is ahead of what choird acknowledged: nothing was stored."""

    kind: Literal["base_rev_conflict"] = "base_rev_conflict"
    expected_base_rev: int = Field(ge=0)
    """choird's `ack_rev`: resend the revisions after it."""
    got_base_rev: int = Field(ge=0)
    """The `base_rev` the refused heartbeat carried."""


class ChainForked(WireModel):
    """A HEARTBEAT whose revision `rev` differs from the one choird stored: the session was
    stopped, resending cannot succeed."""

    kind: Literal["chain_forked"] = "chain_forked"
    rev: int = Field(ge=1)
    """The first revision found with another hash."""


ErrorDetails = Annotated[BaseRevConflict | ChainForked, Field(discriminator="kind")]
"""Any typed detail of a refusal, tagged by `kind`."""

_DETAILS: TypeAdapter[ErrorDetails] = TypeAdapter(ErrorDetails)


def error_details(raw: Mapping[str, Any] | None) -> ErrorDetails | None:
    """The typed details an error's JSON `details` object holds; None when it holds none, or
    details this version does not know (they are a hint, never a reason to fail)."""
    if raw is None:
        return None
    try:
        return _DETAILS.validate_python(raw)
    except ValidationError:
        return None
