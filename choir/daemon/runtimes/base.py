"""Agent runtimes behind one interface: `docker` (sandboxed) and `process` (unsandboxed).

The lifecycle verbs (`daemon.operator.agents.lifecycle`) know an agent runtime only through
`AgentRuntime`: prepare what the agent runs (an image, or a merged `/choir` tree), start it for
a started session, stop it gracefully, list what runs, clean up after a previous choird, and
check a running agent against the security profile (§15.3). Everything engine-specific stays
behind it, so a Kubernetes runtime (design notes "Where users outgrow one host") is one more
class.

Both runtimes share the exit rule of §13.1: an agent that exits while its session is still
active did not call TERMINATE_SELF, so the session is marked crashed — which releases its
leases at once — and whatever is left of the agent (a container) is removed.

Which runtime choird uses (`select_runtime`): `--runtime` on choird's command line, else
config.json's `container.runtime`; `auto` means docker when an engine answers, else process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from choir.config import ChoirConfig, Tunables
from choir.core.security.profile import ProfileReport
from choir.daemon.sessions.outage import exit_words
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import StartedSession
from choir.home import ChoirHome
from choir.logs import archive_agent_log, get_logger
from choir.protocol import ShutdownPush, VersionInfo

log = get_logger("choird.runtime")

FLUSH_GRACE_S: Final = 5.0
"""What a graceful stop may take beyond its lanes' safe point and its summary: the final flush
and TERMINATE_SELF."""
TERM_GRACE_S: Final = 5.0
"""How long after SIGTERM before SIGKILL."""

RuntimeName = Literal["docker", "process"]
RuntimeChoice = Literal["auto", "docker", "process"]
StopReason = Literal["stop", "restart", "update", "workspace_reset"]
"""Why an agent is stopped (ShutdownPush.reason); restart and update resume its session."""
PushFn = Callable[[str, dict[str, Any]], object]
"""Send a ServerPush (JSON form) to a session's agent: the daemon's `PushHub.push`."""


@dataclass(frozen=True, slots=True)
class GracefulStop:
    """How choird stops an agent gracefully (§17.2): the push it sends, how long it waits."""

    push: ShutdownPush
    """The `shutdown` push, carrying config's `summary_timeout_ms`."""
    grace_s: float
    """The wait before SIGTERM: long enough for every step the agent may take, so its summary
    timeout (§11.8) is reachable rather than cut short by the signal."""


def graceful_stop(reason: StopReason, config: Tunables) -> GracefulStop:
    """The lanes' safe point (`stop_timeout_ms`), the summary (`summary_timeout_ms`), the flush."""
    push = ShutdownPush(reason=reason, summary_timeout_ms=config.summary_timeout_ms)
    grace_s = (config.stop_timeout_ms + config.summary_timeout_ms) / 1000 + FLUSH_GRACE_S
    return GracefulStop(push, grace_s)


@dataclass(frozen=True)
class Artefact:
    """What an agent runs, prepared before its session starts (a broken repo leases nothing)."""

    version: VersionInfo
    """Its version.json, recorded on the session: INIT_HELLO must match it (§15.1)."""
    root: Path | None = None
    """The merged `/choir` tree on the host (process runtime)."""
    image: str | None = None
    """The image tag to run (docker runtime), shown to the operator."""
    image_id: str | None = None
    """The id of the image the tag named when it was built: what the container is made from,
    since another home on this host may point the same tag at its own build meanwhile."""


@dataclass
class RunningAgent:
    """One agent a runtime started and still watches."""

    agent_id: str
    session_id: str
    pid: int | None
    """Its main process on this host (None when the engine does not say)."""
    container: str | None = None
    """The container id (docker runtime)."""
    image: str | None = None
    """The image it runs (docker runtime)."""
    verified: ProfileReport | None = field(default=None, repr=False)
    """The last security profile check of this agent (`agent verify`, and at start)."""


KeepFn = Callable[[str, str], bool]
"""(agent id, session id) -> whether the agent found running for it is adopted."""
OpenSocket = Callable[[str], Awaitable[Path]]
"""The daemon's `open_agent_socket`: an adopted agent's socket, listening again."""


@dataclass
class Adopted:
    """What a runtime did with what a previous choird left running (`AgentRuntime.adopt`)."""

    agents: list[RunningAgent] = field(default_factory=list)
    """Re-attached: watched, followed, served again."""
    removed: list[str] = field(default_factory=list)
    """Stopped and removed (container names, `pid N`)."""
    start_failures: dict[str, str] = field(default_factory=dict)
    """Why agents that exited while no choird ran gave their start up, by session id, as their
    logs say (`choir.logs.last_words`): what their crashed sessions are marked with."""


class AgentRuntime(Protocol):
    """What choird needs from a place agents run in."""

    @property
    def name(self) -> RuntimeName: ...

    @property
    def sandboxed(self) -> bool:
        """False for the process runtime: status and the TUI say "unsandboxed"."""
        ...

    async def prepare(self, agent_id: str, config: ChoirConfig) -> Artefact:
        """Build or merge what the agent runs; refuses (ChoirError) before any lease is taken."""
        ...

    def clone_source(self, agent_id: str, config: ChoirConfig) -> tuple[str, str] | str:
        """(the path the agent clones its repo from, as it sees it, and the ref) for
        `choir.propose.repo_change` — a read-only view of the repo, given at its start — or
        why it is given none."""
        ...

    async def start(
        self,
        agent_id: str,
        started: StartedSession,
        artefact: Artefact,
        *,
        workspace: Path,
        socket: Path,
    ) -> RunningAgent:
        """Run the agent for `started`, its workspace at /workspace, `socket` at
        /run/choir/choir.sock; its output appends to `logs/<agent-id>.log`."""
        ...

    async def stop(self, agent_id: str, reason: StopReason = "stop") -> int | None:
        """Graceful stop (§17.2), escalating to SIGTERM then SIGKILL; the exit code, or None
        if this runtime runs no such agent or the code is unknown (a process runtime's agent
        adopted after a choird restart is not its child): `running` tells them apart."""
        ...

    def running(self, agent_id: str) -> RunningAgent | None: ...

    async def stop_all(self) -> None:
        """Stop every running agent gracefully (choird shutting down)."""
        ...

    async def remove_orphans(self) -> list[str]:
        """Remove what a previous choird on this home left running; the names removed."""
        ...

    async def adopt(self, keep: KeepFn, open_socket: OpenSocket) -> Adopted:
        """Startup (§6.2 steps 6-7): re-attach the agents a previous choird on this home left
        running that `keep` accepts (its session holds its lease) — their sockets opened again
        with `open_socket` — and remove the rest."""
        ...

    async def verify(self, agent_id: str) -> ProfileReport:
        """Check the running agent against the declared security profile (§15.3)."""
        ...

    def close(self) -> None:
        """Release engine connections; called after `stop_all`."""
        ...


async def note_exit(
    sessions: SessionService,
    agent: RunningAgent,
    code: int | None,
    runtime: RuntimeName,
    home: ChoirHome,
) -> None:
    """§13.1 on exit: still active means no TERMINATE_SELF, so the session crashed. Then the
    agent's log is archived (§22.2): called once its writer is gone (the process, or the copy
    of the container's output), so no line can land in the archive after it was compressed."""
    log.info(
        "agent exited",
        fields={"agent_id": agent.agent_id, "exit_code": code, "runtime": runtime},
    )
    try:
        await sessions.mark_crashed(
            agent.session_id, f"choir-agent {exit_words(code)} without ending its session"
        )
    except Exception:  # the daemon may be closing its database; the reaper catches up
        log.exception("could not mark the session crashed", fields={"agent_id": agent.agent_id})
    try:
        archived = await asyncio.to_thread(archive_agent_log, home, agent.agent_id)
    except OSError as error:  # a full disk: the log stays active and the next exit retries
        log.error(
            f"could not archive the agent's log: {error}", fields={"agent_id": agent.agent_id}
        )
        return
    if archived is not None:
        log.info("agent log archived", fields={"agent_id": agent.agent_id, "path": str(archived)})
