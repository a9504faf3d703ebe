"""Running an external tool (§8.8): an executable baked into the image, spoken to in JSON.

The contract for a tool author:
- stdin carries one JSON object, `{"arguments": {...}, "secrets": {name: value}}`, then EOF.
  Secrets travel this way only — never in the environment or argv, where `/proc/<pid>/environ`
  and `/proc/<pid>/cmdline` would show them to anything in the container (§14.1).
- stdout must carry one JSON object, the tool's result (`ToolResult`: `status`, `summary`,
  optional `data`, `error_code`, `truncated`, `artifact_ref`). stderr is for diagnostics; its
  tail is returned when the tool fails.
- The tool runs in the workspace root with only PATH, HOME and LANG set, under its own
  `choir.subreaper` (as `choir.exec` commands do): whatever it starts stays its descendant, even
  what leaves its process group (`setsid`, a double fork). When the call ends — exit, timeout,
  output overflow or cancellation — all of it is stopped (SIGTERM, then SIGKILL after a short
  grace), so nothing it started outlives the call; a cancellation propagates only after that,
  so the call's locks outlast the tool.
- stdin is a Unix socket, not a pipe, so no other process of the agent's uid can open it through
  `/proc/<pid>/fd/0` and take the secrets before the tool reads them. What the tool holds in its
  memory afterwards is another matter: see docs/ARCHITECTURE.md (external tools and secrets).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import orjson
from pydantic import ValidationError

from choir.agent.kernel.tool_contract import record_finished
from choir.agent.tools._process import Capture, stop_tree, under_subreaper
from choir.agent.tools.execution import outlast_cancellation, sandbox_env
from choir.protocol.problems import validation_problems
from choir.protocol.tooling.tools import ToolResult

__all__ = ["MAX_OUTPUT_BYTES", "run_external"]

MAX_OUTPUT_BYTES: Final = 1024 * 1024
"""Default cap on a tool's stdout; past it the tool is stopped and the call fails."""
STDERR_TAIL_BYTES: Final = 4096
"""How much of the end of stderr a failed call reports."""
OUTPUT_HEAD_BYTES: Final = 512
"""How much of unusable stdout a failed call quotes."""
NOT_RUNNABLE: Final = 127
SPAWN_FAILED: Final = "subreaper: cannot run "
"""How `choir.subreaper` says it could not start the tool (exit 127): a bad interpreter line,
a missing loader."""
_WRITE_SIZE: Final = 64 * 1024

Ending = Literal["exited", "timeout", "overflow"]


class _Output:
    """stdout kept up to a cap; `overflow` is set once the tool wrote more."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.total = 0
        self.overflow = asyncio.Event()

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk[: max(0, self.limit - len(self.data))]
        if self.total > self.limit:
            self.overflow.set()


class _Tail:
    """The last `limit` bytes of a stream."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self.limit = limit
        self.data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.data += chunk
        del self.data[: max(0, len(self.data) - self.limit)]

    def text(self) -> str:
        return self.data.decode(errors="replace")


class _Feed:
    """The child's stdin, written from the event loop as the child reads it.

    A Unix socket pair, not a pipe: any process of the agent's uid may open another process's
    pipe through `/proc/<pid>/fd/0` and read the payload — secrets included — before the tool
    does (a `choir.exec` command running beside it, say); a socket cannot be opened that way.
    Non-blocking: a tool that never reads its input cannot stall choir-agent, and one that exits
    early (broken pipe) just ends the feed.
    """

    def __init__(self, payload: bytes) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._write_fd, self.read_fd = ours.detach(), theirs.detach()
        os.set_blocking(self._write_fd, False)
        self._rest = memoryview(payload)
        self._loop = asyncio.get_running_loop()

    def __enter__(self) -> _Feed:
        return self

    def __exit__(self, *_: object) -> None:
        self._close_read_end()
        self._finish()

    def spawned(self) -> None:
        """Hand the read end over to the child and start writing."""
        self._close_read_end()
        self._loop.add_writer(self._write_fd, self._on_writable)

    def _on_writable(self) -> None:
        try:
            written = os.write(self._write_fd, self._rest[:_WRITE_SIZE])
        except BlockingIOError:
            return
        except OSError:
            self._finish()
            return
        self._rest = self._rest[written:]
        if not self._rest:
            self._finish()

    def _close_read_end(self) -> None:
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1

    def _finish(self) -> None:
        if self._write_fd >= 0:
            self._loop.remove_writer(self._write_fd)
            os.close(self._write_fd)
            self._write_fd = -1
        self._rest = memoryview(b"")


async def run_external(
    exec_path: Path,
    arguments: dict[str, Any],
    *,
    secrets: Mapping[str, str],
    workspace_root: Path,
    timeout_ms: int,
    max_output_bytes: int = MAX_OUTPUT_BYTES,
) -> ToolResult:
    """Run one call of the external tool at `exec_path` and return its result.

    Failures of the tool come back as results (`timeout`, `nonzero_exit`, `invalid_tool_output`,
    `output_too_large`, `tool_not_runnable`); cancellation stops the tool and propagates.
    """
    refused = _unrunnable(exec_path)
    if refused is not None:
        return _not_runnable(exec_path.name, refused)
    payload = orjson.dumps({"arguments": arguments, "secrets": dict(secrets)})
    out, err = _Output(max_output_bytes), _Tail()
    with _Feed(payload) as feed, Capture(out.feed) as out_pipe, Capture(err.feed) as err_pipe:
        try:
            proc = await asyncio.create_subprocess_exec(
                *under_subreaper([str(exec_path)]),
                cwd=workspace_root,
                env=sandbox_env(str(workspace_root)),
                start_new_session=True,
                stdin=feed.read_fd,
                stdout=out_pipe.write_fd,
                stderr=err_pipe.write_fd,
            )
        except OSError as exc:
            return _not_runnable(exec_path.name, exc.strerror or type(exc).__name__)
        feed.spawned()
        out_pipe.spawned()
        err_pipe.spawned()
        try:
            ending = await _wait(proc, out.overflow, timeout_ms / 1000)
        except asyncio.CancelledError:
            # even when cancelled twice: the call's locks are released after the group is gone
            await outlast_cancellation(_end(proc), exec_path.name)
            raise
        try:
            await outlast_cancellation(_end(proc, out_pipe, err_pipe), exec_path.name)
        except asyncio.CancelledError:  # the tool had ended: what it did is the call's outcome
            record_finished(_result(exec_path.name, ending, proc.returncode, out, err, timeout_ms))
            raise
    return _result(exec_path.name, ending, proc.returncode, out, err, timeout_ms)


async def _end(proc: asyncio.subprocess.Process, *pipes: Capture) -> None:
    """End the tool and everything it started (its subreaper sees to what left its group),
    then read `pipes` to their end."""
    await stop_tree(proc)
    await asyncio.gather(*(pipe.drained() for pipe in pipes))


async def _wait(
    proc: asyncio.subprocess.Process, overflow: asyncio.Event, timeout_s: float
) -> Ending:
    """Wait until the tool exits, overflows its output cap, or runs out of time."""
    exited = asyncio.ensure_future(proc.wait())
    overflowed = asyncio.ensure_future(overflow.wait())
    try:
        done, _ = await asyncio.wait(
            {exited, overflowed}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        exited.cancel()
        overflowed.cancel()
    if overflowed in done:
        return "overflow"
    return "exited" if exited in done else "timeout"


def _result(
    tool: str, ending: Ending, code: int | None, out: _Output, err: _Tail, timeout_ms: int
) -> ToolResult:
    if ending == "timeout":
        summary = f"{tool} timed out after {timeout_ms} ms; it and its children were killed"
        data = {"timeout_ms": timeout_ms, "stderr": err.text()}
        return ToolResult(status="timeout", summary=summary, error_code="timeout", data=data)
    if ending == "overflow":
        summary = f"{tool} wrote more than {out.limit} bytes to stdout and was stopped"
        data = {"limit_bytes": out.limit, "output_head": _head(out.data)}
        return ToolResult(
            status="error",
            summary=summary,
            error_code="output_too_large",
            data=data,
            truncated=True,
        )
    if code == NOT_RUNNABLE and err.text().startswith(SPAWN_FAILED):
        return _not_runnable(tool, err.text().split(": ", 2)[-1].strip())
    if code != 0:
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited {code}"
        return ToolResult.fail("nonzero_exit", f"{tool} {how}", exit_code=code, stderr=err.text())
    return _parse_output(tool, bytes(out.data), err)


def _unrunnable(exec_path: Path) -> str | None:
    """Why `exec_path` cannot be run (a stat, before a subreaper is started for it), or None."""
    if not exec_path.exists():
        return os.strerror(errno.ENOENT)
    if not exec_path.is_file() or not os.access(exec_path, os.X_OK):
        return os.strerror(errno.EACCES)
    return None


def _not_runnable(tool: str, reason: str) -> ToolResult:
    return ToolResult.fail("tool_not_runnable", f"{tool} cannot start: {reason}")


def _parse_output(tool: str, stdout: bytes, err: _Tail) -> ToolResult:
    """The tool's result object, or an `invalid_tool_output` error quoting what it wrote."""
    try:
        return ToolResult.model_validate(orjson.loads(stdout))
    except orjson.JSONDecodeError:
        problems = ["stdout is not a JSON object"]
    except ValidationError as exc:
        problems = validation_problems(exc)
    return ToolResult.fail(
        "invalid_tool_output",
        f"{tool} did not print a valid result object: {problems[0]}",
        problems=problems,
        output_head=_head(stdout),
        stderr=err.text(),
    )


def _head(data: bytes | bytearray) -> str:
    return bytes(data[:OUTPUT_HEAD_BYTES]).decode(errors="replace")
