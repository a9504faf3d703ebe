"""Agents ride out a choird restart (issue 12 point 5): adoption at start instead of removal.

A killed or restarted choird used to remove every agent a previous run left and crash its
session (§6.2 steps 6-7), discarding whatever the agent did meanwhile. Now, at start, each agent
still running — a container labelled with this home (`choir.home`, `choir.session`), or a
process recorded here at its start — whose session is still active and whose lease has not
expired (a heartbeat within `crash_detection_threshold_ms`) is adopted: watched again, its log
followed again, its socket listening again. It never stopped: it buffered its commits and kept
retrying, so it reconnects with its lease and replicates what it did while choird was away.
Everything else is removed as before, and every active session without an adopted agent is
marked crashed (its leases released): "its agent no longer runs", or "its lease expired while
choird was down" for an agent that was found alive too late — that one is stopped — or, for an
agent that gave its start up because choird stayed away too long, what its log says of it
("its agent gave its start up: choird was unreachable for …", `choir.logs.last_words`).

A process is recognised by its pid *and* its start time (`process.json` beside its `/choir`
tree), so a pid the kernel gave to another program is never mistaken for the agent. The start
time compared is the kernel's own — clock ticks after boot (`/proc/<pid>/stat`) — never a wall-
clock time: psutil's `create_time` adds the boot time as the wall clock puts it *now*, so an NTP
step or a paused VM between the agent's start and the adoption shifted it, and a live agent was
taken for a stranger: its session crashed ("its agent no longer runs") and the agent was killed.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final, Protocol

import psutil

from choir.daemon.runtimes.base import Adopted, KeepFn, OpenSocket, RunningAgent
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import utc_now
from choir.home import ChoirHome
from choir.logs import get_logger
from choir.store.sessions import SessionRow

log = get_logger("choird.runtime")

RECORD: Final = "process.json"
START_TIME_TOLERANCE_S: Final = 0.05
"""For a record without `start_ticks` (written before they were): how far its wall-clock start
time may be from the process's."""
POLL_S: Final = 0.5
"""How often an adopted process is checked when the kernel offers no pidfd."""


class Adopter(Protocol):
    """A runtime that can take over the agents a previous choird on its home started."""

    async def adopt(self, keep: KeepFn, open_socket: OpenSocket) -> Adopted: ...


@dataclass(frozen=True)
class Adoption:
    adopted: list[RunningAgent]
    removed: list[str]
    crashed: list[SessionRow]


async def adopt_agents(
    runtime: Adopter,
    sessions: SessionService,
    open_socket: OpenSocket,
    *,
    threshold_ms: int,
    now: datetime | None = None,
) -> Adoption:
    """Startup: adopt the live agents of active sessions whose lease holds; crash the rest."""
    now = now or utc_now()
    active = {row.session_id: row for row in await sessions.active()}
    cutoff = now - timedelta(milliseconds=threshold_ms)
    found: set[str] = set()

    def keep(agent_id: str, session_id: str) -> bool:
        row = active.get(session_id)
        if row is None or row.agent_id != agent_id:
            return False
        found.add(session_id)
        return row.last_heartbeat_at is not None and row.last_heartbeat_at >= cutoff

    report = await runtime.adopt(keep, open_socket)
    adopted = {agent.session_id for agent in report.agents}
    crashed = []
    for session_id, row in active.items():
        if session_id in adopted:
            continue
        failure = report.start_failures.get(session_id)
        reason = crash_reason(found=session_id in found, failure=failure, threshold_ms=threshold_ms)
        if await sessions.mark_crashed(session_id, reason):
            crashed.append(row)
    for agent in report.agents:
        log.info(
            "agent adopted",
            fields={"agent_id": agent.agent_id, "session_id": agent.session_id, "pid": agent.pid},
        )
    return Adoption(report.agents, report.removed, crashed)


def crash_reason(*, found: bool, failure: str | None, threshold_ms: int) -> str:
    """Why an active session whose agent was not adopted crashed: `found` alive too late, or
    gone — having given its start up (`failure`, from its log), or without a word."""
    if found:
        return (
            f"its lease expired while choird was down (no heartbeat for more than {threshold_ms}"
            " ms); its agent was stopped"
        )
    if failure is not None:
        return f"its agent gave its start up: {failure}"
    return "its agent no longer runs"


# -- the process runtime's records -------------------------------------------------------------


@dataclass(frozen=True)
class ProcessRecord:
    """What identifies an agent process across choird restarts."""

    agent_id: str
    session_id: str
    pid: int
    started: float
    """Its start time on the wall clock (psutil `create_time`): what older records hold."""
    workspace: str = ""
    """The workspace's host path (what `agent verify` reads the sandbox's binds against)."""
    start_ticks: int | None = None
    """Its start in clock ticks after boot, as the kernel keeps it: immune to clock changes."""

    def alive(self) -> bool:
        """Whether `pid` is still this agent: same start time, choir-agent, not a zombie."""
        try:
            process = psutil.Process(self.pid)
            if self.start_ticks is not None:
                same = start_ticks(self.pid) == self.start_ticks
            else:
                same = abs(process.create_time() - self.started) <= START_TIME_TOLERANCE_S
            if not same:
                return False  # the pid now belongs to another program
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
            # the wrapper (bwrap or the subreaper) names choir-agent among its arguments
            return any(Path(arg).name == "choir-agent" for arg in process.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            return False


def start_ticks(pid: int) -> int:
    """When `pid` started, in clock ticks after boot (field 22 of `/proc/<pid>/stat`); OSError
    when it is gone. The command name (field 2) may hold spaces and parentheses: the fields
    are counted after its closing one."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rpartition(b")")[2].split()
    return int(fields[19])


def record_path(home: ChoirHome, agent_id: str) -> Path:
    return home.root / "runtime" / agent_id / RECORD


def record_process(
    home: ChoirHome, agent_id: str, session_id: str, pid: int, workspace: Path | None = None
) -> None:
    """Note a just-started agent process, so a later choird can adopt it."""
    try:
        started = psutil.Process(pid).create_time()
        ticks = start_ticks(pid)
    except (psutil.NoSuchProcess, OSError):
        return  # it exited at once: its watcher reports that
    path = record_path(home, agent_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "agent_id": agent_id,
        "session_id": session_id,
        "pid": pid,
        "started": started,
        "start_ticks": ticks,
        "workspace": str(workspace or ""),
    }
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as sink:
        json.dump(data, sink)
    os.replace(temporary, path)


def forget_process(home: ChoirHome, agent_id: str, pid: int) -> None:
    """Drop the record of `pid` (it exited), unless a newer process replaced it."""
    path = record_path(home, agent_id)
    record = _read(path)
    if record is not None and record.pid == pid:
        path.unlink(missing_ok=True)


def recorded_processes(home: ChoirHome) -> list[ProcessRecord]:
    """Every process record under `$CHOIR_HOME/runtime` (some may be stale)."""
    runtime = home.root / "runtime"
    paths = sorted(runtime.glob(f"*/{RECORD}")) if runtime.is_dir() else []
    return [record for path in paths if (record := _read(path)) is not None]


def _read(path: Path) -> ProcessRecord | None:
    try:
        data = json.loads(path.read_text())
        return ProcessRecord(
            str(data["agent_id"]),
            str(data["session_id"]),
            int(data["pid"]),
            float(data["started"]),
            str(data.get("workspace", "")),
            None if data.get("start_ticks") is None else int(data["start_ticks"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class AdoptedProcess:
    """An agent process this choird (this image of it) did not start: its pid, and an awaitable
    exit. The exit code of a process that is not our child is unknown (None)."""

    def __init__(self, record: ProcessRecord) -> None:
        self.pid = record.pid
        self._record = record
        self._code: int | None = None
        """The exit code once reaped: a second waiter (a kill beside the watcher) gets it too."""

    async def wait(self) -> int | None:
        """Until the process exits; its exit code when it is this choird's own child."""
        await self._exited()
        return self._reaped()

    def _reaped(self) -> int | None:
        """The exit code of a process that is this choird's child — a choird that re-executed
        itself in place (`choird.restart`) keeps its agents as children —, reaped so no zombie
        stays; None for a process that is not (a previous choird's, which was killed)."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return self._code
        if pid:
            self._code = os.waitstatus_to_exitcode(status)
        return self._code

    async def _exited(self) -> None:
        try:
            pidfd = os.pidfd_open(self.pid)
        except OSError:
            await self._poll()
            return
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()

        def readable() -> None:  # the process exited (the pidfd stays readable from then on)
            if not exited.done():
                exited.set_result(None)

        try:
            loop.add_reader(pidfd, readable)
            try:
                if self._record.alive():  # it may have exited before the reader was added
                    await exited
            finally:
                loop.remove_reader(pidfd)
        finally:
            os.close(pidfd)

    async def _poll(self) -> None:
        # Without a pidfd nothing signals the exit of a process that is not our child.
        while self._record.alive():  # noqa: ASYNC110
            await asyncio.sleep(POLL_S)
