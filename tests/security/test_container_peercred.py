"""choird's per-process cap on its agent socket counts connections by their SO_PEERCRED pid, and
the kernel reports a peer's pid as seen from the reader's pid namespace: choird (in the host's)
must see a process in the agent's container by its host pid. Checked on the real agent
container of `test_container_floods`' scene; no flood, no timing budget, so not serial.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

import docker
import pytest

from choir.store.postgres.target import ConnectParams
from tests.runtime.conftest import BUILD_TIMEOUT_S
from tests.security.conftest import exec_in
from tests.security.test_container_floods import docker_scene

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT_S)]

PEERCRED = struct.Struct("3i")
SAY_PID = (
    "import os, socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
    "s.sendall(str(os.getpid()).encode()); s.recv(1)"
)


async def test_choird_sees_container_processes_by_their_host_pids(
    pg_params: ConnectParams, engine: docker.DockerClient
) -> None:
    """Two processes in the agent's container connect to a Unix socket the test listens on in
    the workspace: SO_PEERCRED names each by its host pid (not 0, not its pid in the
    container), as choird's per-process cap needs — the agent's uid as the container has it."""
    async with docker_scene(pg_params, engine) as (scene, container):
        path = scene.workspace / "peer.sock"
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(path))
            path.chmod(0o777)
            listener.listen()
            listener.settimeout(30)
            seen = []
            for _ in range(2):
                talking = asyncio.ensure_future(
                    exec_in(container, "python3", "-c", SAY_PID, "/workspace/peer.sock")
                )
                connection, _ = await asyncio.to_thread(listener.accept)
                with connection:
                    raw = connection.getsockopt(
                        socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size
                    )
                    pid, uid, _ = PEERCRED.unpack(raw)
                    inside = int(connection.recv(32))
                    nspids = namespace_pids(pid)
                    connection.sendall(b".")
                code, output = await talking
                assert code == 0, output
                seen.append((pid, uid, inside, nspids))
        code, uid_inside = await exec_in(container, "id", "-u", prints=True)
        assert code == 0
        for pid, uid, inside, nspids in seen:
            assert pid not in (0, inside), seen
            assert nspids[0] == pid, seen  # the host's pid namespace first…
            assert nspids[-1] == inside, seen  # …the container's last
            assert uid == int(uid_inside), seen
        assert seen[0][0] != seen[1][0]


def namespace_pids(pid: int) -> list[int]:
    """`pid`'s pid in each pid namespace it is in, from the host's down (/proc NSpid)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return [int(n) for n in line.split()[1:]]
    raise AssertionError(f"no NSpid in /proc/{pid}/status")
