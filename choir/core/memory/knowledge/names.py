"""Knowledge item names and aliases (from seed design 002): the rules, with no I/O.

Every knowledge item has one unique name and any number of aliases, drawn from one namespace
per agent: a name is never another item's alias. Operations address an item by its name, an
alias or its id. An item added without a name gets a derived one, `<slug of its first words>-
<first 8 hex digits of its id>`: readable, stable (the id never changes) and unique in practice;
agent migration 6 named the items stored before names existed the same way.
"""

from __future__ import annotations

import re
from typing import Final
from uuid import UUID

from choir.errors import UsageError

NAME_MAX_CHARS: Final = 200
SLUG_MAX_CHARS: Final = 40
_NOT_SLUG: Final = re.compile(r"[^a-z0-9]+")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


class KnowledgeNameRefused(UsageError):
    """A name or alias that cannot be used as given."""


def derived_name(text: str, item_id: UUID) -> str:
    """The name of an item added without one (agent migration 6 computes the same in SQL)."""
    slug = _NOT_SLUG.sub("-", text.lower())[:SLUG_MAX_CHARS].strip("-") or "item"
    return f"{slug}-{item_id.hex[:8]}"


def check_name(name: str, what: str = "name") -> str:
    """`name` if it can name an item, else the refusal saying why and what to do."""
    if not 1 <= len(name) <= NAME_MAX_CHARS:
        raise KnowledgeNameRefused(
            f"a knowledge {what} is 1 to {NAME_MAX_CHARS} characters, not {len(name)}"
        )
    if name != name.strip() or _CONTROL.search(name):
        raise KnowledgeNameRefused(
            f"knowledge {what} {name!r} has control characters or surrounding spaces; "
            "use words, dots and dashes (e.g. user.preference.editor)"
        )
    if _is_uuid(name):
        raise KnowledgeNameRefused(
            f"knowledge {what} {name!r} looks like an item id; choose a name that is not a UUID"
        )
    return name


def _is_uuid(text: str) -> bool:
    try:
        UUID(text)
    except ValueError:
        return False
    return True
