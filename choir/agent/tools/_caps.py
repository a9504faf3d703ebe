"""Output caps shared by the built-in tools: a tool result must fit in a model's context."""

from __future__ import annotations

READ_MAX_BYTES = 64 * 1024
"""Most text `choir.fs.read` returns per call; the model continues from `next_start_line`."""
READ_MAX_LINES = 2000
"""Most lines `choir.fs.read` returns per call."""
LINE_MAX_CHARS = 4000
"""A longer line is cut (minified files); the result lists which lines were cut."""
EDIT_MAX_BYTES = 32 * 1024 * 1024
"""Largest file `choir.fs.write` rewrites in memory."""
SEARCH_MAX_RESULTS = 1000
"""Ceiling on `max_results` of `choir.fs.search` (the manifest's maximum)."""
SEARCH_LINE_MAX_CHARS = 500
"""Matched lines are cut to this length in search results."""
EXEC_OUTPUT_BYTES = 64 * 1024
"""Kept per stream (stdout, stderr) of `choir.exec`: the first and last halves."""
BINARY_SNIFF_BYTES = 8192
"""How much of a file is inspected to tell text from binary."""


def cut(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters, and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True


class HeadTail:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest.

    The head shows how a command started, the tail how it ended (the error is usually there).
    """

    def __init__(self, limit: int = EXEC_OUTPUT_BYTES) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        """Bytes seen, kept or not."""

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        self.head += chunk[:room]
        self.tail += chunk[room:]
        if len(self.tail) > self.tail_limit:
            del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        """The kept bytes as text, with a marker where the middle was dropped."""
        head = self.head.decode(errors="replace")
        tail = self.tail.decode(errors="replace")
        if not self.truncated:
            return head + tail
        dropped = self.total - len(self.head) - len(self.tail)
        return f"{head}\n[... {dropped} bytes omitted ...]\n{tail}"
