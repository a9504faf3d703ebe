"""Agent logs archived while the agent runs (§22.2, `log_archive_threshold_lines`).

choird cannot rename an agent's log under its writer the way it rolls its own: the process
runtime's agent writes the file through its own stderr, a descriptor choird cannot reopen (and
must not own: a dead choird must not break an agent's logging). So a live log is archived by
copy and truncate, made safe by a lock every writer shares:

- each writer (the agent's stderr handler, the copy of a container's output) appends a line
  holding `flock(LOCK_SH)` on its descriptor (`choir.logs.locking.shared`);
- the archiver takes `flock(LOCK_EX)` on its own descriptor of the same file, checks that the
  path still names that file (an exit's `archive_agent_log` may have renamed it), copies every
  byte to a fresh staged `<timestamp>.log` (fsynced) and truncates the file to 0 — writers
  wait meanwhile and append at the new end (O_APPEND) when it is released.

So a line is in the archive or in the live file, never both, never neither. A crash between
the staged copy's rename and the truncate leaves those lines in both (duplicated, never lost).
Output that bypasses the lock (a traceback Python prints as it dies) is rare and short; its
window is the copy. Lines are counted incrementally (`LineCount`): a look costs one `stat` when
nothing was written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from choir.home import ChoirHome
from choir.logs.archive import archive_dir, compress, log_path, stage
from choir.logs.locking import exclusive

CHECK_EVERY_S: Final = 2.0
"""How often choird counts the running agents' log lines: a live log may pass the threshold by
what an agent writes in that time before it is archived."""
_COPY_BYTES: Final = 1 << 20


@dataclass(slots=True)
class LineCount:
    """Lines of one live log, counted from where the last look stopped."""

    inode: int = -1
    offset: int = 0
    lines: int = 0

    def update(self, path: Path) -> int:
        """The lines now in `path` (0 when missing); reads only what was appended since."""
        try:
            with path.open("rb") as stream:
                info = os.fstat(stream.fileno())
                if info.st_ino != self.inode or info.st_size < self.offset:
                    self.inode, self.offset, self.lines = info.st_ino, 0, 0  # new or truncated
                stream.seek(self.offset)
                while chunk := stream.read(_COPY_BYTES):
                    self.lines += chunk.count(b"\n")
                    self.offset += len(chunk)
        except FileNotFoundError:
            self.inode, self.offset, self.lines = -1, 0, 0
        return self.lines


def archive_in_place(active: Path, folder: Path) -> Path | None:
    """Copy `active` to a staged archive in `folder` and empty it, under the writers' lock;
    the staged copy (compress it next), or None when there was nothing to archive."""
    try:
        fd = os.open(active, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        with exclusive(fd):
            if not _still_named(active, fd) or os.fstat(fd).st_size == 0:
                return None
            staged = _copy(fd, active, folder)
            os.ftruncate(fd, 0)
            os.fsync(fd)
            return staged
    finally:
        os.close(fd)


def _still_named(path: Path, fd: int) -> bool:
    try:
        return path.stat().st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _copy(fd: int, active: Path, folder: Path) -> Path:
    """Every byte of `fd` in a staged `<timestamp>.log` of `folder` (written beside, fsynced,
    then named: `compress_pending` never finds half a copy)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = folder / f".{active.name}.copy"
    out = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        while chunk := os.read(fd, _COPY_BYTES):
            os.write(out, chunk)
        os.fsync(out)
    finally:
        os.close(out)
    return stage(partial, folder)


class LiveLogArchiver:
    """Archives live logs past a line count; blocking (copy, gzip): choird calls `check` in a
    worker thread every `CHECK_EVERY_S` with the running agents."""

    def __init__(self, home: ChoirHome) -> None:
        self._home = home
        self._counts: dict[str, LineCount] = {}

    def check(self, sources: Iterable[str], threshold: int) -> list[Path]:
        """Archive each of `sources`' live logs holding more than `threshold` lines (0: never);
        the archives made."""
        made: list[Path] = []
        if threshold <= 0:
            return made
        for source in sources:
            count = self._counts.setdefault(source, LineCount())
            if count.update(log_path(self._home, source)) > threshold:
                archived = self.archive(source)
                if archived is not None:
                    made.append(archived)
        return made

    def archive(self, source: str) -> Path | None:
        """Archive `source`'s live log now, whatever its length."""
        staged = archive_in_place(log_path(self._home, source), archive_dir(self._home, source))
        self._counts.pop(source, None)
        return compress(staged) if staged is not None else None


__all__ = [
    "CHECK_EVERY_S",
    "LineCount",
    "LiveLogArchiver",
    "archive_in_place",
]
