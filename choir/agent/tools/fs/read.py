"""`choir.fs.read`: read a text file whole, its head or tail, or a line range, in chunks (§8.7).

A call returns at most `READ_MAX_LINES` lines and `READ_MAX_BYTES` of text; when more was asked
for, the result is `truncated` and `data.next_start_line` is where a `range` read continues.
"""

from __future__ import annotations

import io
import itertools
import os
import stat
from typing import BinaryIO, Final, Literal

from pydantic import Field

from choir.agent.kernel.tool_contract import BuiltinTool, LockKey, path_resource
from choir.agent.kernel.workspace import PathOutsideWorkspace, Workspace, normalize
from choir.agent.tools import _caps
from choir.agent.tools._text import is_binary
from choir.agent.tools.execution import (
    Stop,
    ToolFailure,
    failure_result,
    run_blocking,
    run_inline,
)
from choir.failpoints import armed, failpoint_sync
from choir.protocol.base import WireModel
from choir.protocol.tooling.tools import ToolResult

NAME = "choir.fs.read"
INLINE_MAX_BYTES: Final = _caps.READ_MAX_BYTES
"""A file at most this large is read on the event loop (`run`)."""
IN_THREAD: Final = "fs.read.in_thread"


class FsReadInput(WireModel):
    path: str
    """File path relative to the workspace."""
    mode: Literal["whole", "head", "tail", "range"] = "whole"
    """`whole` file, first/last `lines` lines, or `start_line`..`end_line`."""
    lines: int = Field(default=50, ge=1)
    """How many lines `head` and `tail` return."""
    start_line: int | None = Field(default=None, ge=1)
    """First line of a `range` read, 1-based."""
    end_line: int | None = Field(default=None, ge=1)
    """Last line of a `range` read, inclusive; the end of the file when omitted."""


def lock_keys(args: FsReadInput) -> list[LockKey]:
    return [(path_resource(args.path), "S")]


async def run(ws: Workspace, args: FsReadInput) -> ToolResult:
    """Read a small file on the event loop, a larger one in a thread.

    Opening and checking the file are a few system calls. Reading a file of at most
    `INLINE_MAX_BYTES` (what one call returns at most) takes a fraction of a millisecond, less
    than handing it to a thread did (an executor hand-off, two wake-ups and the GIL passed back
    and forth, on every read a model makes). A larger file goes to a thread, where a
    cancellation stops it between blocks; so does any read while the `fs.read.in_thread`
    failpoint is armed (tests use it to stand for slow work).
    """
    try:
        file, size = _open(ws, args)
    except (ToolFailure, PathOutsideWorkspace, OSError) as exc:
        return failure_result(exc, args.path)
    try:
        if size <= INLINE_MAX_BYTES and IN_THREAD not in armed():
            return run_inline(args.path, lambda stop: _read(file, args, stop))
        return await run_blocking(args.path, lambda stop: _read(file, args, stop))
    finally:
        file.close()  # the body is done with it: run_blocking returns once its thread has


def window(args: FsReadInput, total: int) -> tuple[int, int]:
    """The 1-based inclusive line range a call asks for, given the file's line count."""
    if args.mode == "whole":
        return 1, total
    if args.mode == "head":
        return 1, min(args.lines, total)
    if args.mode == "tail":
        return max(1, total - args.lines + 1), total
    if args.start_line is None:
        raise ToolFailure("invalid_input", "mode 'range' needs start_line (end_line is optional)")
    end = total if args.end_line is None else min(args.end_line, total)
    if args.end_line is not None and args.end_line < args.start_line:
        raise ToolFailure("invalid_input", "end_line must not be before start_line")
    if args.start_line > max(total, 1):
        raise ToolFailure(
            "range_beyond_eof",
            f"start_line {args.start_line} is past the end of {args.path} ({total} lines)",
        )
    return args.start_line, end


def _open(ws: Workspace, args: FsReadInput) -> tuple[BinaryIO, int]:
    """The file `args` names, open for reading, and its size; it must be a regular file."""
    file = open(ws.open_file(args.path, os.O_RDONLY | os.O_NONBLOCK), "rb")  # noqa: SIM115
    try:
        st = os.fstat(file.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(st.st_mode):
            raise ToolFailure("not_a_file", f"{args.path} is not a regular file")
    except BaseException:
        file.close()
        raise
    return file, st.st_size


def _read(file: BinaryIO, args: FsReadInput, stop: Stop) -> ToolResult:
    if is_binary(file.read(_caps.BINARY_SNIFF_BYTES)):
        raise ToolFailure("binary_file", f"{args.path} is a binary file; only text is read")
    failpoint_sync(IN_THREAD)
    total = _count_lines(file, stop)
    start, end = window(args, total)
    return _chunk(file, normalize(args.path), start, end, total)


def _count_lines(file: BinaryIO, stop: Stop) -> int:
    file.seek(0)
    total, last = 0, b"\n"
    while block := file.read(io.DEFAULT_BUFFER_SIZE * 128):
        stop.check()  # a huge file: a cancelled read ends within one block
        total += block.count(b"\n")
        last = block[-1:]
    return total + (0 if last == b"\n" else 1)


def _chunk(file: BinaryIO, path: str, start: int, end: int, total: int) -> ToolResult:
    """Lines `start`..`end` of `file`, stopping early at the caps."""
    file.seek(0)
    out: list[str] = []
    size, cut_lines = 0, []
    for number, raw in enumerate(itertools.islice(file, start - 1, None), start=start):
        if number > end or len(out) >= _caps.READ_MAX_LINES:
            break
        line, was_cut = _caps.cut(raw.decode(errors="replace"), _caps.LINE_MAX_CHARS)
        size += len(line.encode())
        if out and size > _caps.READ_MAX_BYTES:
            break
        out.append(line)
        cut_lines += [number] if was_cut else []
    last = start + len(out) - 1
    data: dict[str, object] = {"path": path, "content": "".join(out), "start_line": start}
    data |= {"end_line": last, "total_lines": total}
    if cut_lines:
        data["cut_lines"] = cut_lines
    truncated = last < end
    if truncated:
        data["next_start_line"] = last + 1
    summary = f"{path}: lines {start}-{last} of {total}" if out else f"{path}: no lines"
    summary += f"; continue with start_line {last + 1}" if truncated else ""
    return ToolResult(status="success", summary=summary, data=data, truncated=truncated)


TOOL = BuiltinTool(NAME, FsReadInput, run, lock_keys)
