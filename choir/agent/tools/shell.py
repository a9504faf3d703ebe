"""`choir.exec`: run a shell command in the workspace (§8.7, always under `workspace:X`, §9.5).

The command runs as `bash -c` (the manifest promises bash; `/bin/sh -c` in an image without it)
in the workspace root with stdin from /dev/null and a minimal environment (never choir-agent's
own, which may hold secrets). It runs under a subreaper in its own session, and when the call
ends (exit, timeout or cancellation) every process it started is stopped — including those that
left its process group with `setsid` or a double fork: a background job that outlived the call
would keep changing the workspace after `workspace:X` was released.
"""

from __future__ import annotations

import asyncio
import shutil
import time

from pydantic import Field

from choir.agent.kernel.tool_contract import BuiltinTool, LockKey
from choir.agent.kernel.workspace import Workspace
from choir.agent.tools._caps import HeadTail
from choir.agent.tools._disk import disk_note
from choir.agent.tools._process import Capture, stop_tree, under_subreaper
from choir.agent.tools.execution import SANDBOX_PATH, sandbox_env
from choir.protocol.base import WireModel
from choir.protocol.tooling.tools import ToolResult

NAME = "choir.exec"
MAX_TIMEOUT_MS = 600_000


class ExecInput(WireModel):
    command: str
    """Shell command, run by `bash -c` in the workspace root."""
    timeout_ms: int = Field(default=120_000, ge=1, le=MAX_TIMEOUT_MS)
    """Wall-clock limit; the command and everything it started are killed when it passes."""


def lock_keys(args: ExecInput) -> list[LockKey]:
    return [("workspace", "X")]


async def run(ws: Workspace, args: ExecInput) -> ToolResult:
    out, err = HeadTail(), HeadTail()
    started = time.monotonic()
    with Capture(out.feed) as out_pipe, Capture(err.feed) as err_pipe:
        shell = shutil.which("bash", path=SANDBOX_PATH) or "/bin/sh"
        proc = await asyncio.create_subprocess_exec(
            *under_subreaper([shell, "-c", args.command]),
            cwd=ws.root,
            env=sandbox_env(str(ws.root)),
            start_new_session=True,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out_pipe.write_fd,
            stderr=err_pipe.write_fd,
        )
        out_pipe.spawned()
        err_pipe.spawned()
        try:
            timed_out = await _wait(proc, args.timeout_ms / 1000)
        finally:
            await stop_tree(proc)
        await asyncio.gather(out_pipe.drained(), err_pipe.drained())
    elapsed_ms = round((time.monotonic() - started) * 1000)
    result = _result(args, proc.returncode, timed_out, out, err, elapsed_ms)
    if result.status == "error" and (note := disk_note(ws.root)) is not None:
        result = result.model_copy(update={"summary": f"{result.summary}; {note}"})
    return result


async def _wait(proc: asyncio.subprocess.Process, timeout_s: float) -> bool:
    """Wait for the shell to exit; True when the timeout passed first."""
    try:
        async with asyncio.timeout(timeout_s):
            await proc.wait()
    except TimeoutError:
        return True
    return False


def _result(
    args: ExecInput, code: int | None, timed_out: bool, out: HeadTail, err: HeadTail, ms: int
) -> ToolResult:
    data = {
        "exit_code": code,
        "stdout": out.text(),
        "stderr": err.text(),
        "stdout_bytes": out.total,
        "stderr_bytes": err.total,
        "duration_ms": ms,
    }
    truncated = out.truncated or err.truncated
    if timed_out:
        summary = f"timed out after {args.timeout_ms} ms; the command and its children were killed"
        return ToolResult(
            status="timeout", summary=summary, error_code="timeout", data=data, truncated=truncated
        )
    if code == 0:
        return ToolResult(status="success", summary="exit 0", data=data, truncated=truncated)
    summary = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"
    return ToolResult(
        status="error", summary=summary, error_code="nonzero_exit", data=data, truncated=truncated
    )


TOOL = BuiltinTool(NAME, ExecInput, run, lock_keys)
