"""What the fault scenarios share: choird as a real process on a real home, killed for real.

choird runs as a subprocess (`choird --quiet`, its output in a file beside the home), so a test
can SIGKILL it and start another; agents are whatever that choird starts (the process runtime
unless a test asks for docker). The embedded Postgres of the home is read back through an
`EmbeddedPostgres` that adopts the running server (it never starts or stops one that runs).
`teardown` leaves nothing behind: choird, agents, containers and the server are stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

import psutil

from choir.daemon.agents.ingest import committed_of
from choir.home import ChoirHome
from choir.protocol.log.chain import GENESIS_HASH
from choir.protocol.log.committed import chain_break
from choir.store.events import EventRecord, read_events
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import connect
from choir.store.postgres.postmaster import postmaster_pid, stop_postmaster
from choir.store.postgres.target import DEFAULT_DATABASE, ConnectParams
from tests.docker_support import socket_refused
from tests.harness.processes import BIN, Choird, environment, run_choirctl
from tests.harness.waits import wait_for

IN_CONTAINER_PORT: Final = 18431
"""Where a docker scenario's model listens: the agent container's own loopback."""


def spawn_choird(home: ChoirHome, *args: str, **env: str) -> Choird:
    """`choird --quiet` for `home` with `env` added (e.g. CHOIR_FAILPOINTS), ready: its own
    "choird ready" logged (a restarted choird's log already holds the previous one's)."""
    offset = log_size(home.choird_log)
    stderr = home.root.parent / f"choird-{time.monotonic_ns()}.stderr"
    with stderr.open("wb") as sink:
        process = subprocess.Popen(
            [str(BIN / "choird"), "--quiet", *args],
            env=environment(CHOIR_HOME=str(home.root), **env),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            start_new_session=True,
        )
    choird = Choird(process, stderr, home.choird_log)
    wait_for(lambda: ready_since(choird, offset), within=60, every=0.02)
    return choird


def log_size(path: Path) -> int:
    """Where `path` ends now (0 when it does not exist)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def ready_since(choird: Choird, offset: int) -> bool:
    """Whether choird logged "choird ready" past `offset` of its log; fails if it exited."""
    if choird.process.poll() is not None:
        raise AssertionError(f"choird exited {choird.process.returncode}:\n{choird.stderr_text()}")
    try:
        with choird.log.open("rb") as log:
            log.seek(offset if log.seek(0, 2) >= offset else 0)  # shorter: archived meanwhile
            return b"choird ready" in log.read()
    except FileNotFoundError:
        return False


def kill9(choird: Choird) -> None:
    """SIGKILL choird (not its agents: they live in their own sessions) and reap it."""
    choird.process.send_signal(signal.SIGKILL)
    choird.process.wait(timeout=10)


def choirctl(home: ChoirHome, *args: str) -> subprocess.CompletedProcess[str]:
    return run_choirctl(home, *args)


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout)


def stored_events(
    home: ChoirHome, session_id: str, params: ConnectParams | None = None
) -> list[EventRecord]:
    """The session's events in Postgres at `params`, else in the home's embedded server (the
    running one, adopted). Blocking: call it from a thread in async tests."""

    async def read() -> list[EventRecord]:
        where = params
        if where is None:
            server = EmbeddedPostgres(home.pgdata, stop_on_exit=False)
            await asyncio.to_thread(server.start)
            where = server.params.with_database(DEFAULT_DATABASE)
        conn = await connect(where)
        try:
            return await read_events(conn, session_id, limit=100_000)
        finally:
            await conn.close()

    return asyncio.run(read())


def embedded_params(home: ChoirHome) -> ConnectParams:
    """Where the home's embedded Postgres serves choir's database (the running server)."""
    server = EmbeddedPostgres(home.pgdata, stop_on_exit=False)
    server.start()  # adopts the running server
    return server.params.with_database(DEFAULT_DATABASE)


def assert_chain(records: list[EventRecord]) -> None:
    """A gap-free prefix from rev 1 whose every hash is recomputed and linked."""
    committed = [committed_of(record) for record in records]
    assert [event.rev for event in committed] == list(range(1, len(committed) + 1))
    problem = chain_break(committed, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True)
    assert problem is None, problem


def agent_processes(home: ChoirHome) -> list[psutil.Process]:
    """choir-agent processes of this home (the process runtime's)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if any(Path(arg).name == "choir-agent" for arg in cmdline[:2]) and any(
            str(home.root) in arg for arg in cmdline
        ):
            found.append(process)
    return found


def teardown(home: ChoirHome, choird: Choird | None) -> None:
    """Stop everything the scenario left: choird, agents, containers, the embedded server."""
    if choird is not None and choird.process.poll() is None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            choird.process.terminate()
            choird.process.wait(timeout=40)
        if choird.process.poll() is None:
            kill9(choird)
    for process in agent_processes(home):
        with contextlib.suppress(psutil.NoSuchProcess):
            os.killpg(process.pid, signal.SIGKILL)
    _remove_containers(home)
    if postmaster_pid(home.pgdata) is not None:
        stop_postmaster(home.pgdata, fast_s=10)


def _remove_containers(home: ChoirHome) -> None:
    if socket_refused() is not None:  # no engine: nothing to remove (and docker-py would leak)
        return
    try:
        import docker

        client = docker.from_env(timeout=10)
    except Exception:
        return
    try:
        for container in client.containers.list(
            all=True, filters={"label": f"choir.home={home.root}"}
        ):
            with contextlib.suppress(Exception):
                container.remove(force=True)
    finally:
        client.close()


def serve_model_in(container: str) -> None:
    """The scripted model inside the agent's container, on its loopback (loopback only)."""
    program = (
        "import asyncio\n"
        "from pathlib import Path\n"
        "from choir.scripted import ScriptedModelServer, load_script\n"
        "async def main():\n"
        f"    server = ScriptedModelServer(load_script(Path('/workspace/.script.json')),"
        f" port={IN_CONTAINER_PORT})\n"
        "    await server.start()\n"
        "    await asyncio.Event().wait()\n"
        "asyncio.run(main())\n"
    )
    subprocess.run(
        ["docker", "exec", "-d", container, "/opt/choir/bin/python", "-c", program],
        check=True,
        capture_output=True,
        timeout=60,
    )
    probe = (
        "import socket,time\n"
        "for _ in range(100):\n"
        "    try:\n"
        f"        socket.create_connection(('127.0.0.1', {IN_CONTAINER_PORT}), 1).close(); break\n"
        "    except OSError: time.sleep(0.1)\n"
        "else: raise SystemExit(1)\n"
    )
    subprocess.run(
        ["docker", "exec", container, "/opt/choir/bin/python", "-c", probe],
        check=True,
        capture_output=True,
        timeout=60,
    )


async def next_health(
    feed: AsyncIterator[dict[str, Any]],
    wanted: Callable[[dict[str, Any]], bool],
    *,
    within: float = 30,
) -> dict[str, Any]:
    """The next `health` item of the operator feed whose view is `wanted`; fails after `within`
    s."""
    async with asyncio.timeout(within):
        while True:
            item = await anext(feed)
            if item["kind"] == "health" and wanted(item["data"]):
                data: dict[str, Any] = item["data"]
                return data
