"""`choir.web.browse`'s rules, apart from the browser: its arguments, which URLs and addresses a
page may load, and how a page's text is cut into chunks. Pure.

A page is read in chunks (`offset`, `max_chars`): a large page never becomes one multi-megabyte
tool result, and the answer says where the next chunk starts.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

Action = Literal[
    "open", "read", "links", "find", "click", "type", "tabs", "switch", "close_tab", "screenshot"
]
DEFAULT_CHARS: Final = 8_000
MAX_CHARS: Final = 20_000
"""The most text one call returns, whatever `max_chars` asks."""
MAX_LINKS: Final = 100
"""Links (or found elements) one call lists."""
SNIPPET_CHARS: Final = 200
"""Text shown for one link or found element."""
WEB_SCHEMES: Final = frozenset({"http", "https"})


class BrowseCall(BaseModel):
    """The tool's arguments (the manifest's schema, checked again: choird trusts no agent)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Action = "open"
    url: str | None = None
    new_tab: bool = False
    tab: int | None = None
    offset: Annotated[int, Field(ge=0)] = 0
    max_chars: Annotated[int, Field(ge=100, le=200_000)] = DEFAULT_CHARS
    selector: Annotated[str, Field(min_length=1, max_length=1_000)] | None = None
    text: Annotated[str, Field(min_length=1, max_length=1_000)] | None = None
    index: Annotated[int, Field(ge=0)] = 0
    value: Annotated[str, Field(max_length=10_000)] | None = None
    submit: bool = False
    full_page: bool = False

    @property
    def chars(self) -> int:
        return min(self.max_chars, MAX_CHARS)


def web_url(url: str) -> str | None:
    """Why `url` may not be opened (not http(s), no host), or None."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in WEB_SCHEMES:
        return f"only http(s) URLs can be opened, not {parts.scheme or 'a relative'} URL {url!r}"
    if not parts.hostname:
        return f"{url!r} names no host"
    return None


def private_address(address: str) -> bool:
    """Whether `address` is this host, the LAN or otherwise not the public internet."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    offset: int
    total: int
    next_offset: int | None
    """Where the next chunk starts; None: this one reaches the end."""


def chunk(text: str, offset: int, size: int) -> Chunk:
    """`size` characters of `text` from `offset`, ended at a line or word break when one is
    near (a chunk never ends mid-word when it can help it)."""
    total = len(text)
    start = min(offset, total)
    end = min(start + size, total)
    if end < total:
        cut = max(text.rfind("\n", start, end), text.rfind(" ", start, end))
        if cut > start + size // 2:
            end = cut + 1
    return Chunk(text[start:end], start, total, end if end < total else None)


_BLANKS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_SPACES = re.compile(r"[ \t\u00a0]+")


def clean_text(raw: str) -> str:
    """A page's rendered text with runs of spaces and blank lines folded."""
    lines = (_SPACES.sub(" ", line).strip() for line in raw.splitlines())
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def snippet(text: str) -> str:
    folded = " ".join(text.split())
    return folded if len(folded) <= SNIPPET_CHARS else folded[: SNIPPET_CHARS - 1] + "…"
