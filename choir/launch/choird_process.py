"""choird as a background process of `choir up`, and finding the one already running.

`choir up` starts choird detached — its own session, no terminal, stdin closed — so it outlives
the command and a Ctrl-C in the console never reaches it. Its records go to
`logs/choird.log` (`--quiet`); anything it writes before logging is set up, or a traceback it
could not log, goes to `logs/choird.out` (replaced at each start), whose last line explains a
failed start.

The running choird is the one holding `$CHOIR_HOME/choird.lock` (`instance_lock`); the lock
file holds its pid.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from choir.daemon.instance_lock import LOCK_NAME
from choir.errors import ChoirError, ExitCode, UnavailableError
from choir.home import ChoirHome

READY_TIMEOUT_S: Final = 90.0
"""First start of the embedded Postgres runs initdb; a slow disk takes a while."""
EXIT_TIMEOUT_S: Final = 90.0
"""choird stops its agents gracefully (summaries) before it exits."""
POLL_S: Final = 0.05
SECRET_ENV: Final = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
"""Keys `choir up` may have stored in secrets.json: choird reads them there, not from its
environment."""

Tick = Callable[[float], None]
"""Called while waiting with the seconds waited so far."""


def output_file(home: ChoirHome) -> Path:
    return home.logs / "choird.out"


def spawn(
    home: ChoirHome, runtime: str | None = None, environ: Mapping[str, str] = os.environ
) -> subprocess.Popen[bytes]:
    """Start `choird --quiet` for `home` in the background, detached from this terminal;
    `runtime` (auto, docker, process) overrides config.json's `container.runtime`."""
    home.logs.mkdir(parents=True, exist_ok=True)
    env = daemon_environment(environ)
    command = [str(Path(sys.executable).parent / "choird"), "--home", str(home.root), "--quiet"]
    # logs/ is private, and so is each file in it (it quotes what choird could not log)
    fd = os.open(output_file(home), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as sink:
        return subprocess.Popen(
            [*command, *(["--runtime", runtime] if runtime else [])],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            env=env,
            start_new_session=True,
        )


def daemon_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """choird's environment: this one without model keys (choird reads secrets.json) and
    without CHOIR_HOME (`--home` names it)."""
    return {k: v for k, v in environ.items() if k not in SECRET_ENV and k != "CHOIR_HOME"}


def wait_ready(
    home: ChoirHome, exited: Callable[[], int | None], ready: Callable[[], bool], tick: Tick
) -> float:
    """Seconds until `ready()` (its operator socket answers); ChoirError naming what choird
    said if `exited()` gives its exit code first (`Popen.poll`, or `exit_of(pid)`)."""
    began = time.monotonic()
    while not ready():
        waited = time.monotonic() - began
        code = exited()
        if code is not None:
            raise ChoirError(
                f"choird did not start: {last_line(output_file(home))} "
                f"(full log: {home.choird_log})",
                exit_code=_exit_code(code),
            )
        if waited > READY_TIMEOUT_S:
            raise UnavailableError(
                f"choird did not answer within {READY_TIMEOUT_S:g} s: see {home.choird_log}"
            )
        tick(waited)
        time.sleep(POLL_S)
    return time.monotonic() - began


def running_pid(home: ChoirHome) -> int | None:
    """The pid of the choird holding `home`'s lock, if that process is alive."""
    try:
        text = (home.root / LOCK_NAME).read_text().strip()
    except OSError:
        return None
    pid = int(text) if text.isdigit() else None
    return pid if pid is not None and alive(pid) else None


def wait_exit(pid: int, tick: Tick) -> float:
    """Seconds until process `pid` is gone; UnavailableError after `EXIT_TIMEOUT_S`."""
    began = time.monotonic()
    while alive(pid):
        waited = time.monotonic() - began
        if waited > EXIT_TIMEOUT_S:
            raise UnavailableError(
                f"choird (pid {pid}) is still stopping after {EXIT_TIMEOUT_S:g} s: "
                f"see its log, or end it with kill {pid}"
            )
        tick(waited)
        time.sleep(POLL_S)
    return time.monotonic() - began


def exit_of(pid: int) -> Callable[[], int | None]:
    """`exited` for a choird this process did not start: 1 once it is gone (its code is its
    parent's to know)."""
    return lambda: None if alive(pid) else int(ExitCode.ERROR)


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie child of ours counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def last_line(path: Path) -> str:
    """The last non-empty line of `path` (what a failed choird said), or a pointer to it."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return "it wrote nothing"
    said = [line for line in lines if line]
    return said[-1].removeprefix("choird: error: ") if said else "it wrote nothing"


def _exit_code(code: int) -> ExitCode:
    try:
        return ExitCode(code)
    except ValueError:
        return ExitCode.ERROR
