"""How a built-in tool's work runs: sandboxed subprocesses, stoppable threads, failures as results.

The contract a tool implements (`BuiltinTool`, its lock keys, `stop_outcome`) is the kernel's
(`choir.agent.kernel.tool_contract`). The arbiter validates the raw arguments against the
manifest's JSON schema, builds the tool's input model, takes the locks `lock_keys` names (§9.5),
then awaits `run`. Failures the model can act on (bad path, missing file, bad line range) come
back as `ToolResult`s with a stable `error_code`, never as exceptions; cancellation still
propagates.

Cancellation (a cancelled lane, a timeout) propagates out of a tool only once its work has
stopped, because the arbiter releases the call's locks when it does (§9.4): a blocking body in a
thread is asked to stop (`Stop`) and waited for (`outlast_cancellation`); a subprocess group is
stopped before the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Final

from choir.agent.kernel.tool_contract import record_finished
from choir.agent.kernel.workspace import PathOutsideWorkspace
from choir.agent.tools._disk import disk_failure
from choir.logs import get_logger
from choir.protocol.tooling.tools import ToolResult

log = get_logger("choir.agent.tools")

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH of every subprocess a tool starts."""
STILL_RUNNING_NOTICE_S: Final = 5.0
"""After this long, work that outlives its cancellation is logged (its locks stay held)."""


class ToolFailure(Exception):
    """A failure the model can act on, raised inside a tool body and returned as a result."""

    def __init__(self, error_code: str, summary: str) -> None:
        super().__init__(summary)
        self.error_code = error_code
        self.summary = summary


def sandbox_env(home: str) -> dict[str, str]:
    """The whole environment of a tool subprocess: nothing of choir-agent's (secrets) leaks.

    Tools get the workspace as HOME, so git is pointed at the agent's own git config (the
    leased identity's name, email and credential helper, §14.4; it holds no token) when the
    runtime wrote one (`CHOIR_GITCONFIG`, set by choir.agent.git_identity), and at the agent's
    ssh-agent and pinned ssh set-up when the identity has an SSH key (`SSH_AUTH_SOCK`,
    `GIT_SSH_COMMAND`: paths, set by choir.agent.git_ssh).
    """
    env = {"PATH": SANDBOX_PATH, "HOME": home, "LANG": "C.UTF-8"}
    for source, target in TOOL_ENV_FROM_AGENT.items():
        if value := os.environ.get(source):
            env[target] = value
    return env


TOOL_ENV_FROM_AGENT: Final = {
    "CHOIR_GITCONFIG": "GIT_CONFIG_GLOBAL",
    "CHOIR_SSH_AUTH_SOCK": "SSH_AUTH_SOCK",
    "CHOIR_GIT_SSH_COMMAND": "GIT_SSH_COMMAND",
    "CHOIR_AGENT_REPO": "CHOIR_AGENT_REPO",  # what choir.propose.repo_change's clone reads
    "CHOIR_AGENT_REF": "CHOIR_AGENT_REF",
}
"""choir-agent's variables (paths it set, never secrets) a tool subprocess gets, renamed."""


def fs_failure(exc: PathOutsideWorkspace | OSError, path: str) -> ToolResult:
    """A filesystem error as a result that names the path as given, never a host path."""
    if isinstance(exc, PathOutsideWorkspace):
        return ToolResult.fail(exc.error_code, exc.message)
    if isinstance(exc, FileNotFoundError):
        return ToolResult.fail("not_found", f"no such file or directory: {path}")
    if isinstance(exc, IsADirectoryError):
        return ToolResult.fail("is_a_directory", f"{path} is a directory, not a file")
    if isinstance(exc, NotADirectoryError):
        return ToolResult.fail("not_a_directory", f"a component of {path} is not a directory")
    if isinstance(exc, PermissionError):
        return ToolResult.fail("permission_denied", f"permission denied: {path}")
    if (on_disk := disk_failure(exc, path)) is not None:
        return on_disk
    return ToolResult.fail("io_error", f"{path}: {exc.strerror or type(exc).__name__}")


class Stopped(Exception):
    """Raised inside a blocking body that saw its `Stop` set: the call was cancelled."""


class Stop:
    """Set by the event loop when a blocking body's call is cancelled or times out.

    A thread cannot be interrupted, so bodies `check` it between blocks of work, and pass their
    point of no return (the rename that makes a write visible) through `commit`: stopped before
    it, they leave the workspace as it was; past it, `set` says so and the work finishes.
    """

    __slots__ = ("_committed", "_lock", "_stopped")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False
        self._committed = False

    def set(self) -> bool:
        """Ask the body to stop; False when it is past its point of no return already."""
        with self._lock:
            self._stopped = not self._committed
            return self._stopped

    def check(self) -> None:
        """Raise `Stopped` once the call was cancelled."""
        if self._stopped:
            raise Stopped

    def commit(self) -> None:
        """The body's point of no return: `Stopped` if asked to stop, else nothing stops it."""
        with self._lock:
            self.check()
            self._committed = True


async def run_blocking(path: str, body: Callable[[Stop], ToolResult]) -> ToolResult:
    """Run a blocking filesystem body in a thread, turning expected failures into results.

    When the call is cancelled (or times out) the body is told to stop, and the cancellation
    propagates only once the thread has returned: the call's locks stay held until then, so
    nothing else touches the file while the body still might. A body that was past its point
    of no return finishes; its result goes to `stop_outcome`, since it is what happened.
    """
    stop = Stop()
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    work = loop.run_in_executor(None, functools.partial(context.run, body, stop))
    try:
        await asyncio.wait((work,))  # a cancellation lands here; it never cancels `work`
    except asyncio.CancelledError:
        too_late = not stop.set()
        try:
            await outlast_cancellation(work, path)
        finally:
            if too_late and work.done() and not work.cancelled():
                record_finished(_result_of(work, path))
        raise
    return _result_of(work, path)


def run_inline(path: str, body: Callable[[Stop], ToolResult]) -> ToolResult:
    """Run a short blocking body on the event loop, failures turned into results as
    `run_blocking` turns them.

    Only for work bounded by a small size (a small file's read): handing it to a thread cost
    more than the work (an executor hand-off and two wake-ups), and nothing can cancel it midway,
    so its `Stop` is never set.
    """
    try:
        return body(Stop())
    except (ToolFailure, PathOutsideWorkspace, OSError) as exc:
        return failure_result(exc, path)


def failure_result(exc: ToolFailure | PathOutsideWorkspace | OSError, path: str) -> ToolResult:
    """A failure the model can act on, as its result."""
    if isinstance(exc, ToolFailure):
        return ToolResult.fail(exc.error_code, exc.summary)
    return fs_failure(exc, path)


def _result_of(work: asyncio.Future[ToolResult], path: str) -> ToolResult:
    """The result of a finished body; failures the model can act on become results."""
    try:
        return work.result()
    except (ToolFailure, PathOutsideWorkspace, OSError) as exc:
        return failure_result(exc, path)


async def outlast_cancellation(work: Awaitable[Any], what: str) -> None:
    """Wait until `work` is done, however often this task is cancelled meanwhile.

    For work that cannot be interrupted (a thread, a process group being stopped). A
    cancellation that arrived while waiting is raised once the work is done; the work's own
    outcome is dropped (its caller is unwinding). Work still running after
    `STILL_RUNNING_NOTICE_S` is logged once — its locks are still held, on purpose.
    """
    future = asyncio.ensure_future(work)
    cancelled, noticed = False, False
    while not future.done():
        try:
            await asyncio.wait((future,), timeout=None if noticed else STILL_RUNNING_NOTICE_S)
        except asyncio.CancelledError:
            cancelled = True
            continue
        if not future.done() and not noticed:
            noticed = True
            log.warning(
                "cancelled tool work is still running; its locks stay held until it stops",
                fields={"what": what},
            )
    if not future.cancelled():
        future.exception()  # retrieved: what propagates is the caller's own outcome
    if cancelled:
        raise asyncio.CancelledError
