"""The file handler of a log source: 0600 file, one line per record, archived past a line count.

`logs/<source>.log` is archived when it holds `threshold` lines and one more record arrives
(§22.2, `log_archive_threshold_lines`), so the active file never holds more than `threshold`
lines. The rollover itself is a rename and a reopen under the handler's lock; the gzip work runs
on a background thread so a large archive never stalls choird's event loop.

A record is written whole or not at all (issue 12): one `write(2)` of the encoded line on an
O_APPEND descriptor, and a short write — the disk filled up half-way — is cut back to where the
line began. A record that could not be written is counted, `on_write_error` is told (choird
reports the disk as full), and the next line that gets through says how many were lost.
Warnings and errors are not lost with them: they are kept (up to `HELD_MAX_LINES`) and written,
with their own time, before that next line. The warning that matters most is logged exactly
while the disk is full — choird's own "disk unhealthy" — and an operator reading the log
afterwards must find it there, not only a count of lost lines.
After an error other than a full disk (a file system the kernel made read-only, an I/O error)
the file is opened afresh for the next record: once the operator has mounted a repaired or new
file system there, logging resumes in it instead of failing on the dead one for good.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
import threading
from collections.abc import Callable
from contextlib import nullcontext
from io import TextIOWrapper
from pathlib import Path

from choir.logs.archive import compress, compress_pending, stage
from choir.logs.locking import lockable, shared

_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})

HELD_MAX_LINES = 100
HELD_MAX_BYTES = 256 * 1024
"""Bounds of the warnings kept while writes fail: beyond them a warning is counted as lost."""

WriteErrorHook = Callable[[Path, OSError | None], None]
"""Told of every failed write (the error) and of the first write that succeeds after one (None)."""

_default_hook: WriteErrorHook | None = None


def set_write_error_hook(hook: WriteErrorHook | None) -> WriteErrorHook | None:
    """Who every log writer without a hook of its own tells of failed writes (choird: its disk
    watch); returns the previous one."""
    global _default_hook
    previous, _default_hook = _default_hook, hook
    return previous


def count_lines(path: Path) -> tuple[int, bool]:
    """Lines in `path` (a cut-off last line counts) and whether that last line was cut off."""
    lines, last = 0, b"\n"
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return (lines + 1, True) if last != b"\n" else (lines, False)


class ArchivingFileHandler(logging.FileHandler):
    """Appends one line per record to `path`; past `threshold` lines, archives into `archive_dir`.

    `threshold` 0 never archives by size (an agent log is archived when its session ends).
    """

    def __init__(self, path: Path, archive_dir: Path, *, threshold: int) -> None:
        if threshold < 0:
            raise ValueError(f"archive threshold must be 0 (never) or positive, got {threshold}")
        self.archive_dir = archive_dir
        self.threshold = threshold
        self.lines = 0
        """Lines in the active file, counted when it is opened and on every write."""
        self._compressors: list[threading.Thread] = []
        self.dropped = 0
        """Records lost since the last line that was written (disk full, I/O error)."""
        self._held: list[bytes] = []
        """Warnings and errors that could not be written yet: they go before the next line."""
        self.on_write_error: WriteErrorHook | None = None
        """Who to tell when writes start failing and when they succeed again (choird's health)."""
        self._torn = False
        """A short write could not be cut back: the next line starts on a fresh line."""
        self._failing = False
        compress_pending(archive_dir)
        super().__init__(path, mode="a", encoding="utf-8")

    def _open(self) -> TextIOWrapper:
        """Open for append with mode 0600, counting the lines already there."""
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        stream = os.fdopen(fd, "a", encoding="utf-8")
        self.lines, cut_off = count_lines(Path(self.baseFilename))
        self._torn = cut_off  # a crash cut the last line: keep the next one parseable
        return stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.threshold and self.lines >= self.threshold:
                self.roll_over()
        except Exception:
            self.handleError(record)
        try:
            line = (self.format(record) + self.terminator).encode("utf-8", "surrogateescape")
        except Exception:
            self.handleError(record)
            return
        with self.lock or nullcontext():
            self._write_line(line, record)

    def _write_line(self, line: bytes, record: logging.LogRecord) -> None:
        """Append `line` whole, after a note of the records lost before it, if any."""
        try:
            if self.stream is None:
                self.stream = self._open()
            notes = self._notes(record)
            held = b"".join(self._held)
            append_whole(self.stream.fileno(), b"".join(notes) + held + line, torn=self._torn)
        except OSError as error:
            self._torn = self._torn or getattr(error, "torn", False)
            self._hold_or_drop(line, record)
            self._failing = True
            if error.errno not in _ROOM_ERRNOS:  # a full disk frees up in place; others may not
                self._drop_stream()
            self._tell(error)
            return
        self.lines += len(notes) + len(self._held) + 1
        self.dropped, self._torn = 0, False
        self._held.clear()
        if self._failing:
            self._failing = False
            self._tell(None)

    def _hold_or_drop(self, line: bytes, record: logging.LogRecord) -> None:
        """Keep a warning or error that could not be written for the next write; count the rest
        (and warnings past the bounds) as lost."""
        room = len(self._held) < HELD_MAX_LINES
        room = room and sum(map(len, self._held)) + len(line) <= HELD_MAX_BYTES
        if record.levelno >= logging.WARNING and room:
            self._held.append(line)
        else:
            self.dropped += 1

    def _drop_stream(self) -> None:
        stream, self.stream = self.stream, None
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()

    def _notes(self, record: logging.LogRecord) -> list[bytes]:
        """What the log says about the records written late or never, before they follow."""
        messages = []
        if self.dropped:
            messages.append(f"{self.dropped} log record(s) were lost: the disk was full or failing")
        if self._held:
            messages.append(
                f"{len(self._held)} warning(s) could not be written when logged, the disk was full "
                "or failing: they follow, each with the time it was logged"
            )
        notes = []
        for message in messages:
            note = logging.LogRecord(record.name, logging.WARNING, __file__, 0, message, None, None)
            notes.append((self.format(note) + self.terminator).encode("utf-8", "surrogateescape"))
        return notes

    def _tell(self, error: OSError | None) -> None:
        _tell(self.on_write_error, Path(self.baseFilename), error)

    def roll_over(self) -> None:
        """Move the active file aside, start a fresh one, and compress the old one in background."""
        with self.lock or nullcontext():
            if self.stream is not None:
                self.stream.close()
                self.stream = None
            staged = stage(Path(self.baseFilename), self.archive_dir)
            self.stream = self._open()
            self._compressors = [thread for thread in self._compressors if thread.is_alive()]
            thread = threading.Thread(
                target=_compress_reporting, args=(staged,), name="choir-log-archive"
            )
            self._compressors.append(thread)
            thread.start()

    def wait_for_archives(self) -> None:
        """Block until every archive this handler started is compressed."""
        with self.lock or nullcontext():
            pending = list(self._compressors)
        for thread in pending:
            thread.join()

    def close(self) -> None:
        self.wait_for_archives()
        super().close()


class WholeLineStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler (stderr) that writes each record whole or not at all: an agent's stderr
    is its log file under the process runtime, which a full disk must not tear."""

    _lockable: bool | None = None
    """Whether the stream is a regular file, archived in place while written (asked once)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation: not a file
            super().emit(record)
            return
        try:
            line = (self.format(record) + self.terminator).encode("utf-8", "surrogateescape")
            self.flush()  # whatever went through the stream's buffer goes first
        except Exception:
            self.handleError(record)
            return
        if self._lockable is None:
            self._lockable = lockable(fd)
        # an agent's stderr is its live log (process runtime): choird archives it in place
        # under the exclusive lock (`choir.logs.live`), so each line is written under the shared
        with self.lock or nullcontext(), contextlib.suppress(OSError), shared(fd, self._lockable):
            append_whole(fd, line)  # a line that does not fit is dropped, never torn


class AppendSink:
    """A binary sink for copied output (a container's log): each chunk appended whole or
    dropped, so a full disk neither tears a line nor stops the copy."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dropped = 0
        """Chunks lost to write errors."""
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._failing = False

    def write(self, data: bytes) -> int:
        try:
            with shared(self._fd, True):  # archived in place while copied (`choir.logs.live`)
                append_whole(self._fd, bytes(data))
        except OSError as error:
            self.dropped += 1
            self._failing = True
            _tell(None, self.path, error)
            return 0
        if self._failing:
            self._failing = False
            _tell(None, self.path, None)
        return len(data)

    def flush(self) -> None:
        """Every write went straight to the file."""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def __enter__(self) -> AppendSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tell(hook: WriteErrorHook | None, path: Path, error: OSError | None) -> None:
    hook = hook or _default_hook
    if hook is None:
        return
    with contextlib.suppress(Exception):  # a reporting hook must never break logging
        hook(path, error)


def append_whole(fd: int, data: bytes, *, torn: bool = False) -> None:
    """Append `data` to the O_APPEND descriptor `fd` in one write, or not at all.

    A short write (the file system filled up mid-line) is truncated back to where the line
    began and raises ENOSPC; if even that fails, the OSError carries `torn = True` so the
    caller starts its next line on a fresh one. `torn` prefixes a newline for that case.
    """
    if torn:
        data = b"\n" + data
    start = os.fstat(fd).st_size
    written = os.write(fd, data)
    if written == len(data):
        return
    error = OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")
    try:
        os.ftruncate(fd, start)
    except OSError:
        error.torn = True  # type: ignore[attr-defined]
    raise error


def _compress_reporting(staged: Path) -> None:
    """Compress on a background thread; on failure the staged file stays for `compress_pending`."""
    try:
        compress(staged)
    except OSError as error:
        sys.stderr.write(f"choir: could not compress log archive {staged}: {error}\n")
