"""A setuid file made by an exec gives another host user nothing (issue 11 point 1: process
runtime).

choird runs as root here, so agent-1's `choir.exec` runs as host root (in the sandbox: uid 0 of
its user namespace, which is host uid 0) and the workspace is a host directory. The command tries
every way to leave a setuid or setgid program there — `chmod 4755`, `chmod u+s,g+s`, `chmod 2755`,
`install -m 4755`, `open(O_CREAT, 04755)` — and then opens the workspace to everyone
(`chmod 0777 .`), as an agent that owns its workspace can. The test also opens the directories
above it, as if the workspace had been configured under a shared path. Then `nobody` runs each
file from the host's path with `bash -p`: it must still be `nobody` (uid and gid 65534), and no
file in the workspace may carry S_ISUID or S_ISGID — in the bwrap sandbox and unsandboxed.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
from pathlib import Path

import pytest

from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import poll_until
from tests.security.process_agents import SANDBOXES, Sandbox, exec_script, process_agent

pytestmark = pytest.mark.slow

NOBODY = 65534
ATTEMPTS = (
    "cp /bin/bash suid; chmod 4755 suid; chmod u+s,g+s suid; "
    "cp /bin/bash sgid; chmod 2755 sgid; "
    "install -m 4755 /bin/bash installed; "
    'python3 -c \'import os, shutil; fd = os.open("created", os.O_CREAT | os.O_WRONLY, 0o6755); '
    'os.write(fd, open("/bin/bash", "rb").read())\'; '
    "chmod 0777 .; echo attempts-done"
)


def open_path_to(path: Path) -> None:
    """o+x on `path` and every directory above it up to /tmp, as on a shared path."""
    for directory in (path, *path.parents):
        if directory == Path("/tmp"):
            return
        directory.chmod(directory.stat().st_mode | 0o001)


def as_nobody(program: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "--",
            str(program),
            "-p",
            "-c",
            "echo $(id -u) $(id -g)",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def escalations(workspace: Path) -> list[str]:
    """What `nobody` became by running each regular file of the workspace, if not nobody."""
    found = []
    for path in sorted(workspace.iterdir()):
        if not path.is_file() or path.name == "writer.log":
            continue
        mode = path.stat().st_mode
        if mode & (stat.S_ISUID | stat.S_ISGID):
            found.append(f"{path.name} has mode {oct(mode)}")
        ran = as_nobody(path)
        if ran.returncode == 0 and ran.stdout.split() != [str(NOBODY), str(NOBODY)]:
            found.append(f"{path.name} ran as {ran.stdout.strip()}")
    return found


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_nothing_an_exec_leaves_in_the_workspace_runs_as_anyone_but_its_caller(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    script = exec_script(ATTEMPTS, done="attempts-done")
    async with process_agent(
        root, pg_params, script, sandbox=sandbox, monkeypatch=monkeypatch
    ) as agent:
        await agent.start_worker()
        workspace = agent.workspace

        def opened() -> bool:
            return (workspace.stat().st_mode & 0o777) == 0o777

        await poll_until(opened, within=30)  # the command's last step
        await asyncio.to_thread(open_path_to, workspace)
        assert os.access(workspace / "suid", os.X_OK)
        assert await asyncio.to_thread(escalations, workspace) == []
        await agent.client.agent_stop("agent-1")
