"""An agent's workspace on a full disk, then on a read-only one (issue 12, "Fault suites").

agent-1's workspace is a small tmpfs mounted before the agent starts, on the process runtime
and on Docker (where the workspace is a bind mount, so the container sees the same file system;
the model then runs inside the container, on its loopback). The scenario fills it to the last byte:
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.scripted import ReplyStep, Script, ScriptedCall, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.docker_support import require_docker
from tests.faults.conftest import ClusterOf
from tests.faults.filesystems import fill, small_tmpfs
from tests.faults.invariants import InvariantChecker, Probe, checker_for
from tests.faults.support import IN_CONTAINER_PORT, serve_model_in, spawn_choird, teardown
from tests.harness.cluster import PROBE, Conversation, probe_step
from tests.harness.homes import external_postgres, make_home, read_config, short_root, write_config

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
    workspace = cluster.workspace("agent-1")
    with small_tmpfs(workspace, WORKSPACE_KIB) as disk:
        started = await cluster.start("agent-1")
        scene = Scene(
            cluster.client, cluster.conversation("agent-1"), checker_for(cluster), workspace
        )
        await full_then_read_only(scene, disk, started)


async def test_the_same_on_docker_where_the_workspace_is_a_bind_mount(
    pg_params: ConnectParams,
) -> None:
    require_docker()
    with short_root("wd-") as root:
        home = make_home(root, postgres=external_postgres(pg_params))
        data = read_config(home)
        url = f"http://127.0.0.1:{IN_CONTAINER_PORT}/v1"  # the container's own loopback
        data["models"]["demo"] = {"provider": "scripted", "model": "wd", "endpoint": url}
        write_config(home, data)
        workspace = Path(data["workspaces"]["default"]["path"])
        choird = None
        with small_tmpfs(workspace, WORKSPACE_KIB) as disk:
            (disk / ".script.json").write_text(Script(steps=SCRIPT).model_dump_json())
            try:
                choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "docker")
                async with await ChoirClient.connect(home, call_timeout=None) as client:
                    started = (await client.agent_start("agent-1", {"dm": "console"})).model_dump(
                        mode="json"
                    )
                    container = (await client.agent_status("agent-1")).container
                    await asyncio.to_thread(serve_model_in, container)
                    conversation = Conversation("agent-1", client)
                    await conversation.open()
                    checker = InvariantChecker(pg_params, ["agent-1"], require_answers=True)
                    try:
                        scene = Scene(client, conversation, checker, workspace)
                        await full_then_read_only(scene, disk, started)
                    finally:
                        await conversation.close()
            finally:
                await asyncio.to_thread(teardown, home, choird)


@dataclass
class Scene:
    client: ChoirClient
    conversation: Conversation
    checker: InvariantChecker
    workspace: Path

    async def say(self, text: str) -> dict[str, Any]:
        """Send `text` and wait for its reply (or error)."""
        return await self.conversation.reply_to(await self.conversation.send(text))

    async def answers(self) -> bool:
        return bool((await self.say(f"are you there? {PROBE}"))["category"] == "reply")

    async def tool_result(self, text: str) -> dict[str, Any]:
        """Send `text` (a scripted tool call); once answered, that call's result as stored."""
        reply = await self.say(text)
        assert reply["category"] == "reply", reply  # the agent answered, it did not fail
        results = await self.checker.stored("tool_result_committed")
        result: dict[str, Any] = results[-1].payload["result"]
        return result


async def full_then_read_only(scene: Scene, disk: Path, started: dict[str, Any]) -> None:
    client, checker, workspace = scene.client, scene.checker, scene.workspace
    checker.require_answers = True
    assert await scene.answers()

    # -- full --------------------------------------------------------------------------------
    filler = await asyncio.to_thread(fill, disk, ".filler")
    checker.fault(f"the workspace {workspace} is full")
    write = await scene.tool_result("[write] while full")
    assert (write["status"], write["error_code"]) == ("error", "disk_full"), write
    assert "no space left on the workspace's disk" in write["summary"]
    run = await scene.tool_result("[exec] while full")
    assert run["status"] == "error", run
    assert "No space left on device" in run["data"]["stderr"]
    assert "the workspace's disk is full" in run["summary"]  # named, with the fix
    report = await checker.reported(disk_problem(client, "full", workspace))
    assert "free space" in report.text
    assert await scene.answers()  # not crashed, not stuck
    assert not (workspace / "notes.txt").exists()  # nothing half-written

    filler.unlink()
    checker.fault(f"space freed on {workspace}")
    await checker.healthy(lambda: disk_clean(client))
    write = await scene.tool_result("[write] after freeing")
    assert write["status"] == "success", write
    assert (workspace / "notes.txt").read_text() == NOTES

    # -- read-only ---------------------------------------------------------------------------
    await asyncio.to_thread(remount, disk, "ro")
    checker.fault(f"the workspace {workspace} is read-only")
    write = await scene.tool_result("[write] while read-only")
    assert (write["status"], write["error_code"]) == ("error", "read_only"), write
    run = await scene.tool_result("[exec] while read-only")
    assert run["status"] == "error", run
    assert "Read-only file system" in run["data"]["stderr"]
    assert "read-only" in run["summary"]
    report = await checker.reported(disk_problem(client, "io_error", workspace))
    assert "read-only" in report.text
    assert "remount" in report.text
    status = await client.agent_status("agent-1")
    assert (status.state, status.session_id) == ("running", started["session_id"])

    await asyncio.to_thread(remount, disk, "rw")
    checker.fault(f"{workspace} writable again")
    await checker.healthy(lambda: disk_clean(client))
    write = await scene.tool_result("[write] when writable again")
    assert write["status"] == "success", write

    verdict = await checker.verify([scene.conversation])
    assert verdict.open_intents == []
    status = await client.agent_status("agent-1")
    assert (status.state, status.session_id, status.pid) == (
        "running",
        started["session_id"],
        started["pid"],
    )
    await client.agent_stop("agent-1")  # before the file system goes away


def disk_problem(client: ChoirClient, state: str, path: Path) -> Probe:
    """`status` shows the disk problem `state` at `path`, with its reason."""

    async def probe() -> str | None:
        disk = (await client.status()).disk
        if disk.state != state or disk.where != str(path):
            return None
        return str(disk.reason)

    return probe


async def disk_clean(client: ChoirClient) -> bool:
    return bool((await client.status()).disk.state == "ok")


def remount(mountpoint: Path, mode: str) -> None:
    subprocess.run(
        ["mount", "-o", f"remount,{mode}", str(mountpoint)],
        check=True,
        capture_output=True,
        timeout=10,
    )
