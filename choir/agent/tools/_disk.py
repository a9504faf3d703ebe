"""What a tool tells the model when the workspace's disk, not the model's request, is the problem.

A write refused for lack of space (ENOSPC, EDQUOT) or by a read-only file system (EROFS) is
nothing the model did wrong, and retrying at once will fail the same way: its result says what
happened and what can be done (free space; wait for the operator), with a stable `error_code`
(`disk_full`, `read_only`). A `choir.exec` command that failed while the workspace's file system
is full or read-only gets the same words in its summary, since whatever it printed may not.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Final

from choir.protocol.tooling.tools import ToolResult

NEARLY_FULL_BYTES: Final = 64 * 1024
"""Less room than this left for an unprivileged writer counts as a full workspace."""

_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})

DISK_FULL_HINT: Final = (
    "free space there (delete files the task no longer needs) and retry, or tell the user "
    "the disk is full"
)
READ_ONLY_HINT: Final = (
    "nothing can be written until the operator makes it writable again; tell the user"
)


def disk_failure(exc: OSError, path: str) -> ToolResult | None:
    """The result for a write to `path` that failed because of the disk, or None."""
    if exc.errno in _FULL_ERRNOS:
        return ToolResult.fail(
            "disk_full",
            f"{path} was not written: no space left on the workspace's disk; {DISK_FULL_HINT}",
        )
    if exc.errno == errno.EROFS:
        return ToolResult.fail(
            "read_only",
            f"{path} was not written: the workspace's file system is read-only; {READ_ONLY_HINT}",
        )
    return None


def disk_note(root: Path) -> str | None:
    """A sentence on the workspace's disk if it is read-only or (nearly) full, else None."""
    try:
        stats = os.statvfs(root)
    except OSError:
        return None
    if stats.f_flag & os.ST_RDONLY:
        return f"the workspace's file system is read-only: {READ_ONLY_HINT}"
    free = stats.f_bavail * stats.f_frsize
    if free < NEARLY_FULL_BYTES:
        return f"the workspace's disk is full ({free} bytes left): {DISK_FULL_HINT}"
    return None
