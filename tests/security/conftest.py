"""Attacks from inside a real agent container, on a real choird (docker runtime) and engine.

The fixtures are the docker runtime tests' (`tests/runtime/conftest.py`); `exec_in` runs a
command in the agent's container as the container's user, as a prompt-injected `choir.exec`
would, and `as_nobody` runs one on the host as another, unprivileged user.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

from tests.runtime.conftest import (  # noqa: F401  (fixtures)
    Choird,
    choird,
    containers_of,
    engine,
    home,
)

NOBODY = 65534


async def exec_in(container: Any, *command: str, prints: bool = False) -> tuple[int, str]:
    """`docker exec` in a thread (choird answers on this test's event loop).

    `prints`: the command always writes something when it succeeds (`cat` of a /proc file,
    `id -u`). Under load the engine now and then returns a successful exec with no output at
    all (seen in CI: `cat /proc/net/unix`, exit 0, not even the header line), so such an
    answer is asked again rather than read as the command's."""
    for _ in range(3):
        done = await asyncio.to_thread(container.exec_run, list(command))
        output = done.output.decode(errors="replace")
        if not (prints and done.exit_code == 0 and not output):
            break
    return done.exit_code, output


def as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    """`command` on the host as uid/gid 65534 with no supplementary groups or capabilities.

    The uid changes in the child before exec (setuid drops every capability), so even finding
    the executable is done as that user — unlike `setpriv --reuid`, which keeps its
    capabilities until the exec and so looks the path up as root."""
    return subprocess.run(
        ["/bin/sh", "-c", 'exec "$0" "$@"', *command],  # a refused exec is sh's to report
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def the_container(client: Any, daemon: Choird) -> Any:
    """The one container choird runs for the test's home."""
    (container,) = containers_of(client, daemon.home)
    return container
