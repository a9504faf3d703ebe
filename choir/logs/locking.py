"""The lock a live log's writers share with choird archiving it in place (`choir.logs.live`).

`flock` locks belong to an open file description: each writer's descriptor and the archiver's
own are distinct ones, so a writer's `shared` and the archiver's `exclusive` exclude each other
across processes (the agent writing through its stderr, choird copying it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator


@contextlib.contextmanager
def exclusive(fd: int) -> Iterator[None]:
    """Hold `flock(LOCK_EX)` on `fd`: every writer's `shared` waits meanwhile."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def shared(fd: int, lock: bool) -> Iterator[None]:
    """Hold `flock(LOCK_SH)` on `fd` when `lock` (a writer's side of `exclusive`)."""
    if not lock:
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def lockable(fd: int) -> bool:
    """Whether `fd` is a regular file (a pipe or a terminal is never archived in place)."""
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


__all__ = ["exclusive", "lockable", "shared"]
