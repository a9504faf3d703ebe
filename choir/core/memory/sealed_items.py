"""A knowledge item of an encrypted memory, as stored: its text and data sealed together.

    text, data = seal_item(key, "ada", "personal", "likes tea", {"cups": 2}, nonce=...)
    # text == SEALED_TEXT; data == {"choir_sealed": "<base64>"}
    opened = open_item(key, "ada", "personal", data)   # OpenedItem("likes tea", {"cups": 2})

The item keeps its own columns, so versions, restore, rename and aliases work unchanged: its
`text` is a fixed placeholder (nothing of the content: no search term, no embedding of it) and
its `data` one sealed value (`choir.core.memory.sealing`) of both, bound to the memory
(`agent/class`) so a value copied into another memory does not open. Name, loc, type and tags
stay in the clear: they are how an encrypted item is found. Pure: the caller draws the nonce.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Final

from choir.core.memory.knowledge.graph import DATA_MAX_BYTES
from choir.core.memory.sealing import SealBroken, SealError, open_sealed, seal
from choir.errors import UsageError

SEALED_TEXT: Final = "(encrypted)"
"""An encrypted item's stored text: the same for every item, so it says nothing."""
SEALED_KEY: Final = "choir_sealed"
"""The one key of an encrypted item's stored data."""
LOCKED_TEXT: Final = "(encrypted, locked)"
"""An encrypted item's text in an operator's list views while choird holds no key for it."""
UNOPENED_TEXT: Final = "(encrypted, does not open)"
"""... and when its sealed value does not open with the key (altered, or another memory's)."""


class SealedTooLarge(UsageError):
    """An item whose sealed value would not fit an item's data."""


@dataclass(frozen=True, slots=True)
class OpenedItem:
    text: str
    data: dict[str, Any]


def memory_context(agent: str, memory_class: str) -> bytes:
    """What a sealed value is bound to: the memory it belongs to."""
    return f"{agent}/{memory_class}".encode()


def is_sealed(data: object) -> bool:
    """Whether stored `data` is an encrypted item's sealed value."""
    return isinstance(data, dict) and set(data) == {SEALED_KEY}


def seal_item(
    key: bytes,
    agent: str,
    memory_class: str,
    text: str,
    data: dict[str, Any],
    *,
    nonce: bytes,
) -> tuple[str, dict[str, Any]]:
    """The (text, data) to store for an item of `agent`'s encrypted `memory_class` memory."""
    stored = _sealed_value(key, agent, memory_class, text, data, nonce)
    size = len(json.dumps(stored))
    plain = len(json.dumps({"text": text, "data": data}, ensure_ascii=False).encode())
    if size > DATA_MAX_BYTES:  # base64 adds a third: the limit is the data's, on the sealed form
        raise SealedTooLarge(
            f"an item of encrypted memory {agent}/{memory_class} is {plain} bytes of text "
            f"and data, {size} sealed, over the limit of {DATA_MAX_BYTES} "
            f"({DATA_MAX_BYTES // 1024} KiB) sealed; keep it under about "
            f"{DATA_MAX_BYTES * 3 // 4 // 1024} KiB, or split it into several items"
        )
    return SEALED_TEXT, stored


def seal_existing(
    key: bytes,
    agent: str,
    memory_class: str,
    text: str,
    data: dict[str, Any],
    *,
    nonce: bytes,
) -> tuple[str, dict[str, Any]]:
    """`seal_item` of an item (or a version) stored in the clear before its memory was marked
    encrypted, whatever its size: the limit keeps a new write's sealed value within an item's
    data, but an item already there is sealed all the same — left in the clear it would break
    what marking the memory promised."""
    return SEALED_TEXT, _sealed_value(key, agent, memory_class, text, data, nonce)


def _sealed_value(
    key: bytes, agent: str, memory_class: str, text: str, data: dict[str, Any], nonce: bytes
) -> dict[str, Any]:
    plain = json.dumps({"text": text, "data": data}, ensure_ascii=False).encode()
    sealed = seal(key, plain, memory_context(agent, memory_class), nonce=nonce)
    return {SEALED_KEY: base64.b64encode(sealed).decode("ascii")}


def open_item(key: bytes, agent: str, memory_class: str, data: dict[str, Any]) -> OpenedItem:
    """The text and data sealed in stored `data`; `SealBroken` when it does not open."""
    where = f"{agent}/{memory_class}"
    try:
        sealed = base64.b64decode(str(data[SEALED_KEY]), validate=True)
    except (KeyError, binascii.Error, ValueError):
        raise SealBroken(f"a sealed value of {where} is not base64: it was altered") from None
    plain = open_sealed(key, sealed, memory_context(agent, memory_class))
    try:
        opened = json.loads(plain)
        return OpenedItem(str(opened["text"]), dict(opened["data"]))
    except (ValueError, KeyError, TypeError):
        raise SealBroken(f"a sealed value of {where} opened to no item") from None


def readable(
    key: bytes | None, agent: str, memory_class: str, text: str, data: dict[str, Any]
) -> OpenedItem:
    """An item's (or a version's) text and data as a view shows them: as stored when not
    sealed; opened with `key`; else `LOCKED_TEXT` (no key) or `UNOPENED_TEXT` with the sealed
    value as stored — never a guess at the content."""
    if not is_sealed(data):
        return OpenedItem(text, data)
    if key is None:
        return OpenedItem(LOCKED_TEXT, data)
    try:
        return open_item(key, agent, memory_class, data)
    except SealError:
        return OpenedItem(UNOPENED_TEXT, data)
