"""An agent's workspace on a full disk, then on a read-only one (issue 12, "Fault suites").

agent-1's workspace is a small tmpfs mounted before the agent starts (on Docker it is a bind
mount, so the container sees the same file system). The scenario fills it to the last byte:
`choir.fs.write` and a `choir.exec` that writes there come back as tool errors that name the
full disk and what to do (not a crash, not a hang), the agent keeps answering, `status` names the
workspace as a full file system, and once space is freed a write works and `status` is clean —
nobody restarts anything. Then the file system is remounted read-only (EROFS, what the kernel
does after I/O errors): the same tools say the workspace is read-only, `status` says so and how
to fix it, the agent is not blamed (still running, same session), and after a read-write
remount a write works again. Every step is held to the shared invariants.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.scripted import ReplyStep, ScriptedCall, ToolCallsStep
from tests.faults.conftest import ClusterOf
from tests.faults.filesystems import fill, small_tmpfs
from tests.faults.invariants import InvariantChecker, Probe, checker_for
from tests.harness import Cluster, probe_step

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

WORKSPACE_KIB = 4096
"""Room for the agent's own files; filled, it has none for anything else."""
NOTES = "a line of notes\n" * 400
WRITE = ScriptedCall(
    name="choir.fs.write", arguments={"path": "notes.txt", "op": "overwrite", "content": NOTES}
)
EXEC = ScriptedCall(
    name="choir.exec", arguments={"command": "head -c 65536 /dev/zero > blob.bin && echo wrote"}
)
SCRIPT = [
    probe_step(),
    ToolCallsStep(match="[write]", repeat=True, calls=[WRITE]),
    ToolCallsStep(match="[exec]", repeat=True, calls=[EXEC]),
    ReplyStep(after="tool", repeat=True, text="the tool answered"),
]


async def test_a_full_then_read_only_workspace_is_a_tool_error_and_status_names_it(
    cluster_of: ClusterOf,
) -> None:
    cluster = await cluster_of(SCRIPT, agents=1)
    checker = checker_for(cluster, require_answers=True)
    workspace = cluster.workspace("agent-1")
    with small_tmpfs(workspace, WORKSPACE_KIB) as disk:
        started = await cluster.start("agent-1")
        assert await cluster.answers("agent-1")

        # -- full ------------------------------------------------------------------------------
        filler = await asyncio.to_thread(fill, disk, ".filler")
        checker.fault(f"the workspace {workspace} is full")
        write = await tool_result(cluster, checker, "[write] while full")
        assert (write["status"], write["error_code"]) == ("error", "disk_full"), write
        assert "no space left on the workspace's disk" in write["summary"]
        run = await tool_result(cluster, checker, "[exec] while full")
        assert run["status"] == "error", run
        assert "No space left on device" in run["data"]["stderr"]
        assert "the workspace's disk is full" in run["summary"]  # named, with the fix
        report = await checker.reported(disk_problem(cluster.client, "full", workspace))
        assert "free space" in report.text
        assert await cluster.answers("agent-1")  # not crashed, not stuck
        assert not (workspace / "notes.txt").exists()  # nothing half-written

        filler.unlink()
        checker.fault(f"space freed on {workspace}")
        await checker.healthy(lambda: disk_clean(cluster.client))
        write = await tool_result(cluster, checker, "[write] after freeing")
        assert write["status"] == "success", write
        assert (workspace / "notes.txt").read_text() == NOTES

        # -- read-only -------------------------------------------------------------------------
        await asyncio.to_thread(remount, disk, "ro")
        checker.fault(f"the workspace {workspace} is read-only")
        write = await tool_result(cluster, checker, "[write] while read-only")
        assert (write["status"], write["error_code"]) == ("error", "read_only"), write
        run = await tool_result(cluster, checker, "[exec] while read-only")
        assert run["status"] == "error", run
        assert "Read-only file system" in run["data"]["stderr"]
        assert "read-only" in run["summary"]
        report = await checker.reported(disk_problem(cluster.client, "io_error", workspace))
        assert "read-only" in report.text
        assert "remount" in report.text
        status = await cluster.client.agent_status("agent-1")
        assert (status["state"], status["session_id"]) == ("running", started["session_id"])

        await asyncio.to_thread(remount, disk, "rw")
        checker.fault(f"{workspace} writable again")
        await checker.healthy(lambda: disk_clean(cluster.client))
        write = await tool_result(cluster, checker, "[write] when writable again")
        assert write["status"] == "success", write

        verdict = await checker.verify(cluster.conversations.values())
        assert verdict.open_intents == []
        status = await cluster.client.agent_status("agent-1")
        assert (status["state"], status["session_id"], status["pid"]) == (
            "running",
            started["session_id"],
            started["pid"],
        )
        await cluster.client.agent_stop("agent-1")  # before the file system goes away


async def tool_result(cluster: Cluster, checker: InvariantChecker, text: str) -> dict[str, Any]:
    """Send `text` (a scripted tool call); once answered, the result of that call as stored."""
    _, reply = await cluster.say("agent-1", text)
    assert reply["category"] == "reply", reply  # the agent answered, it did not fail
    results = await checker.stored("tool_result_committed")
    result: dict[str, Any] = results[-1].payload["result"]
    return result


def disk_problem(client: ChoirClient, state: str, path: Path) -> Probe:
    """`status` shows the disk problem `state` at `path`, with its reason."""

    async def probe() -> str | None:
        disk = (await client.status())["disk"]
        if disk["state"] != state or disk["where"] != str(path):
            return None
        return str(disk["reason"])

    return probe


async def disk_clean(client: ChoirClient) -> bool:
    return bool((await client.status())["disk"]["state"] == "ok")


def remount(mountpoint: Path, mode: str) -> None:
    subprocess.run(
        ["mount", "-o", f"remount,{mode}", str(mountpoint)],
        check=True,
        capture_output=True,
        timeout=10,
    )
