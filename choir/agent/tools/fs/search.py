"""`choir.fs.search`: ripgrep over a workspace file or directory, as structured matches (§8.7).

The target is opened confined (`Workspace.open_file`) before rg runs, and rg reaches it only
through that fd (`/proc/self/fd/N`, handed over with `pass_fds`), so a path swapped for a symlink
after the check cannot redirect the search. `--no-follow` keeps rg from following symlinks found
while walking; rg's usual filters (.gitignore, hidden and binary files) apply.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from collections.abc import Coroutine
from typing import Any

from pydantic import Field

from choir.agent.kernel.tool_contract import BuiltinTool, LockKey, path_resource
from choir.agent.kernel.workspace import PathOutsideWorkspace, Workspace, normalize
from choir.agent.tools import _caps
from choir.agent.tools._process import Capture, stop_group
from choir.agent.tools.execution import SANDBOX_PATH, fs_failure, outlast_cancellation, sandbox_env
from choir.agent.tools.rg_json import Match, RgStream
from choir.protocol.base import WireModel
from choir.protocol.tooling.tools import ToolResult

NAME = "choir.fs.search"


class FsSearchInput(WireModel):
    pattern: str
    """Regular expression (Rust regex syntax, as rg)."""
    path: str = "."
    """File or directory to search, relative to the workspace."""
    glob: str | None = None
    """Only files matching this glob (rg --glob), e.g. `*.py`; `!` in front excludes."""
    max_results: int = Field(default=100, ge=1, le=_caps.SEARCH_MAX_RESULTS)
    """Most matches returned; more sets `truncated`."""
    case_sensitive: bool = True


def lock_keys(args: FsSearchInput) -> list[LockKey]:
    return [(path_resource(args.path), "S")]


async def run(ws: Workspace, args: FsSearchInput) -> ToolResult:
    rg = shutil.which("rg", path=SANDBOX_PATH)
    if rg is None:
        return ToolResult.fail("unavailable", "ripgrep (rg) is not installed in this image")
    try:
        fd = ws.open_file(args.path, os.O_PATH)
    except (PathOutsideWorkspace, OSError) as exc:
        return fs_failure(exc, args.path)
    try:
        return await _search(ws, rg, fd, args)
    finally:
        os.close(fd)


def rg_argv(rg: str, args: FsSearchInput, target: str) -> list[str]:
    argv = [rg, "--json", "--no-config", "--no-follow", "-s" if args.case_sensitive else "-i"]
    if args.glob:
        argv += ["--glob", args.glob]
    return [*argv, "--regexp", args.pattern, "--", target]


async def _search(ws: Workspace, rg: str, fd: int, args: FsSearchInput) -> ToolResult:
    base = normalize(args.path)
    is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    magic = f"/proc/self/fd/{fd}"
    stream = RgStream(limit=args.max_results)
    err = _caps.HeadTail(4096)
    full = asyncio.Event()

    def take(chunk: bytes) -> None:
        stream.feed(chunk)
        if stream.truncated:
            full.set()

    with Capture(take) as out, Capture(err.feed) as errors:
        proc = await asyncio.create_subprocess_exec(
            *rg_argv(rg, args, "." if is_dir else magic),
            cwd=magic if is_dir else ws.root,
            env=sandbox_env(str(ws.root)),
            pass_fds=(fd,),
            start_new_session=True,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out.write_fd,
            stderr=errors.write_fd,
        )
        out.spawned()
        errors.spawned()
        try:
            await _first(out.eof(), full.wait())
        finally:
            # even when cancelled (twice): the call's locks are released after this returns
            await outlast_cancellation(_end(proc), base)
        await errors.drained()
    matches = [_relocate(m, base, magic) for m in stream.matches]
    if proc.returncode == 2 and not matches:
        said = " ".join(line.strip() for line in err.text().splitlines() if line.strip())
        said = said.replace(magic, base)
        return ToolResult.fail("search_failed", f"rg: {_caps.cut(said or 'failed', 300)[0]}")
    return _result(args, base, matches, stream.truncated)


async def _end(proc: asyncio.subprocess.Process) -> None:
    """Stop rg's process group and reap it."""
    await stop_group(proc.pid)
    await proc.wait()


async def _first(*aws: Coroutine[Any, Any, object]) -> None:
    """Wait until one of `aws` finishes; cancel the rest."""
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _relocate(match: Match, base: str, magic: str) -> Match:
    """A match path relative to the workspace (rg reports it relative to the fd it was given)."""
    if match.path == magic:
        return match._replace(path=base)
    rel = match.path.removeprefix("./")
    return match._replace(path=rel if base == "." else f"{base}/{rel}")


def _result(args: FsSearchInput, base: str, matches: list[Match], truncated: bool) -> ToolResult:
    files = len({m.path for m in matches})
    rows = [m._asdict() for m in matches]
    if not matches:
        summary = f"no matches for {args.pattern!r} in {base}"
    else:
        summary = f"{len(matches)} matches in {files} files" + (" (capped)" if truncated else "")
    data = {"path": base, "matches": rows, "match_count": len(matches), "file_count": files}
    return ToolResult(status="success", summary=summary, data=data, truncated=truncated)


TOOL = BuiltinTool(NAME, FsSearchInput, run, lock_keys)
