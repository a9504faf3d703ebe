"""External tools with real executables and real subprocesses: the JSON contract, secrets,
environment, caps, timeouts and cancellation."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from choir.agent.kernel.workspace import Workspace
from choir.agent.tools import shell
from choir.agent.tools.external import STDERR_TAIL_BYTES, run_external
from choir.agent.tools.shell import ExecInput
from choir.protocol.tooling.tools import ToolResult

FIXTURES = Path(__file__).parent / "fixtures"
SECRET = "s3cr3t-notion-value-7f1c"


def install(tmp_path: Path, fixture: str) -> Path:
    """Copy a fixture tool into tmp_path/bin and make it executable, as an image build would."""
    target = tmp_path / "bin" / fixture
    target.parent.mkdir(exist_ok=True)
    shutil.copyfile(FIXTURES / fixture, target)
    target.chmod(0o755)
    return target


@pytest.fixture
def tool(tmp_path: Path) -> Path:
    return install(tmp_path, "echo_tool.py")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


async def call(
    exec_path: Path,
    ws: Path,
    *,
    secrets: dict[str, str] | None = None,
    timeout_ms: int = 10_000,
    max_output_bytes: int = 1024 * 1024,
    **arguments: Any,
) -> ToolResult:
    return await run_external(
        exec_path,
        arguments,
        secrets=secrets or {},
        workspace_root=ws,
        timeout_ms=timeout_ms,
        max_output_bytes=max_output_bytes,
    )


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


async def all_dead(pids: list[int], within_s: float = 2.0) -> bool:
    deadline = time.monotonic() + within_s
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def pids_of(ws: Path) -> list[int]:
    """The pids the sleeping fixtures write to `pids` once they and their child are running."""
    path = ws / "pids"
    for _ in range(500):
        if path.exists():
            return [int(pid) for pid in path.read_text().split()]
        await asyncio.sleep(0.01)
    raise AssertionError("the tool never wrote its pids")


async def test_success_returns_the_tools_result(tool: Path, ws: Path) -> None:
    result = await call(tool, ws, mode="echo", items=[1, 2], nested={"a": "b"})

    assert result.status == "success"
    assert result.summary == "echoed"
    assert result.data["arguments"] == {"mode": "echo", "items": [1, 2], "nested": {"a": "b"}}
    assert result.data["cwd"] == str(ws)
    assert result.data["secrets"] == {}


async def test_secrets_arrive_on_stdin_and_nowhere_else(tool: Path, ws: Path) -> None:
    result = await call(tool, ws, secrets={"notion-key": SECRET}, mode="echo")

    assert result.data["secrets"] == {"notion-key": SECRET}
    assert SECRET not in result.data["environ_raw"]
    assert SECRET not in result.data["cmdline"]
    assert SECRET not in str(result.data["env"])


async def test_environment_is_minimal_and_not_inherited(
    tool: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHOIR_TEST_PLANTED", "planted-in-the-agent")

    result = await call(tool, ws, mode="echo")

    assert set(result.data["env"]) == {"PATH", "HOME", "LANG"}
    assert result.data["env"]["HOME"] == str(ws)
    assert "planted-in-the-agent" not in result.data["environ_raw"]


async def test_tool_runs_under_its_own_subreaper(tool: Path, ws: Path) -> None:
    """Its parent is a `choir.subreaper` (not the agent), which leads the call's process group."""
    result = await call(tool, ws, mode="echo")

    parent = result.data["ppid"]
    assert parent != os.getpid()
    assert result.data["pgid"] == parent
    assert "subreaper.py" in result.data["parent_cmdline"]


async def test_output_that_is_not_json_is_an_invalid_tool_output(tool: Path, ws: Path) -> None:
    result = await call(tool, ws, mode="garbage")

    assert result.status == "error"
    assert result.error_code == "invalid_tool_output"
    assert result.data["output_head"] == "this is not json at all\n"
    assert "echo_tool.py did not print a valid result object" in result.summary


async def test_json_that_is_not_a_result_is_an_invalid_tool_output(tool: Path, ws: Path) -> None:
    result = await call(tool, ws, mode="bad_result")

    assert result.error_code == "invalid_tool_output"
    assert any(problem.startswith("status:") for problem in result.data["problems"])
    assert '"status": "maybe"' in result.data["output_head"]


async def test_nonzero_exit_reports_code_and_stderr_tail(tool: Path, ws: Path) -> None:
    result = await call(tool, ws, mode="fail")

    assert result.status == "error"
    assert result.error_code == "nonzero_exit"
    assert result.summary == "echo_tool.py exited 3"
    assert result.data["exit_code"] == 3
    assert result.data["stderr"].endswith("boom: the tool failed\n")
    assert len(result.data["stderr"]) == STDERR_TAIL_BYTES


async def test_death_by_signal_is_named(tool: Path, ws: Path) -> None:
    result = await call(tool, ws, mode="signal")

    assert result.error_code == "nonzero_exit"
    assert result.summary == "echo_tool.py was killed by signal 9"


async def test_output_over_the_cap_stops_the_tool(tool: Path, ws: Path) -> None:
    started = time.monotonic()
    result = await call(tool, ws, mode="spew", max_output_bytes=100_000)

    assert time.monotonic() - started < 5
    assert result.status == "error"
    assert result.error_code == "output_too_large"
    assert result.truncated
    assert result.data["limit_bytes"] == 100_000
    assert result.data["output_head"].startswith("yyyy")


async def test_timeout_kills_the_tool_and_its_children(tool: Path, ws: Path) -> None:
    task = asyncio.create_task(call(tool, ws, mode="sleep", timeout_ms=1500))
    pids = await pids_of(ws)
    result = await task

    assert result.status == "timeout"
    assert result.error_code == "timeout"
    assert result.data["timeout_ms"] == 1500
    assert await all_dead(pids)


async def test_a_tool_ignoring_sigterm_is_killed(tmp_path: Path, ws: Path) -> None:
    stubborn = install(tmp_path, "stubborn.sh")
    started = time.monotonic()
    task = asyncio.create_task(call(stubborn, ws, timeout_ms=500))
    pids = await pids_of(ws)
    result = await task

    assert result.status == "timeout"
    assert time.monotonic() - started < 5
    assert await all_dead(pids)


async def test_cancellation_kills_the_process_group_and_propagates(tool: Path, ws: Path) -> None:
    task = asyncio.create_task(call(tool, ws, mode="sleep", timeout_ms=60_000))
    pids = await pids_of(ws)
    assert all(alive(pid) for pid in pids)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await all_dead(pids)


async def test_a_tool_that_never_reads_a_large_input_does_not_stall(
    tmp_path: Path, ws: Path
) -> None:
    script = tmp_path / "bin" / "no_read"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\necho \'{"status": "success", "summary": "ignored stdin"}\'\n')
    script.chmod(0o755)

    result = await call(script, ws, timeout_ms=5000, blob="z" * 2_000_000)

    assert result.status == "success"
    assert result.summary == "ignored stdin"


async def test_a_large_input_reaches_a_tool_that_reads_it(tool: Path, ws: Path) -> None:
    blob = "q" * 500_000

    result = await call(tool, ws, mode="echo", blob=blob)

    assert result.data["arguments"]["blob"] == blob


async def test_a_file_that_cannot_be_executed_is_not_runnable(tmp_path: Path, ws: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\necho hi\n")
    plain.chmod(0o644)

    result = await call(plain, ws)

    assert result.status == "error"
    assert result.error_code == "tool_not_runnable"
    assert result.summary == "plain cannot start: Permission denied"


async def test_nothing_a_tool_started_outlives_the_call_even_out_of_its_group(
    tool: Path, ws: Path
) -> None:
    """A sleeper the tool left in a session of its own (`setsid`) is ended with the call: the
    tool runs under a subreaper. Before, only the tool's process group was stopped."""
    result = await call(tool, ws, mode="detach")
    [sleeper] = await pids_of(ws)

    assert result.summary == "detached a sleeper"
    assert await all_dead([sleeper])


SLOW_READER = """#!{python}
import json, sys, time
time.sleep(1.5)  # a tool still starting up: its input waits for it
request = json.load(sys.stdin)
print(json.dumps({{"status": "success", "summary": "read", "data": request["secrets"]}}))
"""
THIEF = """
import os, sys, time
deadline = time.time() + 10
while time.time() < deadline:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        if argv[1:2] != [b"TOOL"]:
            continue
        try:
            fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)
        except OSError as refused:
            print("refused:", refused.strerror)
            sys.exit(0)
        while time.time() < deadline:
            try:
                print("stole:", os.read(fd, 65536).decode())
                sys.exit(0)
            except BlockingIOError:
                time.sleep(0.01)
    time.sleep(0.01)
print("no tool seen")
"""


async def test_a_concurrent_exec_cannot_take_the_secrets_off_a_tools_stdin(
    tmp_path: Path, ws: Path
) -> None:
    """The attack: a `choir.exec` command (same uid) watching for the tool and opening
    `/proc/<pid>/fd/0` before the tool reads it. Before, its stdin was a pipe: the command read
    the payload, secrets and all, and the tool got nothing. Now it is a socket, which cannot be
    opened that way."""
    reader = tmp_path / "bin" / "slow_reader"
    reader.parent.mkdir()
    reader.write_text(SLOW_READER.format(python=sys.executable))
    reader.chmod(0o755)
    thief = ExecInput(command=f"{sys.executable} -c '{THIEF.replace('TOOL', str(reader))}'")

    with Workspace(ws) as workspace:
        attack = asyncio.create_task(shell.run(workspace, thief))
        await asyncio.sleep(0.3)  # the command is watching
        result = await call(reader, ws, secrets={"notion-key": SECRET})
        seen = await attack

    assert seen.data["stdout"].strip() == "refused: No such device or address", seen.data
    assert SECRET not in seen.data["stdout"]
    assert (result.status, result.data) == ("success", {"notion-key": SECRET})
