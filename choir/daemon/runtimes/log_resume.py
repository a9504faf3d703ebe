"""Where an adopted container's output is picked up again: right after what was copied before.

The previous choird copied the container's output into the agent's log as it came; the choird
that adopts the container asks the engine for what came after. The log's modification time says
when the last copy was written — but the kernel stamps files with a coarse clock, up to a tick
(1-10 ms) behind the time the engine stamps each line with, so the lines written in that last
tick came again: the agent's log held them twice after every adoption (a second "session
started"). So the engine is asked from a little before (`SLACK_S`: nothing is lost), and the lines
the stream starts with that the log already ends with are dropped (`SkipCopied`: nothing twice).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

SLACK_S: Final = 0.05
"""How far before the log's modification time the engine is asked from: more than a tick of the
kernel's coarse clock, less than a moment in which an agent says anything twice."""
TAIL_BYTES: Final = 16 * 1024
"""How much of the log's end the repeated lines are looked for in."""


class Sink(Protocol):
    """Where a container's output goes (`choir.adapters.docker.containers.Sink`)."""

    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


@dataclass(frozen=True)
class ResumePoint:
    """Where to pick a container's output up again in an agent's log."""

    since: float
    """What to ask the engine for: its lines from then on (seconds since the epoch)."""
    copied: tuple[bytes, ...]
    """The log's last whole lines, newline included: what the stream may start with again."""


def resume_point(log_file: Path) -> ResumePoint | None:
    """Where `log_file` stopped being copied; None when there is no log (copy everything)."""
    try:
        with log_file.open("rb") as log:
            changed = os.fstat(log.fileno()).st_mtime
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - TAIL_BYTES))
            tail = log.read()
    except OSError:
        return None
    lines = tail.splitlines(keepends=True)
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first may be cut
    return ResumePoint(changed - SLACK_S, tuple(line for line in lines if line.endswith(b"\n")))


class SkipCopied:
    """A sink dropping the lines its stream starts with that repeat the end of what was copied
    (in order), then passing everything on; `finish` once the stream ends."""

    def __init__(self, sink: Sink, copied: Sequence[bytes]) -> None:
        self._sink = sink
        self._copied = tuple(copied)
        self._next: int | None = None
        """The index in `copied` the next repeated line must match; None before the first."""
        self._pending = b""
        self._skipping = bool(self._copied)

    def write(self, data: bytes, /) -> int:
        if not self._skipping:
            return self._sink.write(data)
        self._pending += data
        while self._skipping and (end := self._pending.find(b"\n")) >= 0:
            line = self._pending[: end + 1]
            if not self._repeats(line):
                self._skipping = False
                break
            self._pending = self._pending[end + 1 :]
        if not self._skipping:
            self._pass_pending()
        return len(data)

    def flush(self) -> None:
        self._sink.flush()

    def finish(self) -> None:
        """The stream ended: what it left unmatched (a last line without newline) goes on."""
        self._skipping = False
        self._pass_pending()

    def _repeats(self, line: bytes) -> bool:
        """Whether `line` is the next of the copied lines the stream repeats."""
        if self._next is None:
            found = [i for i, copied in enumerate(self._copied) if copied == line]
            if not found:
                return False
            self._next = found[-1] + 1
        elif self._next < len(self._copied) and self._copied[self._next] == line:
            self._next += 1
        else:
            return False
        if self._next == len(self._copied):
            self._skipping = False  # every repeat dropped: the rest is new
        return True

    def _pass_pending(self) -> None:
        pending, self._pending = self._pending, b""
        if pending:
            self._sink.write(pending)
            self._sink.flush()


__all__ = ["SLACK_S", "ResumePoint", "SkipCopied", "resume_point"]
