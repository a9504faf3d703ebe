"""An agent's process tree on this host: finding choir-agent in it, and killing all of it.

The process runtime starts a wrapper — bwrap, or `choir.subreaper` when there is no sandbox —
that runs choir-agent as a descendant. Both keep every process the agent starts inside the tree
(bwrap's PID namespace, the subreaper's adoption of orphans), so killing the tree from its
leaves up ends everything: descendants first, in rounds until none is left (a process forked
during a round is adopted and found by the next), the wrapper last. A wrapper killed first
would hand its descendants to PID 1, out of reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time

import psutil

KILL_ROUNDS: int = 50
_ROUND_S = 0.02
_FIND_EVERY_S = 0.005


def descendant_running(root: int, executable: str) -> psutil.Process | None:
    """The first descendant of `root` whose command line runs `executable`."""
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return None
    for child in children:
        with contextlib.suppress(psutil.Error):
            if executable in child.cmdline()[:2]:
                return child
    return None


async def find_agent(
    wrapper: asyncio.subprocess.Process, executable: str, within: float = 10.0
) -> psutil.Process | None:
    """choir-agent under `wrapper`, once it runs (None if the wrapper exits first)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while wrapper.returncode is None and loop.time() < deadline:
        found = descendant_running(wrapper.pid, executable)
        if found is not None:
            return found
        await asyncio.sleep(_FIND_EVERY_S)
    return None


def kill_tree(root: psutil.Process) -> None:
    """SIGKILL every descendant of `root`, round after round until none runs, then `root`.

    psutil checks each process's start time before signalling it, so a pid the kernel has
    given to another process since is left alone."""
    for _ in range(KILL_ROUNDS):
        living = _living_descendants(root)
        if not living:
            break
        for child in living:
            with contextlib.suppress(psutil.Error):
                child.send_signal(signal.SIGKILL)
        time.sleep(_ROUND_S)
    with contextlib.suppress(psutil.Error):
        root.send_signal(signal.SIGKILL)


def _living_descendants(root: psutil.Process) -> list[psutil.Process]:
    try:
        children = root.children(recursive=True)
    except psutil.Error:
        return []
    living = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE:
                living.append(child)
    return living
