"""Pure parsing of ripgrep's `--json` output stream into capped match rows."""

from __future__ import annotations

import base64
from typing import Any, NamedTuple

import orjson

from choir.agent.tools._caps import SEARCH_LINE_MAX_CHARS, cut


class Match(NamedTuple):
    path: str
    line_number: int
    line: str
    """The matched line without its newline, cut to `SEARCH_LINE_MAX_CHARS`."""


class RgStream:
    """Collects `match` messages from raw rg output until `limit`; one more sets `truncated`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.matches: list[Match] = []
        self.truncated = False
        self._partial = b""

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of rg's stdout (chunks need not end at a line boundary)."""
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            if line and not self.truncated:
                self._message(orjson.loads(line))

    def _message(self, message: dict[str, Any]) -> None:
        if message.get("type") != "match":
            return
        if len(self.matches) >= self.limit:
            self.truncated = True
            return
        data = message["data"]
        line, _ = cut(_text(data["lines"]).rstrip("\r\n"), SEARCH_LINE_MAX_CHARS)
        self.matches.append(Match(_text(data["path"]), int(data["line_number"]), line))


def _text(field: dict[str, str]) -> str:
    """rg sends valid UTF-8 as `text` and anything else base64-encoded as `bytes`."""
    if "text" in field:
        return field["text"]
    return base64.b64decode(field["bytes"]).decode(errors="replace")
