"""`agent verify` (and the check at every start) sees what the kernel and the host see.

- The new items pass on a well-made container, with the kernel's own word: the container's
  uid is not 0, its /workspace is nosuid,nodev in its own mount table, the workspace directory
  is the agent's and private, no mount holds a socket, egress rules are in place.
- A Unix socket of some host service inside the workspace (issue 11, hole 6: a mount that
  exposes a socket) fails `no_socket_exposed` — while running, and at start, where the
  container is refused and nothing is left behind. Sockets the agent made itself do not count.
- A choird whose nosuid bind the engine cannot see (it runs in a private mount namespace, as
  under systemd's PrivateMounts=) gets its container refused at start: the check, not the
  intention, decides.
- The agent socket's host path does not show in the container's /proc/net/unix (hole 10).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker
import pytest

from choir.core.security.mountinfo import Mount, mount_at, parse_mountinfo
from choir.errors import ChoirError
from choir.home import ChoirHome
from tests.harness.daemons import poll_until
from tests.harness.processes import BIN, environment, run_choirctl, wait_until_ready
from tests.harness.processes import Choird as ChoirdProcess
from tests.runtime.conftest import BUILD_TIMEOUT_S, chat
from tests.security.conftest import Choird, containers_of, exec_in, the_container

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT_S)]

NEW_ITEMS = (
    "user_not_root",
    "workspace_nosuid_nodev",
    "workspace_private",
    "no_socket_exposed",
    "egress_filtered",
)


@pytest.fixture(autouse=True)
def _root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("the agent's own uid, nosuid mounts and egress rules need a root choird")


def default_workspace(home: ChoirHome) -> Path:
    return home.workspaces / "default"


@contextmanager
def host_service_socket(path: Path) -> Iterator[socket.socket]:
    """A listening Unix socket at `path`, owned by root: some host service's."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        server.listen(1)
        yield server
    finally:
        server.close()
        path.unlink(missing_ok=True)


def own_mounts() -> list[Mount]:
    return parse_mountinfo(Path("/proc/self/mountinfo").read_text())


def items(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["item"]: check for check in report["checks"]}


async def test_the_new_items_pass_with_the_kernels_word_and_a_socket_fails_them(
    choird: Choird, engine: docker.DockerClient
) -> None:
    await choird.start()
    report = await choird.client.call("agent.verify", agent_id="agent-1")
    checks = items(report)
    assert report["ok"], [c for c in report["checks"] if not c["ok"]]
    for item in NEW_ITEMS:
        assert checks[item]["ok"], checks[item]
        assert checks[item]["required"]
    assert "kernel Uid=" in checks["user_not_root"]["actual"]
    assert "nosuid" in checks["workspace_nosuid_nodev"]["actual"]
    assert checks["workspace_private"]["actual"].endswith("mode 0700")

    planted = default_workspace(choird.home) / "service.sock"
    with host_service_socket(planted):
        report = await choird.client.call("agent.verify", agent_id="agent-1")
    assert not report["ok"]
    assert [c["item"] for c in report["checks"] if not c["ok"]] == ["no_socket_exposed"]
    assert f"socket {planted}" in items(report)["no_socket_exposed"]["actual"]
    await choird.client.agent_stop("agent-1")


async def test_a_host_socket_in_the_workspace_refuses_the_start_and_the_agents_own_do_not(
    choird: Choird, engine: docker.DockerClient
) -> None:
    workspace = default_workspace(choird.home)
    with host_service_socket(workspace / "service.sock"):
        with pytest.raises(ChoirError) as refused:
            await choird.start()
        assert "no_socket_exposed: socket" in refused.value.message
        assert str(workspace / "service.sock") in refused.value.message
    assert not containers_of(engine, choird.home)
    assert mount_at(own_mounts(), str(workspace.resolve())) is None  # the nosuid bind is undone

    await choird.start()
    container = the_container(engine, choird)
    own = "import socket; socket.socket(socket.AF_UNIX).bind('/workspace/own.sock')"
    code, output = await exec_in(container, "/opt/choir/bin/python", "-c", own)
    assert code == 0, output
    await choird.client.agent_stop("agent-1")
    await choird.start()  # the agent's own socket (its uid's) exposes nothing of the host
    await choird.client.agent_stop("agent-1")


async def test_the_agent_sockets_host_path_is_not_in_the_containers_proc_net_unix(
    choird: Choird, engine: docker.DockerClient
) -> None:
    await choird.start()
    await chat(choird.client, "hello")  # the agent is connected to its socket
    container = the_container(engine, choird)
    code, listing = await exec_in(container, "cat", "/proc/net/unix", prints=True)
    assert code == 0, listing
    assert "/proc/self/fd/" in listing  # the agent's connection, as the kernel names it
    assert str(choird.home.root) not in listing
    assert "socks" not in listing
    await choird.client.agent_stop("agent-1")


@pytest.fixture
def private_mounts_choird(home: ChoirHome) -> Iterator[ChoirdProcess]:
    """choird in a mount namespace of its own: its mounts are invisible to dockerd."""
    stderr = home.root.parent / "choird.stderr"
    with stderr.open("wb") as sink:
        process = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", str(BIN / "choird")],
            env=environment(
                CHOIR_HOME=str(home.root), CHOIR_BUILD_CACHE=os.environ["CHOIR_BUILD_CACHE"]
            ),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )
    choird = ChoirdProcess(process, stderr, home.choird_log)
    try:
        wait_until_ready(choird, timeout=60)
        yield choird
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


async def test_a_workspace_the_engine_sees_without_nosuid_is_refused_at_start(
    home: ChoirHome, engine: docker.DockerClient, private_mounts_choird: ChoirdProcess
) -> None:
    started = await asyncio.to_thread(
        run_choirctl, home, "agent", "start", "agent-1", "--dm", "console"
    )
    assert started.returncode != 0, started.stdout
    assert "workspace_nosuid_nodev: kernel: " in started.stderr
    assert "nosuid" not in started.stderr.split("workspace_nosuid_nodev: kernel: ")[1].split(";")[0]
    await poll_until(lambda: not containers_of(engine, home), within=10)
