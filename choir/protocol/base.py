"""The base of every wire and domain model: frozen, strict about unknown keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

PROTOCOL_VERSION = 1
"""Bumped on any incompatible change to the wire models; checked at INIT_HELLO."""


class WireModel(BaseModel):
    """Frozen, `extra="forbid"`: a typo in a field name is an error, never silently dropped."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=True,
        defer_build=True,
    )
