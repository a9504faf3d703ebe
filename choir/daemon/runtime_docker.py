"""The `docker` runtime: each agent in a disposable container with the §15.3 profile.

The agent's image comes from `ensure_agent_image` (§17.3: built only when something changed);
its container is created from the declared security profile (`choir.core.security_profile`),
runs `choir-agent` as choird's own uid:gid — every capability is dropped, so only the owner can
use the workspace and the agent socket — with the workspace at /workspace and the agent's
socket directory at /run/choir and nothing else mounted. The environment holds only the agent's
identity; the lease token goes in on stdin (§14.1). Right after start the container is read
back and checked against the profile; one that does not match is removed and the start refused.

A follower thread copies the container's output to `logs/<agent-id>.log` until it exits. Exit
without TERMINATE_SELF marks the session crashed (§13.1), and the dead container is removed
either way. When the reaper declares a session crashed (no heartbeat) while its container
still runs, the container is killed and removed. At choird start, the containers labelled
`choir.managed=true` for this `$CHOIR_HOME` that a previous run left are adopted when their
session still holds its lease (`runtime_adopt`), and removed otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from choir.adapters.docker_containers import ContainerEngine, ContainerSpec
from choir.adapters.docker_engine import DockerEngine
from choir.config import ChoirConfig
from choir.core.security_profile import (
    SOCKET_DIR_TARGET,
    WORKSPACE_TARGET,
    ProfileReport,
    SecurityProfile,
    check_container,
    create_options,
)
from choir.daemon.runtime import (
    STOP_GRACE_S,
    TERM_GRACE_S,
    Artefact,
    PushFn,
    RunningAgent,
    StopReason,
    note_exit,
)
from choir.daemon.runtime_adopt import Adopted, KeepFn, followed_since
from choir.daemon.runtime_profile import (
    AGENT_COMMAND,
    ConfigFn,
    ImageSource,
    agent_profile,
    built_image,
    container_environment,
    loopback_endpoint,
    now_iso,
    proc_status,
)
from choir.daemon.session_state import SessionEnded, StartedSession
from choir.daemon.sessions import SessionService
from choir.errors import ChoirError, ConflictError, NotFoundError, UsageError
from choir.home import ChoirHome
from choir.logs import get_logger
from choir.logs.handler import AppendSink
from choir.protocol import ShutdownPush
from choir.store.sessions import SessionStatus

log = get_logger("choird.runtime")

MANAGED: Final = "choir.managed"


@dataclass
class _Container:
    """A running agent and what its check needs."""

    agent: RunningAgent
    profile: SecurityProfile
    workspace: str
    socket: str
    watcher: asyncio.Task[int] | None = None
    exited: int | None = None
    """The exit code, when the engine reported the container already exited."""


class DockerRuntime:
    """Starts, stops, watches and verifies agent containers."""

    def __init__(
        self,
        home: ChoirHome,
        sessions: SessionService,
        push: PushFn,
        engine: ContainerEngine,
        config: ConfigFn,
        *,
        images: ImageSource = built_image,
    ) -> None:
        self._home = home
        self._sessions = sessions
        self._push = push
        self._engine = engine
        self._config = config
        self._images = images
        self._agents: dict[str, _Container] = {}
        self._kills: set[asyncio.Task[None]] = set()
        self._ready: dict[str, tuple[str, Artefact]] = {}
        """Per agent: the image id and artefact `prepare` last made ready."""
        self._unsubscribe = sessions.subscribe(self._on_session_ended)

    @property
    def name(self) -> Literal["docker"]:
        return "docker"

    @property
    def sandboxed(self) -> bool:
        return True

    @classmethod
    async def connect(
        cls, home: ChoirHome, sessions: SessionService, push: PushFn, config: ConfigFn
    ) -> DockerRuntime:
        """On the engine `$DOCKER_HOST` names (or the default socket); UnavailableError,
        naming the process runtime, when none answers."""
        engine = ContainerEngine(await DockerEngine.connect())
        return cls(home, sessions, push, engine, config)

    def labels(self, agent_id: str, session_id: str) -> dict[str, str]:
        return {
            MANAGED: "true",
            "choir.home": str(self._home.root),
            "choir.agent": agent_id,
            "choir.session": session_id,
        }

    def running(self, agent_id: str) -> RunningAgent | None:
        held = self._agents.get(agent_id)
        return held.agent if held is not None else None

    async def prepare(self, agent_id: str, config: ChoirConfig) -> Artefact:
        """The agent's image: the one this choird last made ready while it is still the
        newest built for the agent (a start needs no build check, §17.3 step 10); otherwise
        `ensure_agent_image`, which builds only when something changed."""
        ready = self._ready.get(agent_id)
        newest = await self._engine.engine.images(
            {MANAGED: "true", "choir.agent": agent_id, "choir.home": str(self._home.root)}
        )
        if ready is not None and newest and newest[0].id == ready[0]:
            return ready[1]
        artefact = await self._images(self._home, config, agent_id)
        if artefact.image is not None:
            image = await self._engine.engine.image(artefact.image)
            if image is not None:
                self._ready[agent_id] = (image.id, artefact)
        return artefact

    async def start(
        self,
        agent_id: str,
        started: StartedSession,
        artefact: Artefact,
        *,
        workspace: Path,
        socket: Path,
    ) -> RunningAgent:
        if agent_id in self._agents:
            raise ConflictError(f"{agent_id} already has a running container: stop it first")
        if artefact.image is None:
            raise UsageError(f"{agent_id} has no image to run: build it (choirctl agent build)")
        config = self._config()
        profile = agent_profile(config.container)
        if endpoint := loopback_endpoint(config, started.bindings.llm):
            log.warning(
                "the agent's model endpoint is on loopback, which in a container is the "
                "container itself: serve it on the host's docker network address instead",
                fields={"agent_id": agent_id, "llm": started.bindings.llm, "endpoint": endpoint},
            )
        spec = ContainerSpec(
            image=artefact.image,
            command=AGENT_COMMAND,
            name=f"choir-{agent_id}-{secrets.token_hex(4)}",
            environment=container_environment(agent_id, started.session_id),
            labels=self.labels(agent_id, started.session_id),
            working_dir=WORKSPACE_TARGET,
            options=create_options(profile, workspace=str(workspace), socket=str(socket)),
        )
        container = await self._engine.create(spec)
        held = _Container(
            RunningAgent(agent_id, started.session_id, None, container, artefact.image),
            profile,
            str(workspace),
            str(socket),
        )
        try:
            await self._engine.start(container, stdin=f"{started.lease_token}\n".encode())
            self._agents[agent_id] = held
            held.watcher = asyncio.create_task(self._watch(held), name=f"watch-{agent_id}")
            report = await self._started(held)
            refusal = _refusal(held, report)
            if refusal is not None:
                raise ChoirError(refusal)
        except BaseException:
            if self._agents.get(agent_id) is held:
                del self._agents[agent_id]
            await self._engine.remove(container)
            raise
        log.info(
            "agent container started",
            fields={"agent_id": agent_id, "session_id": started.session_id, "id": container[:12]},
        )
        return held.agent

    async def verify(self, agent_id: str) -> ProfileReport:
        held = self._agents.get(agent_id)
        if held is None:
            raise ConflictError(f"{agent_id} has no running container to verify: start it first")
        return await self._verify(held)

    async def _started(self, held: _Container) -> ProfileReport | None:
        """The check of a container just started; None if it is already gone (it exited at
        once and its watcher removed it — `_refusal` then says so)."""
        try:
            return await self._verify(held)
        except NotFoundError:
            assert held.watcher is not None
            await asyncio.wait({held.watcher}, timeout=TERM_GRACE_S)
            return None

    async def _verify(self, held: _Container) -> ProfileReport:
        agent_id = held.agent.agent_id
        assert held.agent.container is not None
        inspect = await self._engine.inspect(held.agent.container)
        state = inspect.get("State") or {}
        pid = int(state.get("Pid") or 0) or None
        held.agent.pid = pid
        if state.get("Status") == "exited":
            held.exited = int(state.get("ExitCode", -1))
        checks = check_container(
            held.profile,
            inspect,
            workspace=held.workspace,
            socket=held.socket,
            proc_status=await asyncio.to_thread(proc_status, pid),
        )
        report = ProfileReport(agent_id, self.name, now_iso(), checks, held.agent.container)
        held.agent.verified = report
        return report

    async def stop(self, agent_id: str, reason: StopReason = "stop") -> int | None:
        """Graceful stop (§17.2): shutdown push, then SIGTERM, then SIGKILL; the exit code."""
        held = self._agents.get(agent_id)
        if held is None or held.watcher is None or held.agent.container is None:
            return None
        self._sessions.expect_shutdown(held.agent.session_id, reason)
        self._push(held.agent.session_id, ShutdownPush(reason=reason).model_dump(mode="json"))
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(asyncio.shield(held.watcher), STOP_GRACE_S)
        log.warning("agent did not stop in time", fields={"agent_id": agent_id})
        await self._engine.stop(held.agent.container, timeout_s=TERM_GRACE_S)
        return await held.watcher

    async def stop_all(self) -> None:
        await asyncio.gather(*(self.stop(agent_id) for agent_id in list(self._agents)))

    async def remove_orphans(self) -> list[str]:
        found = await self._engine.list({MANAGED: "true", "choir.home": str(self._home.root)})
        for container in found:
            await self._engine.remove(container.id)
        return [container.name for container in found]

    async def adopt(self, keep: KeepFn) -> Adopted:
        """At start: re-attach the running containers of this home that `keep` accepts (by
        their `choir.agent` and `choir.session` labels); remove the others (`runtime_adopt`)."""
        report = Adopted()
        found = await self._engine.list({MANAGED: "true", "choir.home": str(self._home.root)})
        for container in found:
            agent_id = container.labels.get("choir.agent", "")
            session_id = container.labels.get("choir.session", "")
            adoptable = container.state == "running" and agent_id not in self._agents
            if adoptable and keep(agent_id, session_id):
                agent = await self._reattach(container.id, agent_id, session_id)
                if agent is not None:
                    report.agents.append(agent)
                    continue
            await self._engine.remove(container.id)
            report.removed.append(container.name)
        return report

    async def _reattach(
        self, container: str, agent_id: str, session_id: str
    ) -> RunningAgent | None:
        """Watch, follow and verify a container a previous choird started; None when it cannot
        see a restarted choird's socket (made before sockets were mounted as a directory)."""
        try:
            inspect = await self._engine.inspect(container)
        except ChoirError:
            return None
        mounts = {
            str(m.get("Destination")): str(m.get("Source")) for m in inspect.get("Mounts") or []
        }
        if SOCKET_DIR_TARGET not in mounts:
            return None
        image = str((inspect.get("Config") or {}).get("Image") or "") or None
        held = _Container(
            RunningAgent(agent_id, session_id, None, container, image),
            agent_profile(self._config().container),
            mounts.get(WORKSPACE_TARGET, ""),
            str(self._home.agent_socket(agent_id)),
        )
        self._agents[agent_id] = held
        since = followed_since(self._home.agent_log(agent_id))
        held.watcher = asyncio.create_task(self._watch(held, since=since), name=f"watch-{agent_id}")
        with contextlib.suppress(ChoirError):
            report = await self._verify(held)
            if not report.ok:
                log.warning(
                    "an adopted container does not match today's profile (it was created "
                    "before a change): agent verify shows it; restart it to apply",
                    fields={"agent_id": agent_id, "failed": report.failed},
                )
        return held.agent

    def close(self) -> None:
        self._unsubscribe()
        self._engine.close()

    async def _watch(self, held: _Container, *, since: float | None = None) -> int:
        agent = held.agent
        assert agent.container is not None
        self._home.logs.mkdir(parents=True, exist_ok=True)
        try:
            with AppendSink(self._home.agent_log(agent.agent_id)) as sink:  # never torn
                code = await self._engine.follow(agent.container, sink, since=since)
        except ChoirError as error:
            log.error(str(error), fields={"agent_id": agent.agent_id})
            code = -1
        if self._agents.get(agent.agent_id) is held:
            del self._agents[agent.agent_id]
        await note_exit(self._sessions, agent, code, self.name)
        with contextlib.suppress(ChoirError):
            await self._engine.remove(agent.container)
        return code

    def _on_session_ended(self, ended: SessionEnded) -> None:
        """§13.1: a session crashed (no heartbeat) or forked while its container runs."""
        held = self._agents.get(ended.agent_id)
        if held is None or held.agent.session_id != ended.session_id:
            return
        if ended.status in (SessionStatus.CRASHED, SessionStatus.FORKED) and held.agent.container:
            log.warning("killing the container of a crashed session", fields={"id": ended.agent_id})
            task = asyncio.get_running_loop().create_task(self._engine.kill(held.agent.container))
            self._kills.add(task)
            task.add_done_callback(self._kills.discard)


def _refusal(held: _Container, report: ProfileReport | None) -> str | None:
    """Why a just-started container is not a running agent: it already exited, or it does not
    match the security profile (an engine ignoring settings, e.g. rootless without cgroups)."""
    agent_id = held.agent.agent_id
    if held.watcher is not None and held.watcher.done() and not held.watcher.cancelled():
        held.exited = held.watcher.result()
    if held.exited is not None:
        return (
            f"{agent_id}'s container exited at once (code {held.exited}): "
            f"see choirctl logs {agent_id}"
        )
    if report is None:
        return f"{agent_id}'s container is gone right after its start: see choirctl logs {agent_id}"
    if not report.ok:
        return (
            f"{agent_id}'s container does not match the security profile (failed: "
            f"{', '.join(report.failed)}); it was removed — is the engine ignoring settings "
            "(e.g. rootless without cgroup limits)?"
        )
    return None
