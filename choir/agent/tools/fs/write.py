"""`choir.fs.write`: overwrite, append, or patch a file by line numbers, atomically (§8.7).

Every op rewrites the whole file into a temp file in the same directory and renames it over the
target, so a reader (or a crash of the agent) sees the old file or the new one, never half of it.
The target's permission bits (and, where allowed, owner) are kept. Symlinks inside the workspace
are written through: the file they point at changes, the link stays.

Nothing is fsynced: /workspace is non-authoritative (§15.4 WS-1, "may be wiped at any time")
and the session's own log is replicated asynchronously (§7.4, "trades durability for latency"),
so a write's two fsyncs (~0.3 ms together on a quiet disk, more on a busy one) bought a
durability against a host crash that nothing else in the session has. A crash of the agent or
its container keeps the page cache; ext4's default (auto_da_alloc) also writes a renamed-over
file's data before the rename.

A small write (content of at most `INLINE_MAX_BYTES` characters, an old file of at most as many
bytes) runs on the event loop, as a small read does (`fs/read`): without the fsyncs it takes a
fraction of a millisecond, less than the executor hand-off it replaced.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from typing import Final, Literal

from pydantic import Field

from choir.agent.kernel.tool_contract import BuiltinTool, LockKey, path_resource
from choir.agent.kernel.workspace import Workspace, normalize
from choir.agent.tools import _caps
from choir.agent.tools._text import count_lines, splice, split_lines
from choir.agent.tools.execution import Stop, ToolFailure, run_blocking, run_inline
from choir.failpoints import armed, failpoint_sync
from choir.protocol.base import WireModel
from choir.protocol.tooling.tools import ToolResult

NAME = "choir.fs.write"
_WRITE_BLOCK = 1024 * 1024
"""Bytes written between two checks for a cancellation."""
Op = Literal["overwrite", "append", "replace_range", "insert_at"]
INLINE_MAX_BYTES: Final = _caps.READ_MAX_BYTES
"""The largest content, and old file, written on the event loop; a larger write takes a thread,
where a cancellation stops it between blocks."""
IN_THREAD: Final = "fs.write.in_thread"
BEFORE_RENAME: Final = "fs.write.before_rename"
THREADED_WHILE_ARMED: Final = frozenset({IN_THREAD, BEFORE_RENAME})
"""While one of these failpoints is armed every write takes a thread: tests sleep in them to
stand for slow work, which must not stop the event loop."""


class _NotSmall(Exception):
    """An inline write found an old file above `INLINE_MAX_BYTES`, before reading it."""


class FsWriteInput(WireModel):
    path: str
    """File path relative to the workspace; missing parent directories are created."""
    op: Op
    """`overwrite` (or create), `append` (raw bytes at the end), `replace_range`, `insert_at`."""
    content: str
    """New text: the whole file, the appended text, or the lines to put in."""
    start_line: int | None = Field(default=None, ge=1)
    """`replace_range`: first line replaced, 1-based."""
    end_line: int | None = Field(default=None, ge=1)
    """`replace_range`: last line replaced, inclusive (empty content deletes the lines)."""
    line: int | None = Field(default=None, ge=1)
    """`insert_at`: content goes before this line; line count + 1 appends after the last line."""


def lock_keys(args: FsWriteInput) -> list[LockKey]:
    return [(path_resource(args.path), "X")]


async def run(ws: Workspace, args: FsWriteInput) -> ToolResult:
    if len(args.content) <= INLINE_MAX_BYTES and not THREADED_WHILE_ARMED & armed().keys():
        try:
            return run_inline(args.path, lambda stop: _write(ws, args, stop, INLINE_MAX_BYTES))
        except _NotSmall:  # raised before anything was written
            pass
    return await run_blocking(args.path, lambda stop: _write(ws, args, stop))


def edit(old: str | None, args: FsWriteInput) -> str:
    """The new file text for `args` applied to `old` (None: the file does not exist yet)."""
    if args.op == "overwrite":
        return args.content
    if args.op == "append":
        return (old or "") + args.content
    if old is None:
        raise _missing(args)
    lines = split_lines(old)
    if args.op == "insert_at":
        if args.line is None:
            raise ToolFailure("invalid_input", "op 'insert_at' needs line")
        if args.line > len(lines) + 1:
            raise _beyond_eof(args, f"line {args.line}", len(lines))
        return "".join(splice(lines, args.line - 1, args.line - 1, args.content))
    if args.start_line is None or args.end_line is None:
        raise ToolFailure("invalid_input", "op 'replace_range' needs start_line and end_line")
    if args.end_line < args.start_line:
        raise ToolFailure("invalid_input", "end_line must not be before start_line")
    if args.end_line > len(lines):
        raise _beyond_eof(args, f"end_line {args.end_line}", len(lines))
    return "".join(splice(lines, args.start_line - 1, args.end_line, args.content))


def _missing(args: FsWriteInput) -> ToolFailure:
    return ToolFailure("not_found", f"no such file: {args.path}; create it with op 'overwrite'")


def _beyond_eof(args: FsWriteInput, what: str, total: int) -> ToolFailure:
    return ToolFailure("range_beyond_eof", f"{what} is past the end of {args.path} ({total} lines)")


def _write(
    ws: Workspace, args: FsWriteInput, stop: Stop, old_max: int = _caps.EDIT_MAX_BYTES
) -> ToolResult:
    creates = args.op in ("overwrite", "append")
    try:
        dir_fd, name = ws.open_parent(args.path, create=creates)
    except FileNotFoundError:
        if creates:
            raise
        raise _missing(args) from None
    try:
        old, st = _load(dir_fd, name, args, old_max)
        new = edit(None if old is None else _decode(old, args), args).encode()
        _replace(dir_fd, name, new, st, stop)
    finally:
        os.close(dir_fd)
    path = normalize(args.path)
    before = None if old is None else count_lines(old)
    after = count_lines(new)
    verb = "created" if old is None else f"{args.op} applied to"
    summary = f"{verb} {path}: {after} lines, {len(new)} bytes"
    counts = {"lines_before": before, "lines_after": after, "bytes_written": len(new)}
    return ToolResult.ok(summary, path=path, op=args.op, created=old is None, **counts)


def _load(
    dir_fd: int, name: str, args: FsWriteInput, old_max: int
) -> tuple[bytes | None, os.stat_result | None]:
    """The current bytes and stat of the target, or (None, None) when it does not exist;
    `_NotSmall` before reading one larger than `old_max` (below the edit cap: an inline write)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None, None
    with open(fd, "rb") as file:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(st.st_mode):
            raise ToolFailure("not_a_file", f"{args.path} is not a regular file")
        if st.st_size > _caps.EDIT_MAX_BYTES:
            raise ToolFailure("file_too_large", f"{args.path} is too large to edit; use choir.exec")
        if st.st_size > old_max:
            raise _NotSmall
        return file.read(), st


def _decode(old: bytes, args: FsWriteInput) -> str:
    """The old text; `overwrite` never looks at it, so it may replace a binary file."""
    if args.op == "overwrite":
        return ""
    try:
        return old.decode()
    except UnicodeDecodeError:
        raise ToolFailure(
            "binary_file", f"{args.path} is not UTF-8 text; only op 'overwrite' applies"
        ) from None


def _replace(dir_fd: int, name: str, data: bytes, st: os.stat_result | None, stop: Stop) -> None:
    """Write `data` to a temp file in `dir_fd` and rename it over `name`, keeping mode and owner.

    A cancelled call stops at the next block, or at the latest before the rename (its point of
    no return, `Stop.commit`): the target is then untouched and the temp file removed.
    """
    tmp = f".choir-write-{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o666 if st is None else 0o600, dir_fd=dir_fd)
    try:
        with open(fd, "wb") as file:
            for start in range(0, len(data), _WRITE_BLOCK):
                stop.check()
                file.write(data[start : start + _WRITE_BLOCK])
            if st is not None:
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, st.st_uid, st.st_gid)
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
        failpoint_sync(IN_THREAD)
        stop.commit()
        failpoint_sync(BEFORE_RENAME)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def idempotent_when(args: FsWriteInput) -> bool:
    """An overwrite puts the same bytes again when run twice; the other ops add to what is
    there (an append twice is two lines)."""
    return args.op == "overwrite"


TOOL = BuiltinTool(NAME, FsWriteInput, run, lock_keys, idempotent_when)
