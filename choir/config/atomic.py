"""Replace a file so readers see the old bytes or the new ones, never a torn mix."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write `data` to `path` with permission bits `mode`, atomically and durably.

    The temporary file lives in the same directory (so the rename is atomic) and is created
    0600, then set to `mode` before any data is written: a secret is never briefly readable.
    """
    atomic_write_with(path, lambda handle: handle.write(data), mode)


def atomic_write_with(path: Path, write: Callable[[BinaryIO], object], mode: int) -> None:
    """`atomic_write` of what `write` writes to the open file: large contents (an array)
    stream to disk without a copy of them in memory first."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
