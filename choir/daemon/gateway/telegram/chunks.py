"""A reply cut into Telegram messages (§19.5: chunked at 4,096 characters), pure.

Telegram counts a message's length in UTF-16 code units, so an emoji counts two: the limit is
applied in those units. A chunk ends at the last line break that fits, else at the last space,
else (one word longer than a message) at the limit itself, never inside a surrogate pair.
The whitespace at a break is dropped (Telegram trims a message's ends anyway); every other
character is kept, in order. A line break is preferred unless it would leave a chunk under a
quarter full.
"""

from __future__ import annotations

from typing import Final

LIMIT: Final = 4096
"""Telegram's limit on a message's text, in UTF-16 code units."""


def units(text: str) -> int:
    """The length of `text` as Telegram counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def chunks(text: str, limit: int = LIMIT) -> list[str]:
    """`text` as messages of at most `limit` units each; none for blank text."""
    out: list[str] = []
    rest = text.strip()
    while rest:
        if units(rest) <= limit:
            out.append(rest)
            break
        cut = max(_fitting(rest, limit), 1)  # a limit below one character still advances
        at = _break(rest, cut)
        if at > 0:
            cut = at
        out.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    return [chunk for chunk in out if chunk]


def _break(text: str, cut: int) -> int:
    """Where to end a chunk of at most `cut` characters of `text`: at its last line break
    unless that leaves it under a quarter full, else at its last space, else at any line
    break (-1: none, cut at the limit). The character at `cut` itself may be the break."""
    window = text[: cut + 1]
    line = window.rfind("\n")
    if line >= cut // 4:
        return line
    space = max(window.rfind(" "), window.rfind("\t"))
    return space if space > 0 else line


def _fitting(text: str, limit: int) -> int:
    """How many characters of `text` fit in `limit` units."""
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > limit:
            return index
    return len(text)
