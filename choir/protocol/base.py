"""The base of every wire and domain model: frozen, strict about unknown keys."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from choir.protocol.docstrings import describe_fields
from choir.protocol.revision import PROTOCOL_VERSION as PROTOCOL_VERSION


class WireModel(BaseModel):
    """Frozen, `extra="forbid"`: a typo in a field name is an error, never silently dropped."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        defer_build=True,
    )

    # Attribute docstrings become field descriptions as with `use_attribute_docstrings`, read
    # by `choir.protocol.docstrings` at a fraction of its cost.
    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        describe_fields(cls)
