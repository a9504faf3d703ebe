"""Real processes for end-to-end runs: the fake agent, `choird` and `choirctl` themselves.

Output goes to files or is read line by line as it comes, never left in a full pipe: a daemon
that blocks writing its log to stderr would look like a hung daemon.
"""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from choir.home import ChoirHome

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
"""The virtualenv's scripts: `choird`, `choirctl`."""


def run_probe(code: str, *, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    """The last line a fresh interpreter running `code` prints, read as a Python literal; its
    stderr's tail is the failure when it exits non-zero. A probe sees what a process loads from
    its start, which this one's imports have long since settled."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def environment(**extra: str) -> dict[str, str]:
    """This environment without CHOIR_* variables, plus `extra`, able to import `tests`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHOIR_")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def gone(pid: int) -> bool:
    """Whether process `pid` has exited (and been reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- the fake agent ------------------------------------------------------------------------


async def start_fake_agent(
    target: str | Path,
    session_id: str,
    lease_token: str,
    *,
    agent_id: str = "agent-1",
    interval_ms: int = 100,
    ca_file: Path | None = None,
) -> asyncio.subprocess.Process:
    """`tests.e2e.fake_agent` running, its INIT_HELLO answered (it printed `ready`)."""
    env = environment(
        CHOIR_CONTROL_PLANE=str(target),
        CHOIR_SESSION_ID=session_id,
        CHOIR_LEASE_TOKEN=lease_token,
        CHOIR_AGENT_ID=agent_id,
        CHOIR_HEARTBEAT_INTERVAL_MS=str(interval_ms),
        **({"CHOIR_CA_FILE": str(ca_file)} if ca_file else {}),
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.e2e.fake_agent",
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    line = await read_line(process)
    if line != "ready":
        process.kill()
        await process.wait()
        raise AssertionError(f"the fake agent did not start (said {line!r})")
    return process


async def read_line(process: asyncio.subprocess.Process, within: float = 10.0) -> str:
    assert process.stdout is not None
    async with asyncio.timeout(within):
        return (await process.stdout.readline()).decode().strip()


async def wait_for_ack(process: asyncio.subprocess.Process, rev: int) -> None:
    """Read the agent's output until a heartbeat acknowledged `rev` or more."""
    while True:
        line = await read_line(process)
        if line.startswith("ack ") and int(line.split()[1]) >= rev:
            return
        if not line:
            raise AssertionError(f"the fake agent exited before reaching rev {rev}")


# -- choird and choirctl -------------------------------------------------------------------


@dataclass
class Choird:
    """A `choird` process, its output captured in a file beside the home."""

    process: subprocess.Popen[bytes]
    stderr: Path
    log: Path
    """logs/choird.log: where the records go also with --quiet."""

    def stderr_text(self) -> str:
        return self.stderr.read_text(errors="replace")

    def ready(self) -> bool:
        """Whether "choird ready" was logged (to stderr, or only to the log with --quiet)."""
        for source in (self.stderr, self.log):
            try:
                if "choird ready" in source.read_text(errors="replace"):
                    return True
            except FileNotFoundError:
                pass
        return False


def spawn_choird(home: ChoirHome, *args: str) -> Choird:
    stderr = home.root.parent / f"choird-{time.monotonic_ns()}.stderr"
    with stderr.open("wb") as sink:
        process = subprocess.Popen(
            [str(BIN / "choird"), *args],
            env=environment(CHOIR_HOME=str(home.root)),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )
    return Choird(process, stderr, home.choird_log)


def wait_until_ready(choird: Choird, timeout: float = 30.0) -> float:
    """Seconds until "choird ready" was logged; fails if choird exits first."""
    began = time.monotonic()
    while not choird.ready():
        if choird.process.poll() is not None:
            raise AssertionError(
                f"choird exited {choird.process.returncode}:\n{choird.stderr_text()}"
            )
        if time.monotonic() - began > timeout:
            raise AssertionError(f"choird not ready within {timeout} s:\n{choird.stderr_text()}")
        time.sleep(0.01)
    return time.monotonic() - began


def run_choird(
    home: ChoirHome, *args: str, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """`choird` run to completion (a start-up that fails)."""
    return _run("choird", home, args, timeout)


def run_choirctl(home: ChoirHome, *args: str) -> subprocess.CompletedProcess[str]:
    """`choirctl args` on `home`, at a width that keeps its tables on one line each."""
    return _run("choirctl", home, args, 60, COLUMNS="200")


def run_choir(
    home: ChoirHome, *args: str, timeout: float = 180.0
) -> subprocess.CompletedProcess[str]:
    """`choir args` (`up`, `down`, …) run to completion on `home`."""
    return _run("choir", home, args, timeout)


def _run(
    command: str, home: ChoirHome, args: tuple[str, ...], timeout: float, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / command), *args],
        env=environment(CHOIR_HOME=str(home.root), **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
