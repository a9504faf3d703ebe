"""Drive the real `choirctl` in a subprocess, and snapshot a home to prove it was left alone."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import termios
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
_ENTRY = "import sys; sys.argv[0] = 'choirctl'; from choir.ctl.app import main; main()"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def table_rows(lines: list[str]) -> list[dict[str, str]]:
    """A `choirctl` table (its header line first) as rows keyed by lowercase column name: each
    cell is cut at the header's column positions (columns are two spaces apart), so a test keeps
    working when a column is added."""
    header, *body = lines
    starts = [
        i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 2 : i] == "  ")
    ]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    names = [header[a:b].strip().lower() for a, b in bounds]
    return [
        {n: line[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)} for line in body
    ]


def choirctl(home: Path, *args: str, stdin: str | bytes | None = None) -> Run:
    """Run `choirctl args` with CHOIR_HOME=home, exactly as an operator would; `stdin` as
    text, or as bytes (what a file piped in holds)."""
    env = {k: v for k, v in os.environ.items() if k != "CHOIR_HOME"}
    env.update(CHOIR_HOME=str(home), PYTHONPATH=str(REPO_ROOT), COLUMNS="200")
    given = stdin if stdin is not None else ""
    done = subprocess.run(
        [sys.executable, "-c", _ENTRY, *args],
        input=given.encode() if isinstance(given, str) else given,
        capture_output=True,
        env=env,
        check=False,
        timeout=60,
    )
    return Run(done.returncode, done.stdout.decode(), done.stderr.decode())


def as_foreground() -> None:
    """`preexec_fn` of a choirctl a test will interrupt: SIGINT at its default and unblocked, as
    a terminal's foreground job has it, whatever the test process inherited.

    A suite started in the background by a non-interactive shell (`.ci/run > ci.log &`) runs with
    SIGINT ignored, and so does every process it starts: Python then installs no KeyboardInterrupt
    handler nor asyncio its Ctrl-C one, and choirctl ignores SIGINT as `tail -f` would (that is
    exactly how `choirctl logs` outlived its SIGINT by 30 s in CI)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


async def start_choirctl(home: Path, *args: str) -> asyncio.subprocess.Process:
    """`choirctl args` started as an operator's terminal starts it (see `as_foreground`), with
    its stdout and stderr piped, for a test that reads it as it runs and interrupts it."""
    env = {k: v for k, v in os.environ.items() if k != "CHOIR_HOME"}
    env.update(CHOIR_HOME=str(home), PYTHONPATH=str(REPO_ROOT), COLUMNS="200")
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _ENTRY,
        *args,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=as_foreground,
    )


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under `root` with its kind, permission bits and content."""
    if not root.exists():
        return {}
    state: dict[str, tuple[Any, ...]] = {}
    for path in sorted([root, *root.rglob("*")]):
        info = path.lstat()
        key = str(path.relative_to(root))
        mode = stat.S_IMODE(info.st_mode)
        if path.is_symlink():
            state[key] = ("link", os.readlink(path))
        elif path.is_dir():
            state[key] = ("dir", mode)
        else:
            state[key] = ("file", mode, path.read_bytes())
    return state


def choirctl_on_tty(home: Path, *args: str, typed: str) -> tuple[int, str]:
    """Run `choirctl` with a pseudo-terminal as its controlling terminal and type `typed` once
    it prompts; returns the exit code and everything the terminal showed."""
    master, slave = os.openpty()

    def take_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = {k: v for k, v in os.environ.items() if k != "CHOIR_HOME"}
    env.update(CHOIR_HOME=str(home), PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", _ENTRY, *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        preexec_fn=take_terminal,
    )
    os.close(slave)
    shown = _read_until(master, b": ")
    os.write(master, typed.encode() + b"\n")
    shown += _read_until(master, None)
    os.close(master)
    return proc.wait(timeout=30), shown.decode(errors="replace")


def _read_until(fd: int, marker: bytes | None) -> bytes:
    data = b""
    while marker is None or marker not in data:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data
