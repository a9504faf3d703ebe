"""Running a tool's subprocess tree: capturing its output and stopping all of it.

Tool subprocesses run in their own session, so their process group holds a plain tree (a shell,
its pipeline, its background jobs). Stopping sends SIGTERM to the group and SIGKILL to whatever
is still there after a short grace, so a process that ignores SIGTERM dies too.

A group does not hold what leaves it (`setsid`, a double fork): such a process would outlive the
call. Commands that may start anything (`choir.exec`) therefore run under `choir.subreaper`
(`under_subreaper`), which keeps every such process its descendant and ends them all when the
command ends; `stop_tree` asks it to, and waits until it has.

Output goes through pipes this module owns (`Capture`) rather than asyncio's: asyncio's
`Process.wait()` also waits for every pipe to close, which a background job holding stdout would
delay forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable

from choir import subreaper

KILL_GRACE_S = 1.0
"""How long a process group gets to exit after SIGTERM before SIGKILL."""
PIPE_GRACE_S = 1.0
"""How long to keep reading output after the group is gone (a daemon may hold the pipe)."""
_POLL_S = 0.02
_READ_SIZE = 64 * 1024


def under_subreaper(argv: list[str], grace: float = KILL_GRACE_S) -> list[str]:
    """`argv` run by `choir.subreaper`: its whole tree ends when it exits, when the subreaper
    gets SIGTERM, or when this process dies."""
    script = subreaper.__file__
    parent = str(os.getpid())
    return [
        sys.executable,
        "-I",
        "-S",
        script,
        "--grace",
        str(grace),
        "--parent",
        parent,
        "--",
        *argv,
    ]


async def stop_tree(proc: asyncio.subprocess.Process, grace: float = KILL_GRACE_S) -> None:
    """End a command started `under_subreaper` and everything it started; return once it has.

    SIGTERM goes to the group (the subreaper and the command's plain tree), the subreaper ends
    the rest; should it still be there well after its grace, the group gets SIGKILL."""
    if proc.returncode is None:
        _signal_group(proc.pid, signal.SIGTERM)
    try:
        async with asyncio.timeout(grace + 2.0):
            await proc.wait()
    except TimeoutError:
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()


async def stop_group(pgid: int, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM process group `pgid`, then SIGKILL it if anything is left after `grace`."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while loop.time() < deadline:
        await asyncio.sleep(_POLL_S)
        if not _has_live_members(pgid):
            return
    _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False when no process is left in it."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _has_live_members(pgid: int) -> bool:
    """True while a process of group `pgid` is running.

    Zombies do not count: an orphan is reaped by PID 1 whenever PID 1 gets to it (some inits
    only do so every second), and a dead process needs no SIGKILL.
    """
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z" and int(fields[2]) == pgid:
            return True
    return False


class Capture:
    """A pipe for one output stream of a child, fed to `sink` chunk by chunk as it arrives.

    Pass `write_fd` as the child's stdout or stderr, call `spawned()` once the child exists, and
    await `drained()` for EOF. Leaving the `with` block stops reading and closes the pipe.
    """

    def __init__(self, sink: Callable[[bytes], None]) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self._sink = sink
        self._loop = asyncio.get_running_loop()
        self._eof = self._loop.create_future()
        self._loop.add_reader(self.read_fd, self._on_readable)

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.remove_reader(self.read_fd)
        os.close(self.read_fd)
        self.spawned()

    def spawned(self) -> None:
        """Drop the parent's copy of the write end, so EOF comes when the children close theirs."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    async def eof(self) -> None:
        """Wait until every writer closed the pipe."""
        await asyncio.shield(self._eof)

    async def drained(self) -> None:
        """Wait for EOF, but no longer than `PIPE_GRACE_S` (a daemon may still hold the pipe)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(PIPE_GRACE_S):
                await self.eof()

    def _on_readable(self) -> None:
        try:
            chunk = os.read(self.read_fd, _READ_SIZE)
        except BlockingIOError:
            return
        if chunk:
            self._sink(chunk)
            return
        self._loop.remove_reader(self.read_fd)
        if not self._eof.done():
            self._eof.set_result(None)
