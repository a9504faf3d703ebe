"""The docker runtime end to end: a real engine, the real agent image, a real choird.

Each §15.3 item is read back with the test's own `docker inspect` (and the kernel's view of the
container's processes), not through choird's check; `agent verify` must agree. The agent then
answers a chat from inside its container and stops gracefully, leaving no container behind.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import docker
import pytest

from choir.config.container import AGENT_UID_SPAN
from choir.core.security.agent_users import agent_uids
from choir.core.security.profile import parse_proc_status
from choir.daemon.runtimes.container_spec import MIB
from choir.store.sessions import SessionStatus
from tests.harness.agent_logs import agent_log_text
from tests.harness.daemons import leased, poll_until, session_row
from tests.harness.processes import run_choirctl
from tests.runtime.conftest import BUILD_TIMEOUT_S, Choird, chat, containers_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT_S)]


def the_container(engine: docker.DockerClient, choird: Choird) -> Any:
    found = containers_of(engine, choird.home)
    assert len(found) == 1, found
    return found[0]


async def in_container(container: Any, *command: str) -> tuple[int, str]:
    """`docker exec` in a thread: choird answers on this test's event loop."""
    done = await asyncio.to_thread(container.exec_run, list(command))
    return done.exit_code, done.output.decode(errors="replace")


async def test_a_started_agent_has_every_item_of_the_profile(
    choird: Choird, engine: docker.DockerClient
) -> None:
    started = await choird.start()
    assert (started["runtime"], started["sandboxed"]) == ("docker", True)
    container = the_container(engine, choird)
    attrs = container.attrs
    host = attrs["HostConfig"]
    running = choird.daemon.services.stage.running.config  # type: ignore[union-attr]
    workspace = running.workspaces[started["bindings"]["workspace"]].path
    config = running.container

    assert host["CapDrop"] == ["ALL"]
    assert not host["CapAdd"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["ReadonlyRootfs"] is True
    assert sorted(host["Tmpfs"]) == ["/run", "/tmp"]
    assert host["NanoCpus"] == int(config.cpus * 1e9)
    assert host["Memory"] == config.memory_mb * MIB
    assert host["PidsLimit"] == config.pids
    assert not any(str(o).startswith("seccomp") for o in host["SecurityOpt"])
    assert host["Privileged"] is False
    assert host["PidMode"] != "host"
    assert host["NetworkMode"] == "choir"
    assert host["IpcMode"] != "host"
    assert not host["Devices"]
    assert not host["DeviceRequests"]
    mounts = {(m["Type"], m["Source"], m["Destination"]) for m in attrs["Mounts"]}
    assert mounts == {
        ("bind", str(workspace), "/workspace"),
        ("bind", str(choird.home.agent_socket("agent-1").parent), "/run/choir"),
        ("bind", str((choird.home.sources / "agents" / "agent-1").resolve()), "/agent-repo"),
    }
    uid = agent_uids(running.agents, config.agent_uid_base, AGENT_UID_SPAN)["agent-1"]
    user = f"{uid}:{uid}" if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}"
    assert attrs["Config"]["User"] == user
    assert not user.startswith("0:")
    assert attrs["Config"]["Labels"]["choir.managed"] == "true"
    assert attrs["Config"]["Labels"]["choir.agent"] == "agent-1"
    assert attrs["Config"]["Labels"]["choir.session"] == started["session_id"]

    code, status_text = await in_container(container, "cat", "/proc/1/status")
    assert code == 0, status_text
    kernel = parse_proc_status(status_text)  # docker-init's; its children share them
    assert int(kernel["CapEff"], 16) == 0
    assert int(kernel["CapBnd"], 16) == 0
    assert kernel["NoNewPrivs"] == "1"
    assert kernel["Seccomp"] == "2"
    assert kernel["Uid"].split() == [user.partition(":")[0]] * 4
    code, output = await in_container(container, "touch", "/etc/choir-was-here")
    assert code != 0
    assert "Read-only file system" in output
    code, output = await in_container(container, "touch", "/tmp/ok", "/run/ok", "/workspace/ok")
    assert code == 0, output

    verified = await choird.client.call("agent.verify", agent_id="agent-1")
    assert verified["ok"], [c for c in verified["checks"] if not c["ok"]]
    assert len(verified["checks"]) == 22  # repo_read_only among them: agent-1 clones its own repo
    assert all("kernel" in c["actual"] for c in verified["checks"][:2])
    status = await choird.client.agent_status("agent-1")
    assert status.verified.ok
    assert status.container == container.id

    shown = await asyncio.to_thread(run_choirctl, choird.home, "agent", "verify", "agent-1")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"agent-1 (container {container.id[:12]}, checked ")
    assert lines[0].endswith("matches the security profile")
    assert len(lines) == 23
    assert all(line.startswith("  pass  ") for line in lines[1:])
    as_json = await asyncio.to_thread(
        run_choirctl, choird.home, "agent", "verify", "agent-1", "--json"
    )
    assert json.loads(as_json.stdout)["ok"] is True
    shown = await asyncio.to_thread(run_choirctl, choird.home, "agent", "status", "agent-1")
    assert "security   matches the profile (checked " in shown.stdout


async def test_chat_then_graceful_stop_leaves_nothing_behind(
    choird: Choird, engine: docker.DockerClient
) -> None:
    started = await choird.start()
    reply = await chat(choird.client, "hello")
    assert reply["text"].startswith("Hello!")
    stopped = await choird.client.agent_stop("agent-1")
    assert (stopped.status, stopped.exit_code) == ("stopped", 0)
    assert await leased(choird.daemon, started["session_id"]) == set()
    await poll_until(lambda: not containers_of(engine, choird.home), within=5)
    lines = [json.loads(line) for line in agent_log_text(choird.home, "agent-1").splitlines()]
    messages = {(line["source"], line["session_id"], line["message"]) for line in lines}
    assert ("agent-1", started["session_id"], "session started") in messages


async def test_a_killed_container_crashes_the_session_and_is_removed(
    choird: Choird, engine: docker.DockerClient
) -> None:
    started = await choird.start()
    await chat(choird.client, "hello")
    await asyncio.to_thread(the_container(engine, choird).kill)

    async def crashed() -> bool:
        row = await session_row(choird.daemon, started["session_id"])
        return row.status == SessionStatus.CRASHED

    await poll_until(crashed, within=5)
    assert await leased(choird.daemon, started["session_id"]) == set()
    await poll_until(lambda: not containers_of(engine, choird.home), within=5)
    assert choird.daemon.runtime is not None
    assert choird.daemon.runtime.running("agent-1") is None

    resumed = await choird.start()
    assert (resumed["session_id"], resumed["resumed"]) == (started["session_id"], True)
    await chat(choird.client, "hello again")
    await choird.client.agent_stop("agent-1")


async def test_a_session_the_reaper_crashes_has_its_container_removed(
    choird: Choird, engine: docker.DockerClient
) -> None:
    started = await choird.start()
    await chat(choird.client, "hello")
    container = the_container(engine, choird)
    await asyncio.to_thread(container.pause)  # hung: no heartbeats, the process still there
    try:
        sessions = choird.daemon.services.sessions  # type: ignore[union-attr]
        assert await sessions.mark_crashed(started["session_id"], "no heartbeat (test)")
        await poll_until(lambda: not containers_of(engine, choird.home), within=10)
    finally:
        for leftover in containers_of(engine, choird.home):
            leftover.remove(force=True)
    assert choird.daemon.runtime is not None
    assert choird.daemon.runtime.running("agent-1") is None
