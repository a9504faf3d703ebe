"""Connection and frame floods from inside the agent's own sandbox (issue 11, hole 3).

`test_socket_floods` floods choird's sockets from host processes. Here the flood comes from where
a prompt-injected tool runs: a `docker exec` in the real agent container (as the agent's uid, on
/run/choir/choir.sock), and a `choir.exec` that the scripted model makes the real agent run in
its bwrap sandbox on the process runtime. choird is a process of its own limited to 128 open
files; the agent heartbeats every 300 ms. The flood (`sandbox_flood`) first sends frames: 8
connections written for 2 s without a byte read back, and oversized, invalid, deeply nested,
random and absurdly prefixed frames; then three processes open up to 200 connections each and
hold them while two more connect and hang up as fast as they can for 5 s.

While it runs, `choirctl status` is run over and over (each must answer within 10 s), the
agent's heartbeats are read from Postgres (no gap over 3 s, the session active throughout), a
connection the test opened to the agent socket before the flood sends a request every 20 ms
(each answered within 3 s: choird's event loop is not held) and choird's open descriptors are
counted every 20 ms (never more than the agent socket's cap above their number before). Each
flooding process holds at most the per-process cap, all of them at most the socket's cap, the
rest are closed at once; after the flood everything is as before. `pytest -s` prints the
figures. (The reconnecting flood held choird's event loop for up to 0.8 s at a stretch before
the accept loop yielded between accepts: `tests/transport/test_acceptor.py` has that exactly.)

The per-process cap counts by the SO_PEERCRED pid, which choird sees by a container process's
host pid: `test_container_peercred` checks that on this module's scene.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import docker
import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from choir.transport.limits import AGENT_SOCKET_LIMITS
from tests.harness.daemons import poll_until
from tests.harness.homes import (
    external_postgres,
    make_home,
    read_config,
    scripted_home,
    short_root,
    write_config,
)
from tests.harness.processes import run_choirctl
from tests.runtime.conftest import BUILD_TIMEOUT_S, containers_of
from tests.security import sandbox_flood
from tests.security.process_agents import exec_script, require_bwrap
from tests.security.test_socket_floods import Running, running_choird

# serial: a flood of connections and open files; under parallel load the recovery budgets
# measure the other workers, not choird.
pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(BUILD_TIMEOUT_S)]

OPEN_FILES = 128
"""choird's soft and hard limit (inherited on the process runtime by the agent and its tools:
there a flooding process stops at its own limit)."""
FLOOD = ("unread:2", "frames:3", "hold:200", "hold:200", "hold:200", "churn:5", "churn:5")
STATUS_WITHIN_S = 10.0
HEARTBEAT_MS = 300
HEARTBEAT_GAP_S = 3.0
"""Ten heartbeats missed; choird declares a session crashed after 10 s without one."""
FD_SLACK = 6
"""Descriptors beyond the agent socket's cap choird may hold for a moment during the flood: the
connection it accepted only to refuse it, `choirctl status`'s, a database connection, and the
two memory's own work may open meanwhile (the session's BM25 pre-warm and recall warm-up start
with it: a pool connection, the embedding model's files)."""
FLOOD_WITHIN_S = 60.0


@dataclass
class Watch:
    """What was seen while a flood ran."""

    status_s: list[float] = field(default_factory=list)
    """How long each `choirctl status` took."""
    status_failures: list[str] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    heartbeats: list[datetime] = field(default_factory=list)
    session_states: set[str] = field(default_factory=set)
    round_trips: list[float] = field(default_factory=list)
    """Seconds a request on the agent socket took to be answered, one every 20 ms."""

    def heartbeat_gap(self) -> float:
        """The longest time between two heartbeats seen (a heartbeat every 300 ms)."""
        beats = sorted(set(self.heartbeats))
        return max(((b - a).total_seconds() for a, b in pairwise(beats)), default=math.inf)

    def figures(self) -> dict[str, float]:
        return {
            "fds_max": max(self.fds),
            "status_runs": len(self.status_s),
            "status_max_s": round(max(self.status_s), 2),
            "heartbeat_gap_s": round(self.heartbeat_gap(), 2),
            "probes": len(self.round_trips),
            "probe_max_s": round(max(self.round_trips), 3),
        }


@dataclass
class Scene(Running):
    """choird, its one agent, and where the agent's sandbox sees its socket."""

    workspace: Path
    """The agent's workspace on the host: the flood's working directory."""
    socket: str
    """choird's agent socket as a process in the sandbox names it."""

    @property
    def host_socket(self) -> Path:
        return self.home.agent_socket("agent-1")

    @property
    def pid(self) -> int:
        return self.choird.process.pid

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def agent_state(self) -> str:
        shown = run_choirctl(self.home, "agent", "status", "agent-1", "--json")
        assert shown.returncode == 0, shown.stderr
        state: str = json.loads(shown.stdout)["state"]
        return state


@contextmanager
def sampled(every_s: float, sample: Callable[[], None]) -> Iterator[None]:
    """`sample()` every `every_s` in a thread until the block ends."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            sample()
            stop.wait(every_s)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(STATUS_WITHIN_S + 5)


@contextmanager
def probing(path: Path) -> Iterator[Callable[[], float]]:
    """A connection to the agent socket, taken before the flood; each call of what it yields
    sends a request and returns how long the answer took (choird's event loop lag, mostly)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(STATUS_WITHIN_S)
        sock.connect(str(path))
        sent = 0

        def probe() -> float:
            nonlocal sent
            sent += 1
            began = time.monotonic()
            try:
                sock.sendall(sandbox_flood.request(f"probe-{sent}"))
                answer = sandbox_flood.read_frame(sock)
            except OSError:
                return math.inf
            if answer is None or answer.get("request_id") != f"probe-{sent}":
                return math.inf
            return time.monotonic() - began

        yield probe


@asynccontextmanager
async def watching(scene: Scene) -> AsyncIterator[Watch]:
    """choird's descriptors, `choirctl status` and the heartbeats, watched for the block."""
    watch = Watch()

    def status() -> None:
        took, failure = scene.status()
        watch.status_s.append(took)
        if failure is not None:
            watch.status_failures.append(failure)

    async def heartbeats() -> None:
        while True:
            state, beat = await scene.last_heartbeat()
            watch.session_states.add(state)
            watch.heartbeats.append(beat)
            await asyncio.sleep(0.1)

    reading = asyncio.create_task(heartbeats())
    try:
        with (
            probing(scene.host_socket) as probe,
            sampled(0.02, lambda: watch.fds.append(scene.fds())),
            sampled(0.2, status),
            sampled(0.02, lambda: watch.round_trips.append(probe())),
        ):
            yield watch
    finally:
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)


async def flood(scene: Scene, run: Callable[[], Awaitable[object]]) -> list[dict[str, Any]]:
    """The flood run by `run` in the agent's sandbox, watched and checked; its reports.

    The connections stay held until the checks made while they are have passed."""
    for name in ("flood-report.json", "flood-stop", "flood-ended"):
        (scene.workspace / name).unlink(missing_ok=True)
    shutil.copyfile(sandbox_flood.__file__, scene.workspace / "sandbox_flood.py")
    await scene.heartbeats_go_on()
    baseline = max(scene.fds() for _ in range(20))
    quiet_status, failure = await asyncio.to_thread(scene.status)
    assert failure is None, failure

    async with watching(scene) as watch:
        running = asyncio.ensure_future(run())
        try:
            reports = await flood_file(scene.workspace / "flood-report.json", running)
            # every connection the flood could keep is held now
            assert await asyncio.to_thread(scene.agent_state) == "running"
            await scene.heartbeats_go_on()
            (scene.workspace / "flood-stop").touch()
            await flood_file(scene.workspace / "flood-ended", running)
            await asyncio.wait_for(running, FLOOD_WITHIN_S)
        finally:
            (scene.workspace / "flood-stop").touch()
            running.cancel()
    figures = {"fds_before": baseline, "status_quiet_s": round(quiet_status, 2), **watch.figures()}
    print("container flood:", json.dumps({**figures, "reports": reports}))  # pytest -s shows it
    check_watch(watch, baseline)

    # after: choird holds nothing of the flood and serves as before
    await poll_until(lambda: scene.fds() <= baseline + 2, within=5)
    _, failure = await asyncio.to_thread(scene.status)
    assert failure is None, failure
    await scene.heartbeats_go_on()
    assert await asyncio.to_thread(scene.agent_state) == "running"
    assert "refusing connections" in scene.log()
    return reports


async def flood_file(path: Path, running: asyncio.Future[object]) -> list[dict[str, Any]]:
    """The JSON in `path` once the flood writes it; fails if the flood ends first."""

    def written() -> bool:
        if running.done() and not path.exists():
            raise AssertionError(f"the flood ended without {path.name}: {running.result()}")
        return path.exists()

    await poll_until(written, within=FLOOD_WITHIN_S, every=0.1)
    text = await asyncio.to_thread(path.read_text)
    reports: list[dict[str, Any]] = json.loads(text) if text else []
    return reports


def check_watch(watch: Watch, fds_before: int) -> None:
    """choird answered the operator and the agent throughout, within its descriptors."""
    assert watch.status_failures == [], watch.status_failures
    assert watch.session_states == {"active"}
    assert watch.heartbeat_gap() < HEARTBEAT_GAP_S
    assert max(watch.round_trips) < HEARTBEAT_GAP_S
    assert max(watch.fds) <= fds_before + AGENT_SOCKET_LIMITS.max_connections + FD_SLACK


def check_reports(reports: list[dict[str, Any]]) -> None:
    """Each kind of flood met its cap or its answer."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        by_kind.setdefault(report["kind"], []).append(report)
    assert sorted(by_kind) == ["churn", "frames", "hold", "unread"], reports

    per_process = AGENT_SOCKET_LIMITS.max_connections_per_peer
    assert per_process is not None
    held = [r["held"] for r in by_kind["hold"]]
    connected = sum(r["connected"] for r in by_kind["hold"])
    assert all(h <= per_process for h in held), held
    assert per_process < sum(held) <= AGENT_SOCKET_LIMITS.max_connections, held
    # far more connections than choird has files for were made; all but those held were
    # closed at once (a flooding process stops early only when out of files itself)
    assert connected > 2 * OPEN_FILES, reports
    assert all(r["connected"] == 200 or r["out_of_files"] for r in by_kind["hold"]), reports
    assert all(r["connected"] > 0 for r in by_kind["churn"]), reports

    (unread,) = by_kind["unread"]
    assert unread["connections"] > 0
    assert all(taken < 2 << 20 for taken in unread["taken"]), unread["taken"]

    (frames,) = by_kind["frames"]
    assert frames["answers"] == ["err", "err", "err", "res"] * 3, frames
    assert frames["garbage"] == ["err"], frames
    assert frames["after_garbage"] == "res", frames
    assert frames["absurd_prefix"] == ["err", "closed"], frames


# -- from the agent's container ----------------------------------------------------------------


@asynccontextmanager
async def docker_scene(
    pg_params: ConnectParams, engine: docker.DockerClient
) -> AsyncIterator[tuple[Scene, Any]]:
    """choird on the docker runtime (a process of its own), agent-1 running; the container."""
    with short_root("cf-") as root:
        home = make_home(
            root, postgres=external_postgres(pg_params), heartbeat_interval_ms=HEARTBEAT_MS
        )
        (root / "ws-other").mkdir()
        try:
            with running_choird(home, (OPEN_FILES, OPEN_FILES), "--runtime", "docker") as choird:
                async with await ChoirClient.connect(home, call_timeout=BUILD_TIMEOUT_S) as client:
                    await client.agent_start("agent-1", {"dm": "console"})
                    workspace = Path(read_config(home)["workspaces"]["default"]["path"])
                    scene = Scene(home, choird, pg_params, workspace, "/run/choir/choir.sock")
                    (container,) = containers_of(engine, home)
                    yield scene, container
                    await client.agent_stop("agent-1")
        finally:
            for container in containers_of(engine, home):
                container.remove(force=True)


async def test_a_flood_from_the_agent_container_wedges_nothing(
    pg_params: ConnectParams, engine: docker.DockerClient
) -> None:
    async with docker_scene(pg_params, engine) as (scene, container):

        def run() -> object:
            command = ["python3", "sandbox_flood.py", scene.socket, *FLOOD]
            done = container.exec_run(command, workdir="/workspace")
            output = done.output.decode(errors="replace")
            assert done.exit_code == 0, output
            return output

        reports = await flood(scene, lambda: asyncio.to_thread(run))
        check_reports(reports)


# -- from a choir.exec in the bwrap sandbox ----------------------------------------------------


async def test_a_flood_from_a_choir_exec_in_the_bwrap_sandbox_wedges_nothing(
    pg_params: ConnectParams,
) -> None:
    """The real attack path: the model asks for a `choir.exec` that runs the flood; choird
    (its own process) runs the agent in bwrap, whose socket directory is at its host path."""
    require_bwrap()
    with short_root("cf-") as root:
        socket_path = ChoirHome(root / "h").agent_socket("agent-1")
        command = f"python3 sandbox_flood.py {socket_path} {' '.join(FLOOD)}"
        async with ScriptedModelServer(exec_script(command, done='"kind"')) as model:
            home = scripted_home(root, pg_params, model.url)
            data = read_config(home)
            data["heartbeat_interval_ms"] = HEARTBEAT_MS
            write_config(home, data)
            (root / "ws-other").mkdir(exist_ok=True)
            workspace = Path(data["workspaces"]["default"]["path"])
            with running_choird(home, (OPEN_FILES, OPEN_FILES), "--runtime", "process") as choird:
                async with await ChoirClient.connect(home) as client:
                    started = await client.agent_start("agent-1", {"dm": "console"})
                    assert (started.runtime, started.sandboxed) == ("process", True)
                    scene = Scene(home, choird, pg_params, workspace, str(socket_path))

                    async def run() -> object:
                        await client.chat_send("agent-1", "please start the worker")
                        ended = workspace / "flood-ended"  # when the exec ends
                        return await poll_until(ended.exists, within=FLOOD_WITHIN_S, every=0.1)

                    reports = await flood(scene, run)
                    check_reports(reports)
                    await client.agent_stop("agent-1")
