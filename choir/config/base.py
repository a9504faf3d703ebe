"""The base of every config.json model, and tagged unions whose errors read well.

Config models are strict: config.json is written by hand, so `"port": "5432"` or a misspelt key is
a mistake to report, never something to coerce or drop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field
from pydantic_core import PydanticCustomError

from choir.protocol.docstrings import describe_fields

UNKNOWN_TAG = "unknown_tag"
"""pydantic error type raised when a tagged union cannot pick a variant; `problems` renders it."""


class ConfigModel(BaseModel):
    """Frozen, strict, `extra="forbid"`; attribute docstrings become JSON Schema descriptions."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        defer_build=True,
    )

    # Attribute docstrings become field descriptions as with `use_attribute_docstrings`, read
    # by `choir.protocol.docstrings` at a fraction of its cost.
    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        describe_fields(cls)


def tag_of(field: str, value: object) -> str:
    """The union tag for a discriminator value: `type=telegram`, `embedded=true`.

    Tags contain `=`, which no config name may, so error paths can drop them unambiguously.
    """
    rendered = value if isinstance(value, str) else json.dumps(value)
    return f"{field}={rendered}"


def discriminator(
    field: str,
    keys: Collection[str],
    noun: str,
    infer: Callable[[Mapping[str, Any]], str] | None = None,
) -> Discriminator:
    """Pick a tagged-union variant (tagged `tag_of(field, key)`) by the value of `field`.

    `keys` are the rendered field values (`"telegram"`, `"true"`). When the field is absent,
    `infer(data)` names the key, else validation fails with `UNKNOWN_TAG`, which `problems`
    renders as `unknown <noun> '<value>' (known: …)`.
    """

    def discriminate(data: Any) -> str | None:
        if isinstance(data, BaseModel):
            return tag_of(field, getattr(data, field, None))
        if not isinstance(data, Mapping):
            return None
        if field not in data:
            return tag_of(field, infer(data)) if infer else None
        value = data[field]
        rendered = value if isinstance(value, str) else json.dumps(value)
        return tag_of(field, value) if rendered in keys else None

    return Discriminator(
        discriminate,
        custom_error_type=UNKNOWN_TAG,
        custom_error_message=f"unknown {noun}",
        custom_error_context={"field": field, "noun": noun, "known": ", ".join(sorted(keys))},
    )


def _absolute(path: str) -> str:
    if not path.startswith("/"):
        raise PydanticCustomError("not_absolute", "must be an absolute path")
    return path


def _http_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise PydanticCustomError("not_http_url", "must be an http:// or https:// URL")
    return url


NonEmpty = Annotated[str, Field(min_length=1)]
AbsolutePath = Annotated[str, AfterValidator(_absolute)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
Port = Annotated[int, Field(ge=1, le=65535)]
Positive = Annotated[int, Field(gt=0)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
