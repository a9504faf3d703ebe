"""Issue 11, hole 1: an agent must not hand another host user root through its workspace.

The attack, from a `choir.exec` in the agent's container: copy a shell into /workspace and make
it setuid. Before the fix the container ran as choird's uid (0 here), the workspace was
world-reachable and mounted with setuid honoured, so any local user running the copy got euid 0.
Now the agent runs as a uid of its own, the workspace is private to it (and `$CHOIR_HOME/workspaces`
to the operator), and it is mounted nosuid,nodev — each of these alone stops the attack, and
each is checked on its own here. The home lives in a 0755 directory, as under a Debian /home.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import docker
import pytest

from choir.core.security.mountinfo import mount_at, parse_mountinfo
from tests.runtime.conftest import BUILD_TIMEOUT_S
from tests.security.conftest import NOBODY, Choird, as_nobody, exec_in, the_container

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT_S)]

PLANT = "cp /bin/bash /workspace/suidsh && chmod 4755 /workspace/suidsh && id -u"


@pytest.fixture(autouse=True)
def _root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("playing another host user (setpriv) needs root")


def workspace_of(choird: Choird, started: dict[str, object]) -> Path:
    running = choird.daemon.services.stage.running.config  # type: ignore[union-attr]
    bindings = started["bindings"]
    assert isinstance(bindings, dict)
    return Path(running.workspaces[bindings["workspace"]].path)


async def test_a_setuid_shell_planted_by_the_agent_gives_no_other_user_root(
    choird: Choird, engine: docker.DockerClient
) -> None:
    choird.home.root.parent.chmod(0o755)  # like /home/<operator>: others may traverse
    started = await choird.start()
    container = the_container(engine, choird)
    workspace = workspace_of(choird, started)

    code, output = await exec_in(container, "sh", "-c", PLANT)
    assert code == 0, output  # the agent owns its workspace: the copy itself works
    uid_in_container = int(output.split()[-1])
    assert uid_in_container != 0
    planted = workspace / "suidsh"
    assert planted.stat().st_uid == uid_in_container
    assert planted.stat().st_mode & stat.S_ISUID

    # another user cannot even reach it: $CHOIR_HOME/workspaces and the workspace are private
    reached = as_nobody(str(planted), "-p", "-c", "id -u")
    assert reached.returncode != 0
    assert "Permission denied" in reached.stderr
    assert stat.S_IMODE(choird.home.workspaces.stat().st_mode) == 0o700
    assert stat.S_IMODE(workspace.stat().st_mode) == 0o700
    assert workspace.stat().st_uid == uid_in_container

    # and were the operator to open the directories, the file still gives no privilege:
    # the workspace is mounted nosuid on the host while the agent runs
    choird.home.workspaces.chmod(0o755)
    workspace.chmod(0o755)
    ran = as_nobody(str(planted), "-p", "-c", "id -u")
    assert ran.returncode == 0, ran.stderr
    assert int(ran.stdout) == NOBODY
    await choird.client.agent_stop("agent-1")


async def test_the_workspace_is_nosuid_nodev_inside_and_no_device_can_be_made(
    choird: Choird, engine: docker.DockerClient
) -> None:
    await choird.start()
    container = the_container(engine, choird)

    code, mountinfo = await exec_in(container, "cat", "/proc/self/mountinfo", prints=True)
    assert code == 0, mountinfo
    mount = mount_at(parse_mountinfo(mountinfo), "/workspace")
    assert mount is not None
    assert {"nosuid", "nodev"} <= mount.options
    code, output = await exec_in(container, "mknod", "/workspace/null", "c", "1", "3")
    assert code != 0
    assert "Operation not permitted" in output
    code, output = await exec_in(container, "mknod", "/tmp/null", "c", "1", "3")
    assert code != 0, output
    code, output = await exec_in(container, "id", "-u", prints=True)
    assert (code, output.strip() != "0") == (0, True)
    await choird.client.agent_stop("agent-1")
