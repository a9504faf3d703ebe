"""choir.exec with real subprocesses: results, caps, timeouts, environment and cancellation."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from choir.agent.kernel.workspace import Workspace
from choir.agent.tools import shell
from choir.agent.tools._caps import EXEC_OUTPUT_BYTES
from choir.agent.tools.shell import ExecInput
from choir.protocol.tooling.tools import ToolResult


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    root.mkdir()
    with Workspace(root) as workspace:
        yield workspace


async def run(ws: Workspace, command: str, timeout_ms: int = 30_000) -> ToolResult:
    return await shell.run(ws, ExecInput(command=command, timeout_ms=timeout_ms))


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


def pids(ws: Workspace, *names: str) -> list[int]:
    return [int((ws.root / name).read_text()) for name in names]


def test_lock_is_the_whole_workspace() -> None:
    assert shell.lock_keys(ExecInput(command="true")) == [("workspace", "X")]


def test_timeout_is_bounded() -> None:
    with pytest.raises(ValueError, match="less than or equal to 600000"):
        ExecInput(command="true", timeout_ms=600_001)


async def test_success_runs_in_the_workspace(ws: Workspace) -> None:
    result = await run(ws, "pwd; echo out; echo err >&2; echo made > made.txt")
    assert result.status == "success"
    assert result.data["exit_code"] == 0
    assert result.data["stdout"] == f"{ws.root}\nout\n"
    assert result.data["stderr"] == "err\n"
    assert (ws.root / "made.txt").read_text() == "made\n"
    assert not result.truncated


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
async def test_commands_run_with_bash_as_the_manifest_promises(ws: Workspace) -> None:
    result = await run(
        ws, "set -o pipefail; false | true; echo $?; [[ -n $BASH_VERSION ]] && echo bash"
    )
    assert result.data["stdout"] == "1\nbash\n"


async def test_nonzero_exit_is_an_error_with_the_code(ws: Workspace) -> None:
    result = await run(ws, "echo failing >&2; exit 3")
    assert (result.status, result.error_code) == ("error", "nonzero_exit")
    assert result.data["exit_code"] == 3
    assert result.data["stderr"] == "failing\n"
    assert result.summary == "exit 3"


async def test_stdin_is_empty(ws: Workspace) -> None:
    result = await run(ws, "cat; echo done", timeout_ms=5000)
    assert result.data["stdout"] == "done\n"


async def test_environment_is_minimal(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHOIR_PLANTED_SECRET", "hunter2")
    result = await run(ws, "env")
    env = dict(line.split("=", 1) for line in result.data["stdout"].splitlines())
    assert "hunter2" not in result.data["stdout"]
    assert env["HOME"] == str(ws.root)
    assert env["LANG"] == "C.UTF-8"
    assert "/usr/bin" in env["PATH"]
    assert set(env) <= {"HOME", "LANG", "PATH", "PWD", "SHLVL", "OLDPWD", "_"}


async def test_large_output_keeps_head_and_tail(ws: Workspace) -> None:
    result = await run(ws, "echo START; head -c 200000 /dev/zero | tr '\\0' a; echo; echo END")
    assert result.truncated
    out = result.data["stdout"]
    assert out.startswith("START\n")
    assert out.endswith("END\n")
    assert "bytes omitted" in out
    assert len(out) < EXEC_OUTPUT_BYTES + 100
    assert result.data["stdout_bytes"] == 6 + 200_000 + 1 + 4


async def test_timeout_kills_the_process_group(ws: Workspace) -> None:
    result = await run(ws, "echo $$ > sh.pid; sleep 30 & echo $! > child.pid; wait", 300)
    assert (result.status, result.error_code) == ("timeout", "timeout")
    assert "300 ms" in result.summary
    assert not any(alive(pid) for pid in pids(ws, "sh.pid", "child.pid"))


async def test_a_child_ignoring_sigterm_is_killed(ws: Workspace) -> None:
    command = "trap '' TERM; echo $$ > sh.pid; sleep 30 & echo $! > child.pid; echo up; wait"
    result = await run(ws, command, 300)
    assert result.status == "timeout"
    assert result.data["stdout"] == "up\n"
    assert not any(alive(pid) for pid in pids(ws, "sh.pid", "child.pid"))


async def test_background_jobs_do_not_outlive_the_call(ws: Workspace) -> None:
    result = await run(ws, "sleep 30 & echo $! > bg.pid; echo started")
    assert result.status == "success"
    assert result.data["stdout"] == "started\n"
    assert not alive(pids(ws, "bg.pid")[0])


async def test_cancellation_kills_the_process_group(ws: Workspace) -> None:
    command = "echo $$ > sh.pid; sleep 30 & echo $! > child.pid; wait"
    task = asyncio.create_task(run(ws, command))
    for _ in range(1000):
        if (ws.root / "child.pid").exists() and (ws.root / "child.pid").read_text():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not any(alive(pid) for pid in pids(ws, "sh.pid", "child.pid"))
