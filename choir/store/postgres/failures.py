"""What a database failure means to the operator: the server is away, or its disk is failing.

choird answers these differently from a bug: the caller is told the service is unavailable
(exit 6, "retry later"), nothing is acknowledged, and the operator sees the cause in `status` —
a full disk named as a full disk, not as a crashed agent (issue 12 points 4 and 6).
"""

from __future__ import annotations

import errno
from typing import Final, Literal

import asyncpg

StoreFailure = Literal["down", "disk_full", "io_error"]

_DISK_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})
_IO_ERRNOS: Final = frozenset({errno.EIO, errno.EROFS})

_DOWN: Final = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.OperatorInterventionError,
    # A server that dies under load can leave a connection half-way through the error it sent
    # as it went: asyncpg then reports its own state ("cannot switch to state 15; another
    # operation (2) is in progress") instead of the lost connection, and the pool drops the
    # connection when it is released (tests/faults/test_postmaster_kill_errors.py).
    asyncpg.exceptions.InternalClientError,
)
"""Cannot connect, the connection broke, or the server is shutting down, crashed or starting."""


def classify(exc: BaseException) -> StoreFailure | None:
    """The kind of unavailability `exc` is, or None for anything else (a bug, a bad query)."""
    if isinstance(exc, asyncpg.exceptions.DiskFullError):
        return "disk_full"
    if isinstance(exc, asyncpg.exceptions.PostgresIOError | asyncpg.exceptions.DataCorruptedError):
        return "io_error"
    if isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS:
        return "disk_full"
    if isinstance(exc, OSError) and exc.errno in _IO_ERRNOS:
        return "io_error"
    if isinstance(exc, _DOWN):
        return "down"
    return None


def disk_failure(exc: BaseException) -> StoreFailure | None:
    """`disk_full` or `io_error` when `exc` is a storage fault (database or file), else None."""
    kind = classify(exc)
    return kind if kind in ("disk_full", "io_error") else None
