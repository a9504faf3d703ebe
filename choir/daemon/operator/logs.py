"""`logs <agent-id|choird>` (§22.2): the current log file, then new lines as they are written.

Items: `{kind: "lines", lines: [...]}` batches (whole lines, as written: JSON lines), one
`{kind: "snapshot_end"}` after the file's current contents, and `{kind: "rotated"}` when the
file was archived or replaced while followed. The follower keeps the open file and reads it to
its end before switching to the new file at the same path, so a line written just before an
archive rename is never lost; watchfiles (inotify) on the log directory says when to look, and a
look every `RECHECK_MS` covers anything a notification could miss. A running agent's log is
archived in place (copied, then truncated: `choir.logs.live`): the follower reads what it had
not reached from the archive, a byte copy, then goes on from the file's new start (from every
archive made since it last looked, when a starved follower missed one: the first from where it
was, the later ones whole). An agent's
log is archived when its process exits too: while no agent process writes one, the snapshot is
the last archive (the last session's log, where "see choirctl logs <agent>" after a failed start
points).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Final

from choir.config import AGENT_ID_PATTERN
from choir.daemon.operator.context import OperatorContext
from choir.errors import NotFoundError
from choir.logs import every_archive, last_archive, log_path
from choir.protocol.base import WireModel
from choir.protocol.operator.items import LogLines, LogRotated, LogSnapshotEnd
from choir.protocol.operator.requests import LogsRequest

CHUNK_BYTES: Final = 256 * 1024
"""Most bytes read (and sent as one item) at a time."""
RECHECK_MS: Final = 500
"""Look at the file at least this often while following, notification or not."""
DEBOUNCE_MS: Final = 100
"""Group the notifications of a burst of writes for at most this long."""


def log_source(ctx: OperatorContext, source: str) -> Path:
    """The active log of `choird` or of an agent (configured, or one that left a log)."""
    path = log_path(ctx.home, source)
    if source == "choird" or source in ctx.config.agents:
        return path
    if re.fullmatch(AGENT_ID_PATTERN, source) and path.exists():
        return path
    agents = ", ".join(sorted(ctx.config.agents)) or "none configured"
    raise NotFoundError(f"no log source {source!r}: use choird or an agent id ({agents})")


async def logs(ctx: OperatorContext, request: LogsRequest) -> AsyncIterator[WireModel]:
    """The stream for `request`; an unknown source is refused before it starts."""
    path = log_source(ctx, request.source)
    previous = None if request.source == "choird" else request.source
    return tail_log(
        path,
        follow=request.follow,
        previous=lambda: last_archive(ctx.home, previous) if previous else None,
        archives=lambda: every_archive(ctx.home, previous) if previous else [],
    )


async def tail_log(
    path: Path,
    *,
    follow: bool,
    previous: Callable[[], Path | None] | None = None,
    archives: Callable[[], list[Path]] | None = None,
) -> AsyncIterator[WireModel]:
    """Snapshot then (when `follow`) new lines of the log at `path`, like `tail -f -n +1`.

    With no file at `path` (an agent's log is archived when its process exits), the snapshot is
    `previous()`'s archive — the last session's log, which a "see choirctl logs" points to."""
    tail = LogTail(path, previous, archives)
    stop = asyncio.Event()
    try:
        if not tail.is_open and previous is not None:
            for lines in await asyncio.to_thread(_archived_batches, previous()):
                yield LogLines(lines=lines)
        for lines in tail.drain():
            yield LogLines(lines=lines)
        yield LogSnapshotEnd()
        if not follow:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        # here, not at the top: watchfiles (and anyio under it) is 3 MB and ~40 ms of choird's
        # start that only a followed log needs
        from watchfiles import awatch

        watcher = awatch(
            path.parent,
            watch_filter=lambda _change, changed: Path(changed).name == path.name,
            debounce=DEBOUNCE_MS,
            rust_timeout=RECHECK_MS,
            yield_on_timeout=True,
            recursive=False,
            stop_event=stop,
        )
        async with contextlib.aclosing(watcher) as changes:
            async for _ in changes:
                for item in tail.catch_up():
                    yield item
    finally:
        stop.set()
        tail.close()


def _archived_batches(path: Path | None) -> list[list[str]]:
    """The lines of an archive (gzipped, or staged and not yet compressed) in batches of about
    CHUNK_BYTES; [] when there is none or it was compressed away meanwhile."""
    raw = _archive_bytes(path)
    batches: list[list[str]] = []
    batch: list[str] = []
    size = 0
    for line in raw.decode(errors="replace").splitlines():
        batch.append(line)
        size += len(line) + 1
        if size >= CHUNK_BYTES:
            batches.append(batch)
            batch, size = [], 0
    return [*batches, batch] if batch else batches


def _archive_bytes(path: Path | None) -> bytes:
    """The bytes of an archive (gzipped, or staged and not yet compressed); empty when there
    is none or it was compressed away meanwhile."""
    if path is None:
        return b""
    try:
        return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except FileNotFoundError:  # a staged copy compressed meanwhile: read its archive
        try:
            return gzip.decompress(path.with_name(f"{path.name}.gz").read_bytes())
        except FileNotFoundError:
            return b""


def _archive_name(path: Path | None) -> str | None:
    """An archive's name as staged (`.gz` dropped: compressing it makes no new archive)."""
    return path.name.removesuffix(".gz") if path is not None else None


class LogTail:
    """Whole lines from a log file that may be archived (renamed away) and recreated."""

    def __init__(
        self,
        path: Path,
        archived: Callable[[], Path | None] | None = None,
        archives: Callable[[], list[Path]] | None = None,
    ) -> None:
        self.path = path
        self._archived = archived
        """The newest archive of the log: where a live log emptied in place put its lines."""
        self._archives = archives
        """Every archive of the log, oldest first (None: only the newest is known)."""
        self._file: BinaryIO | None = None
        self._partial = b""
        self.emptied = 0
        """Times the file was archived in place (copied and truncated) while followed."""
        self._seen_archive: str | None = None
        """The newest archive when last looked (its name without `.gz`)."""
        self._open()

    def drain(self) -> Iterator[list[str]]:
        """Every complete line written since the last call, in batches."""
        if self._file is not None and self._archived_in_place():
            # a new archive of this very file: emptied, even if it grew past where we were
            yield from self._emptied(self._file.tell())
            self._file.seek(0)
        while self._file is not None:
            if os.fstat(self._file.fileno()).st_size < self._file.tell():
                yield from self._emptied(self._file.tell())
                self._file.seek(0)  # truncated in place: go on from its start
            data = self._file.read(CHUNK_BYTES)
            if not data:
                return
            yield from self._split(data)

    def _split(self, data: bytes) -> Iterator[list[str]]:
        *lines, self._partial = (self._partial + data).split(b"\n")
        if lines:
            yield [line.decode(errors="replace") for line in lines]

    def _emptied(self, offset: int) -> Iterator[list[str]]:
        """A running agent's log archived in place (`choir.logs.live`): the archive is a byte
        copy of the file, so what was written past `offset` before the truncate is there."""
        self.emptied += 1
        fresh = self._fresh_archives()
        if not fresh:
            return
        self._seen_archive = _archive_name(fresh[-1])
        yield from self._split(_archive_bytes(fresh[0])[offset:])
        for later in fresh[1:]:  # emptied again before this follower looked: all of it is new
            yield from self._split(_archive_bytes(later))

    def _fresh_archives(self) -> list[Path]:
        """The archives made since the last look (just the newest when that is all we know)."""
        if self._archives is None:
            newest = self._archived() if self._archived is not None else None
            return [newest] if newest is not None else []
        every = self._archives()
        names = [_archive_name(path) for path in every]
        if self._seen_archive is None:
            return every  # none existed when the file was opened
        if self._seen_archive in names:
            return every[names.index(self._seen_archive) + 1 :]
        return every[-1:]  # the one we saw was removed meanwhile: the newest is ours

    def _archived_in_place(self) -> bool:
        """Whether a new archive appeared while the path still names the open file (an exit's
        archive renames the file away: that is a rotation, not this)."""
        if self._archived is None or self._file is None:
            return False
        newest = _archive_name(self._archived())
        if newest == self._seen_archive:
            return False
        try:
            return self.path.stat().st_ino == os.fstat(self._file.fileno()).st_ino
        except FileNotFoundError:
            return False

    def catch_up(self) -> Iterator[WireModel]:
        """Items for what was written since the last look, following a rotation."""
        emptied = self.emptied
        for lines in self.drain():
            yield LogLines(lines=lines)
        if self.emptied != emptied:
            yield LogRotated()
        if self._replaced():
            if self._partial:
                yield LogLines(lines=[self._partial.decode(errors="replace")])
            rotated = self._file is not None
            self.close()
            self._open()
            if rotated:
                yield LogRotated()
            for lines in self.drain():
                yield LogLines(lines=lines)

    @property
    def is_open(self) -> bool:
        """Whether a file was at the path when last looked at."""
        return self._file is not None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._partial = b""

    def _open(self) -> None:
        if self._archived is not None:  # archives made before this file was opened are old
            self._seen_archive = _archive_name(self._archived())
        with contextlib.suppress(FileNotFoundError):
            self._file = self.path.open("rb")

    def _replaced(self) -> bool:
        """The path now names another file than the open one (or appeared, or vanished)."""
        try:
            current = self.path.stat().st_ino
        except FileNotFoundError:
            return False
        return self._file is None or current != os.fstat(self._file.fileno()).st_ino
