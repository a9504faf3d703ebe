"""The server's commands (initdb, `pg_ctl start`), and a start returned from as soon as the
server is ready rather than at pg_ctl's next look.

`pg_ctl -w` reads the postmaster's pid file ten times a second, and a small cluster is ready
~30 ms after its start: each start paid up to 100 ms of waiting on top (171 ms in all here,
40 ms without), on the path to choird's first answer. pg_ctl still runs and judges the start
(a postmaster that exits, its timeout, its messages); meanwhile the caller's `done_when` reads
the pid file every few ms, and whichever sees the outcome first decides. pg_ctl, left to finish
on its own once the server is ready, is reaped by a thread.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Final

FIRST_POLL_S: Final = 0.002
MAX_POLL_S: Final = 0.01
"""`done_when` is asked at 2, 4, 8, then every 10 ms: a start's ~30 ms costs a handful of reads."""


def run(
    argv: list[str],
    *,
    env: dict[str, str],
    timeout_s: float,
    done_when: Callable[[], bool] | None = None,
) -> None:
    """Run `argv` until it ends, or until `done_when()` says what it started is up (it then
    ends on its own). CalledProcessError (with its output) when it failed, TimeoutExpired
    after `timeout_s`; blocking."""
    with tempfile.TemporaryFile() as output:
        # Files, not pipes: the postmaster must hold no descriptor of ours once pg_ctl returns.
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=output, stderr=output, env=env
        )
        try:
            code = _wait(process, done_when, timeout_s)
        except BaseException:
            process.kill()
            process.wait()
            raise
        if code is None:
            threading.Thread(target=process.wait, name="pg_ctl-reap", daemon=True).start()
            return
        if code != 0:
            output.seek(0)
            said = output.read().decode(errors="replace")
            raise subprocess.CalledProcessError(code, argv, stderr=said)


def _wait(
    process: subprocess.Popen[bytes], done_when: Callable[[], bool] | None, timeout_s: float
) -> int | None:
    """The command's exit code once it ended, or None as soon as `done_when()` first."""
    deadline, pause = time.monotonic() + timeout_s, FIRST_POLL_S
    while (code := process.poll()) is None:
        if done_when is not None and done_when():
            return None
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(process.args, timeout_s)
        time.sleep(pause)
        pause = min(pause * 2, MAX_POLL_S)
    return code
