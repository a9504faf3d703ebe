"""The file handler of a log source: 0600 file, one line per record, archived past a line count.

`logs/<source>.log` is archived when it holds `threshold` lines and one more record arrives
(§22.2, `log_archive_threshold_lines`), so the active file never holds more than `threshold`
lines. The rollover itself is a rename and a reopen under the handler's lock; the gzip work runs
on a background thread so a large archive never stalls choird's event loop.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from contextlib import nullcontext
from io import TextIOWrapper
from pathlib import Path

from choir.logs.archive import compress, compress_pending, stage


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
        compress_pending(archive_dir)
        super().__init__(path, mode="a", encoding="utf-8")

    def _open(self) -> TextIOWrapper:
        """Open for append with mode 0600, counting the lines already there."""
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        stream = os.fdopen(fd, "a", encoding="utf-8")
        self.lines, cut_off = count_lines(Path(self.baseFilename))
        if cut_off:
            stream.write("\n")  # a crash cut the last line: keep the next one parseable
        return stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.threshold and self.lines >= self.threshold:
                self.roll_over()
        except Exception:
            self.handleError(record)
        super().emit(record)
        self.lines += 1

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


def _compress_reporting(staged: Path) -> None:
    """Compress on a background thread; on failure the staged file stays for `compress_pending`."""
    try:
        compress(staged)
    except OSError as error:
        sys.stderr.write(f"choir: could not compress log archive {staged}: {error}\n")
