"""agent-1 on the process runtime, made to run one `choir.exec` command of the test's choosing.

A real choird in the test process (`running_daemon(runtime="process")`) starts the real
choir-agent — in the bwrap sandbox, or unsandboxed with `CHOIR_BWRAP=` — on a home whose model
is a `ScriptedModelServer` on loopback. "start the worker" makes edge spawn a core job whose one
step is `choir.exec` of the command; `done` (text the command prints) ends the job.

bwrap missing here skips the sandboxed variants, except in CI (`CI` set, as `.ci/run` does, or
`CHOIR_REQUIRE_BWRAP=1`), where it fails them: `.ci/run` installs bubblewrap.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psutil
import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.daemon.runtimes.bwrap import BWRAP_ENV, find_sandbox
from choir.home import ChoirHome
from choir.protocol.operator.answers import AgentStarted
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import running_daemon
from tests.harness.homes import read_config, scripted_home

Sandbox = Literal["bwrap", "unsandboxed"]
SANDBOXES: tuple[Sandbox, ...] = ("bwrap", "unsandboxed")


def bwrap_works() -> bool:
    """Whether the process runtime sandboxes agents here (tests expecting its labels ask)."""
    return os.environ.get(BWRAP_ENV) != "" and find_sandbox()[0] is not None


def sandbox_word() -> str:
    """How status shows a process-runtime agent here: `bwrap` or `unsandboxed`."""
    return "bwrap" if bwrap_works() else "unsandboxed"


def require_bwrap() -> None:
    """Skip the calling test where bwrap cannot sandbox — or fail it in CI."""
    sandbox, why = find_sandbox()
    if sandbox is not None:
        return
    if os.environ.get("CI") or os.environ.get("CHOIR_REQUIRE_BWRAP") == "1":
        pytest.fail(f"bwrap is required here but {why}", pytrace=False)
    pytest.skip(why)


def use_sandbox(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next choird's process runtime sandboxed (bwrap) or not."""
    if sandbox == "bwrap":
        require_bwrap()
        monkeypatch.delenv(BWRAP_ENV, raising=False)
    else:
        monkeypatch.setenv(BWRAP_ENV, "")


def exec_script(command: str, *, done: str | None = None, timeout_ms: int = 120_000) -> Script:
    steps: list[Any] = [
        ToolCallsStep(
            match="start the worker",
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={"job_name": "worker", "task_spec": "Run the command."},
                )
            ],
        ),
        ReplyStep(after="tool", match="worker started", text="Started worker."),
    ]
    if done is not None:
        steps.append(ReplyStep(after="tool", match=done, text="Worker done."))
    steps.append(
        ToolCallsStep(
            calls=[
                ScriptedCall(
                    name="choir.exec", arguments={"command": command, "timeout_ms": timeout_ms}
                )
            ]
        )
    )
    return Script(description="one choir.exec of the test's", steps=steps)


@dataclass(frozen=True)
class ProcessAgent:
    daemon: ChoirDaemon
    client: ChoirClient
    home: ChoirHome
    started: AgentStarted
    workspace: Path

    @property
    def pid(self) -> int:
        """choir-agent's own pid (inside its wrapper)."""
        assert self.started.pid is not None, "a process agent has a pid"
        return self.started.pid

    async def start_worker(self) -> None:
        await self.client.chat_send("agent-1", "please start the worker")


@asynccontextmanager
async def process_agent(
    root: Path,
    pg_params: ConnectParams,
    script: Script,
    *,
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    configure: Callable[[ChoirHome], None] | None = None,
) -> AsyncIterator[ProcessAgent]:
    """agent-1 started on the process runtime with `script` as its model; `configure` edits
    the home (config, secrets) before choird starts."""
    use_sandbox(sandbox, monkeypatch)
    async with ScriptedModelServer(script) as model:
        home = scripted_home(root, pg_params, model.url)
        if configure is not None:
            configure(home)
        workspace = Path(read_config(home)["workspaces"]["default"]["path"])
        async with (
            running_daemon(home, runtime="process") as daemon,
            await ChoirClient.connect(home) as client,
        ):
            assert daemon.runtime is not None
            assert daemon.runtime.sandboxed is (sandbox == "bwrap")
            started = await client.agent_start("agent-1", {"dm": "console"})
            yield ProcessAgent(daemon, client, home, started, workspace)


def processes_with(marker: str) -> list[psutil.Process]:
    """Every process on this host whose command line mentions `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info.get("cmdline") or [])
        if marker in cmdline and process.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def kill_all(processes: list[psutil.Process]) -> None:
    """Clean up after a failed test: what it found still running is killed."""
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            continue
