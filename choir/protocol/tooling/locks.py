"""Lock requirements in tool manifests and the locks a committed call holds (§9).

A manifest names resources in the §9.2 namespaces. Per-call resources are *templates* that name
an input field: `file:{path}` locks the file named by the call's `path` argument. The lock
manager resolves templates with normalized (workspace-relative) argument values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field

from choir.protocol.base import WireModel

LockMode = Literal["S", "X"]
"""Shared (many readers) or exclusive (one writer)."""

FIXED_RESOURCES: Final = frozenset({"workspace", "browser_tab", "choirtmp"})
PREFIXED_NAMESPACES: Final = frozenset({"file", "mem", "repo", "net", "ext"})
_PLACEHOLDER: Final = re.compile(r"\{([^{}]*)\}")
_FIELD: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_resource(value: str) -> str:
    if value in FIXED_RESOURCES:
        return value
    namespace, colon, rest = value.partition(":")
    if not colon or namespace not in PREFIXED_NAMESPACES or not rest:
        raise ValueError(
            f"unknown lock resource {value!r}: use workspace, browser_tab, choirtmp, or "
            "file:/mem:/repo:/net:/ext: followed by a name or an {input-field} template"
        )
    for field in _PLACEHOLDER.findall(rest):
        if not _FIELD.fullmatch(field):
            raise ValueError(f"lock resource {value!r}: '{{{field}}}' is not an input field name")
    if "{" in _PLACEHOLDER.sub("", rest) or "}" in _PLACEHOLDER.sub("", rest):
        raise ValueError(f"lock resource {value!r}: unbalanced braces in template")
    return value


LockResource = Annotated[str, AfterValidator(_check_resource)]
"""A §9.2 resource key or template: `workspace`, `file:{path}`, `net:brave`…"""


class LockSpec(WireModel):
    """One lock a tool needs for every call (§8.3 runtime view `locks`)."""

    resource: LockResource
    """Resource key or template, e.g. `workspace`, `file:{path}`, `choirtmp`."""
    mode: LockMode
    """`S` to read, `X` to write or act."""

    def template_fields(self) -> tuple[str, ...]:
        """The input fields the resource names, e.g. `("path",)` for `file:{path}`."""
        return tuple(_PLACEHOLDER.findall(self.resource))

    def resolve(self, arguments: Mapping[str, str]) -> str:
        """The concrete resource key for one call: each `{field}` replaced by its argument."""

        def value_of(match: re.Match[str]) -> str:
            field = match.group(1)
            if field not in arguments:
                raise ValueError(f"lock {self.resource!r} needs input field {field!r}")
            return arguments[field]

        return _PLACEHOLDER.sub(value_of, self.resource)


class HeldLock(WireModel):
    """A concrete lock a committed call acquired (no templates left)."""

    resource: str = Field(min_length=1)
    """Resolved resource key, e.g. `file:src/auth.py`."""
    mode: LockMode
    """The mode it was acquired in."""


class LockWaiter(WireModel):
    """One queued request naming a resource (§9.4 FIFO order)."""

    owner: str
    """The waiting lane: `edge` or `core:<job>`."""
    mode: LockMode
    """The mode it asked for."""
    waiting_s: float = Field(ge=0)
    """How long it had waited when the table was reported."""


class LockState(WireModel):
    """One held or awaited resource of an agent's lock table, as REPORT_STATUS carries it."""

    resource: str = Field(min_length=1)
    """Resolved resource key, e.g. `file:src/auth.py`."""
    mode: Literal["FREE", "S", "X"]
    """How it is held; `FREE` while only waited for."""
    holders: list[str] = Field(default_factory=list)
    """The X owner, or the S holders (sorted)."""
    waiters: list[LockWaiter] = Field(default_factory=list)
    """Queued requests naming it, first in line first."""
    held_for_s: float | None = Field(default=None, ge=0)
    """How long it had been held when the table was reported; None while FREE."""
