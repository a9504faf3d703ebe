"""Knowledge as a graph (from seed design 003): the rules for loc, type, tags, data and edges.

An item has a hierarchical **loc** (`projects:choir:design`: segments joined by `:`, a child
below its parent), a **type** (design 003's node types: `system` — the agent's own definition,
`record` — stored data, `info` — reference content, `abstract` — a summary), **tags**, a JSON
object of structured **data** beside its markdown text, and typed **edges** to other items.
Everything here is pure: the store (`choir.store.knowledge.graph`) refuses with these checks
before it writes anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from choir.errors import UsageError

LOC_MAX_CHARS: Final = 200
LOC_MAX_SEGMENTS: Final = 12
TAG_MAX_CHARS: Final = 64
TAGS_MAX: Final = 32
"""Most tags on one item: labels to filter by, not a second text."""
DATA_MAX_BYTES: Final = 16 * 1024
"""Largest `data` as JSON: facts and settings beside the text, not a document store."""

_SEGMENT: Final = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_TAG: Final = re.compile(r"[^\W_][\w.:/-]*")


class ItemType(StrEnum):
    """What kind of item (design 003's node types)."""

    SYSTEM = "system"
    """The agent's own definition: identity, skills, prompts."""
    RECORD = "record"
    """Stored data: a session, a user profile, a list."""
    INFO = "info"
    """Reference content: notes, facts, guides (the default)."""
    ABSTRACT = "abstract"
    """A summary of other items."""


DEFAULT_TYPE: Final = ItemType.INFO


class EdgeType(StrEnum):
    """How one item relates to another; an edge points from its source to its target."""

    RELATES_TO = "relates_to"
    DERIVED_FROM = "derived_from"
    """The source was made from the target (a summary from its sources)."""
    SUPERSEDES = "supersedes"
    """The source replaces the target (a correction of an older fact)."""


class GraphRefused(UsageError):
    """A loc, type, tag, data object or edge that cannot be stored as given."""


@dataclass(frozen=True, slots=True)
class ItemFields:
    """The graph fields of a write; None leaves a field as it is (a new item: its default).
    Tags live in the item's metadata (`{"tags": [...]}`, as before the graph), checked by
    `check_tags`."""

    loc: str | None = None
    """"" clears it (the item has no place in the hierarchy)."""
    type: ItemType | None = None
    data: dict[str, Any] | None = None
    memory: Placement | None = None
    """Which of the agent's memories a new item goes to (None: knowledge); set at add only,
    never changed by a write."""

    @property
    def given(self) -> bool:
        return any(value is not None for value in (self.loc, self.type, self.data))


@dataclass(frozen=True, slots=True)
class Placement:
    """One of an agent's memories (`choir.core.memory.access`): its class, and for a personal
    item its user ("" for the other classes)."""

    memory_class: str
    user: str = ""


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """The memories a read covers: items of `classes`, those with an owner (personal, or
    derived from a session of that user) only if they are `user`'s (None: no such item)."""

    classes: tuple[str, ...]
    user: str | None = None
    every_user: bool = False
    """Items of every user (the operator's `--memory personal` without `--user`)."""


NO_FIELDS: Final = ItemFields()


@dataclass(frozen=True, slots=True)
class GraphFilter:
    """Which items a query keeps: all of the given conditions hold."""

    loc: str | None = None
    """The item's loc is this one or below it (`projects:choir` keeps `projects:choir:design`)."""
    type: ItemType | None = None
    tags: tuple[str, ...] = ()
    """The item carries every one of these tags."""
    scope: MemoryScope | None = None
    """The memories the caller may read (None: all of them, the operator's reads)."""

    @property
    def given(self) -> bool:
        return (
            self.loc is not None
            or self.type is not None
            or bool(self.tags)
            or self.scope is not None
        )

    def describe(self) -> str:
        """The filter as the model and the operator read it back (`loc=a:b type=info`)."""
        parts = [f"loc={self.loc}"] if self.loc is not None else []
        parts += [f"type={self.type.value}"] if self.type is not None else []
        parts += [f"tags={','.join(self.tags)}"] if self.tags else []
        return " ".join(parts)


NO_FILTER: Final = GraphFilter()


def check_loc(loc: str) -> str:
    """`loc` if it is a valid location ("" for none), else the refusal naming the fix."""
    if loc == "":
        return loc
    example = (
        "write lowercase segments of letters, digits, . _ - joined by ':' "
        "(e.g. projects:choir:design)"
    )
    if len(loc) > LOC_MAX_CHARS:
        raise GraphRefused(f"loc is {len(loc)} characters, over the limit of {LOC_MAX_CHARS}")
    segments = loc.split(":")
    if len(segments) > LOC_MAX_SEGMENTS:
        raise GraphRefused(
            f"loc {loc!r} has {len(segments)} segments, over the limit of {LOC_MAX_SEGMENTS}"
        )
    bad = next((segment for segment in segments if not _SEGMENT.fullmatch(segment)), None)
    if bad is not None:
        what = "an empty segment" if bad == "" else f"the segment {bad!r}"
        raise GraphRefused(f"loc {loc!r} has {what}; {example}")
    return loc


def check_type(value: str) -> ItemType:
    try:
        return ItemType(value)
    except ValueError:
        raise GraphRefused(
            f"unknown knowledge type {value!r}: use " + ", ".join(t.value for t in ItemType)
        ) from None


def check_edge_type(value: str) -> EdgeType:
    try:
        return EdgeType(value)
    except ValueError:
        raise GraphRefused(
            f"unknown edge type {value!r}: use " + ", ".join(t.value for t in EdgeType)
        ) from None


def check_tags(tags: Iterable[object]) -> tuple[str, ...]:
    """The tags, each once in the order given, or the refusal naming the bad one."""
    kept: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str) or not _TAG.fullmatch(tag) or len(tag) > TAG_MAX_CHARS:
            raise GraphRefused(
                f"tag {tag!r} is not a label: use a word of up to {TAG_MAX_CHARS} letters, "
                "digits and . _ : / - that starts with a letter or digit (e.g. editor, v2)"
            )
        kept[tag] = None
    if len(kept) > TAGS_MAX:
        raise GraphRefused(f"an item has at most {TAGS_MAX} tags, not {len(kept)}")
    return tuple(kept)


def check_data(data: object) -> dict[str, Any]:
    """`data` if it is a JSON object within `DATA_MAX_BYTES`, else the refusal."""
    if not isinstance(data, Mapping):
        raise GraphRefused(
            f'data must be a JSON object (like {{"editor": "helix"}}), not {_kind(data)}'
        )
    try:
        size = len(json.dumps(data, ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError) as exc:
        raise GraphRefused(f"data is not JSON: {exc}") from None
    if size > DATA_MAX_BYTES:
        raise GraphRefused(
            f"data is {size} bytes as JSON, over the limit of {DATA_MAX_BYTES} "
            f"({DATA_MAX_BYTES // 1024} KiB); keep large content in the text or split the item"
        )
    return dict(data)


def check_fields(fields: ItemFields) -> None:
    """Refuse graph fields built without the checks (a loc, a data object out of bounds)."""
    if fields.loc is not None:
        check_loc(fields.loc)
    if fields.data is not None:
        check_data(fields.data)


def in_subtree(loc: str, root: str) -> bool:
    """Whether `loc` is `root` or below it (`a:b:c` is in `a:b`, `a:bc` is not)."""
    return loc == root or loc.startswith(root + ":")


def _kind(value: object) -> str:
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"
