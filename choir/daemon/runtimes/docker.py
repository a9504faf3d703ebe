"""The `docker` runtime: each agent in a disposable container with the §15.3 profile.

The agent's image comes from `ensure_agent_image` (§17.3: built only when something changed); its
container is created from the declared security profile (`choir.core.security.profile`), runs
`choir-agent` as a uid:gid that is never 0 — the agent's own when choird is root (`agent_users`),
else choird's — with the workspace at /workspace (handed over to that uid, private to it,
`nosuid,nodev`: `workspace_guard`), the agent's socket directory at /run/choir and, for an agent
that may propose repo changes (`container_repo`), its own repo read-only at /agent-repo to clone
from (`$CHOIR_AGENT_REPO` says where) — nothing else mounted — on the choir network of its
egress policy (`egress`). The environment holds only the agent's identity (and that path, and
`CHOIR_FAILPOINTS` when choird has it, as on the process runtime: `choir.failpoints.passed_on`);
the lease token goes in on stdin (§14.1). Under `choird --transport http` the agent reaches
choird over HTTPS on its network's gateway (`bridge_link`), trusting the certificate put in its
socket directory. Right after start the container is read back and checked against the profile, from
docker's, the kernel's and the host's side; one that does not match is removed and the start
refused.

A follower thread copies the container's output to `logs/<agent-id>.log` until it exits. Exit
without TERMINATE_SELF marks the session crashed (§13.1), and the dead container is removed either
way. When the reaper declares a session crashed (no heartbeat) while its container still runs, the
container is killed and removed. At choird start, the containers labelled `choir.managed=true` for
this `$CHOIR_HOME` that a previous run left are adopted when their session still holds its lease
(`runtime_adopt`), and removed otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from choir.adapters.docker.containers import ContainerEngine, ContainerSpec
from choir.adapters.docker.engine import DockerEngine
from choir.config import ChoirConfig
from choir.core.security.host import HostView, MountSource, check_host, mounts_of
from choir.core.security.profile import (
    REPO_TARGET,
    SOCKET_DIR_TARGET,
    WORKSPACE_TARGET,
    ProfileReport,
    SecurityProfile,
    check_container,
    create_options,
)
from choir.daemon.images.build import latest_image_file
from choir.daemon.images.kept import pinned, unpin
from choir.daemon.proposals.repo_change import clone_environment
from choir.daemon.runtimes.agent_link import (
    NetworkLinkFn,
    endpoint_of,
    no_network_link,
    place_certificate,
)
from choir.daemon.runtimes.base import (
    TERM_GRACE_S,
    Adopted,
    Artefact,
    KeepFn,
    OpenSocket,
    PushFn,
    RunningAgent,
    StopReason,
    graceful_stop,
    note_exit,
)
from choir.daemon.runtimes.container_last_words import last_words
from choir.daemon.runtimes.container_spec import (
    ConfigFn,
    ImageSource,
    agent_command,
    agent_profile,
    built_image,
    container_environment,
    container_repo,
    docker_socket_dir,
    kernel_view,
    loopback_endpoint,
    now_iso,
)
from choir.daemon.runtimes.egress import (
    EgressSetup,
    close_link,
    egress_network,
    filter_egress,
    observe,
    open_link,
    prepare_egress,
)
from choir.daemon.runtimes.log_resume import ResumePoint, SkipCopied, resume_point
from choir.daemon.runtimes.workspace_guard import (
    WorkspaceGuard,
    guard_workspace,
    release_leftovers,
    scan_sockets,
    workspace_view,
)
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import SessionEnded, StartedSession
from choir.errors import ChoirError, ConflictError, NotFoundError, UsageError
from choir.failpoints import passed_on
from choir.home import ChoirHome
from choir.logs import get_logger
from choir.logs.handler import AppendSink
from choir.store.sessions import SessionStatus

log = get_logger("choird.runtime")

MANAGED: Final = "choir.managed"
EXIT_GRACE_S: Final = 1.0
"""How long a start whose check failed waits to see whether the container simply exited."""


@dataclass
class _Container:
    """A running agent and what its check needs."""

    agent: RunningAgent
    profile: SecurityProfile
    workspace: str
    socket: str
    guard: WorkspaceGuard
    egress: EgressSetup
    repo: str | None = None
    """The agent's repo on the host, mounted read-only at `REPO_TARGET` (None: not mounted)."""
    link: tuple[str, int] | None = None
    """The gateway and port of choird's listener the agent reaches (`bridge_link`), if any."""
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
        link: NetworkLinkFn = no_network_link,
    ) -> None:
        self._home = home
        self._link = link
        """choird's HTTPS listener on a network's gateway (`bridge_link`), else None."""
        self._hole: tuple[EgressSetup, str, int] | None = None
        """The filter's opening to that listener (`open_link`), kept through rule repairs."""
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
        cls,
        home: ChoirHome,
        sessions: SessionService,
        push: PushFn,
        config: ConfigFn,
        link: NetworkLinkFn = no_network_link,
    ) -> DockerRuntime:
        """On the engine `$DOCKER_HOST` names (or the default socket); UnavailableError,
        naming the process runtime, when none answers."""
        engine = ContainerEngine(await DockerEngine.connect())
        if os.geteuid() == 0:
            paths = [workspace.path for workspace in config().workspaces.values()]
            released = await asyncio.to_thread(release_leftovers, paths)
            if released:
                log.info(
                    "released workspace mounts a previous choird left", fields={"paths": released}
                )
        return cls(home, sessions, push, engine, config, link=link)

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

    def clone_source(self, agent_id: str, config: ChoirConfig) -> tuple[str, str] | str:
        """(`REPO_TARGET`, ref) when the agent's container gets its repo read-only, or why not."""
        source = container_repo(config, agent_id)
        return (REPO_TARGET, source[1]) if isinstance(source, tuple) else source

    async def prepare(self, agent_id: str, config: ChoirConfig) -> Artefact:
        """The agent's image: the one this choird last made ready while it is still the
        newest built for the agent (a start needs no build check, §17.3 step 10); otherwise
        `ensure_agent_image`, which builds only when something changed. An agent rolled back
        (`agent rollback`: pinned) runs its pinned image while the engine still has it."""
        held = await asyncio.to_thread(pinned, self._home, agent_id)
        if held is not None:
            if await self._engine.engine.image(held.image_id) is not None:
                return Artefact(held.version, image=held.tag, image_id=held.image_id)
            # removed from the engine: the pin is dropped, or the next rollback would count
            # from an image the agent no longer runs
            await asyncio.to_thread(unpin, self._home, agent_id)
            log.warning(
                f"{agent_id}: its pinned image {held.tag} is gone from docker; it runs the "
                "latest build again (choirctl agent rollback pins another)",
                fields={"agent_id": agent_id, "image_id": held.image_id},
            )
        ready = self._ready.get(agent_id)
        if ready is not None and await self._still_latest(agent_id, ready[0]):
            return ready[1]
        artefact = await self._images(self._home, config, agent_id)
        if artefact.image is not None:
            image = await self._engine.engine.image(artefact.image_id or artefact.image)
            if image is not None:
                self._ready[agent_id] = (image.id, artefact)
        return artefact

    async def _still_latest(self, agent_id: str, image_id: str) -> bool:
        """Whether `image_id` is what the latest build for the agent made ready (every build
        notes it: `latest_image_file`) and the engine still has it."""
        path = latest_image_file(self._home, agent_id)
        try:
            latest = await asyncio.to_thread(path.read_text)
        except OSError:
            return False
        if latest.strip() != image_id:
            return False
        return await self._engine.engine.image(image_id) is not None

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
        network = await egress_network(self._engine, config.container)
        profile = agent_profile(config, agent_id, network)
        if endpoint := loopback_endpoint(config, started.bindings.llm):
            log.warning(
                "the agent's model endpoint is on loopback, which in a container is the "
                "container itself: serve it elsewhere, or on the host's docker network address "
                "with container.allow_host_access",
                fields={"agent_id": agent_id, "llm": started.bindings.llm, "endpoint": endpoint},
            )
        link = self._link(network)
        if link is not None:
            # a public certificate, readable by the container's uid, changed only by choird
            await asyncio.to_thread(place_certificate, socket, link, mode=0o644)
        environment = container_environment(agent_id, started.session_id) | passed_on()
        source = await asyncio.to_thread(container_repo, config, agent_id)
        repo = str(source[0]) if isinstance(source, tuple) else None
        if isinstance(source, tuple):
            environment.update(clone_environment(REPO_TARGET, source[1]))
        spec = ContainerSpec(
            image=artefact.image_id or artefact.image,
            command=agent_command(link),
            name=f"choir-{agent_id}-{secrets.token_hex(4)}",
            environment=environment,
            labels=self.labels(agent_id, started.session_id),
            working_dir=WORKSPACE_TARGET,
            options=create_options(
                profile, workspace=str(workspace), socket=str(socket), repo=repo
            ),
        )
        # the firewall rules go in while the container is made: the start needs both, neither
        # needs the other (the network exists), and each is a fair part of a start's time
        rules = asyncio.create_task(filter_egress(config.container), name=f"egress-{agent_id}")
        try:
            guard, container = await self._create(spec, profile, workspace, socket)
        except BaseException:
            await asyncio.gather(rules, return_exceptions=True)  # never left behind
            raise
        try:
            egress = await rules
            if link is not None:
                await self._reopen_link(egress)  # a flush of the rules took it too
        except BaseException:
            await self._engine.remove(container)
            guard.release()
            raise
        if not egress.enforced:
            log.warning(
                "agent egress is not filtered: the agent can reach this host's services and "
                "link-local (cloud metadata) addresses",
                fields={"agent_id": agent_id, "network": egress.network, "why": egress.detail},
            )
        held = _Container(
            RunningAgent(agent_id, started.session_id, None, container, artefact.image),
            profile,
            str(workspace),
            str(socket),
            guard,
            egress,
            repo,
            endpoint_of(link.url) if link is not None else None,
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
            guard.release()
            raise
        log.info(
            "agent container started",
            fields={"agent_id": agent_id, "session_id": started.session_id, "id": container[:12]},
        )
        return held.agent

    async def _create(
        self, spec: ContainerSpec, profile: SecurityProfile, workspace: Path, socket: Path
    ) -> tuple[WorkspaceGuard, str]:
        """The workspace handed to the container's uid, then the container created (not
        started); the guard released when the create fails."""
        guard = await asyncio.to_thread(_guard, profile, workspace, socket)
        try:
            return guard, await self._engine.create(spec)
        except BaseException:
            guard.release()
            raise

    async def bridge(self) -> tuple[str, str] | None:
        """The network agents start on now and the host's address on it (its gateway), the
        network made when missing; None when it has no gateway (`bridge_link`)."""
        config = self._config()
        network = await egress_network(self._engine, config.container)
        gateway = (await self._engine.network(network)).gateway
        return (network, gateway) if gateway else None

    async def open_link(self, gateway: str, port: int) -> None:
        """The network's filter opened to choird's listener at `gateway:port` (TCP), and
        nothing else of the host (`egress.open_link`)."""
        setup = await prepare_egress(self._engine, self._config().container)
        await asyncio.to_thread(open_link, setup, gateway, port)
        self._hole = (setup, gateway, port)

    async def close_link(self) -> None:
        """`open_link` undone: at choird stop, when the listener closes."""
        hole, self._hole = self._hole, None
        if hole is not None:
            with contextlib.suppress(ChoirError):
                await asyncio.to_thread(close_link, *hole)

    async def _reopen_link(self, egress: EgressSetup) -> None:
        if self._hole is not None and self._hole[0].network == egress.network:
            _, gateway, port = self._hole
            await asyncio.to_thread(open_link, egress, gateway, port)

    async def verify(self, agent_id: str) -> ProfileReport:
        held = self._agents.get(agent_id)
        if held is None:
            raise ConflictError(f"{agent_id} has no running container to verify: start it first")
        return await self._verify(held)

    async def _started(self, held: _Container) -> ProfileReport | None:
        """The check of a container just started; None if it is already gone (it exited at
        once and its watcher removed it — `_refusal` then says so). A check that fails is
        given a moment to turn out to be an exit (a process gone fails the kernel's items)."""
        assert held.watcher is not None
        try:
            report = await self._verify(held)
        except NotFoundError:
            await asyncio.wait({held.watcher}, timeout=TERM_GRACE_S)
            return None
        if not report.ok:
            await asyncio.wait({held.watcher}, timeout=EXIT_GRACE_S)
        return report

    async def _verify(self, held: _Container) -> ProfileReport:
        agent_id = held.agent.agent_id
        assert held.agent.container is not None
        inspect = await self._engine.inspect(held.agent.container)
        state = inspect.get("State") or {}
        pid = int(state.get("Pid") or 0) or None
        held.agent.pid = pid
        if state.get("Status") == "exited":
            held.exited = int(state.get("ExitCode", -1))
        kernel = await asyncio.to_thread(kernel_view, pid)
        checks = check_container(
            held.profile,
            inspect,
            workspace=held.workspace,
            socket=held.socket,
            repo=held.repo,
            proc_status=kernel.status if kernel else None,
            mountinfo=kernel.mountinfo if kernel else None,
        )
        host = await asyncio.to_thread(self._host_view, held, inspect)
        checks += check_host(held.profile, inspect, host)
        report = ProfileReport(agent_id, self.name, now_iso(), checks, held.agent.container)
        held.agent.verified = report
        return report

    def _host_view(self, held: _Container, inspect: dict[str, Any]) -> HostView:
        """The host's side of the check (blocking: stats, a bounded scan, iptables)."""
        agent_uid = int(held.profile.user.partition(":")[0])
        own = agent_uid if agent_uid != os.getuid() else None  # a uid only agents have
        mounts = tuple(
            MountSource(
                str(mount.get("Source")),
                resolved := os.path.realpath(str(mount.get("Source"))),
                scan_sockets(resolved, skip_uid=own),
            )
            for mount in mounts_of(inspect, socket=held.socket)
        )
        return HostView(
            home=os.path.realpath(self._home.root),
            socks=os.path.realpath(self._home.socks),
            docker_socket_dir=docker_socket_dir(),
            workspace=workspace_view(held.workspace),
            mounts=mounts,
            egress=observe(held.egress, held.link),
        )

    async def stop(self, agent_id: str, reason: StopReason = "stop") -> int | None:
        """Graceful stop (§17.2): shutdown push, then SIGTERM, then SIGKILL; the exit code."""
        held = self._agents.get(agent_id)
        if held is None or held.watcher is None or held.agent.container is None:
            return None
        self._sessions.expect_shutdown(held.agent.session_id, reason)
        plan = graceful_stop(reason, self._sessions.config)
        self._push(held.agent.session_id, plan.push.model_dump(mode="json"))
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(asyncio.shield(held.watcher), plan.grace_s)
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

    async def adopt(self, keep: KeepFn, open_socket: OpenSocket) -> Adopted:
        """At start: re-attach the running containers of this home that `keep` accepts (by
        their `choir.agent` and `choir.session` labels); remove the others (`runtime_adopt`)."""
        report = Adopted()
        found = await self._engine.list({MANAGED: "true", "choir.home": str(self._home.root)})
        for container in found:
            agent_id = container.labels.get("choir.agent", "")
            session_id = container.labels.get("choir.session", "")
            adoptable = container.state == "running" and agent_id not in self._agents
            if adoptable and keep(agent_id, session_id):
                agent = await self._reattach(container.id, agent_id, session_id, open_socket)
                if agent is not None:
                    report.agents.append(agent)
                    continue
            if container.state == "exited":  # while choird was away: what did it say?
                words = await last_words(
                    self._engine, self._home, container.id, agent_id, session_id
                )
                if words is not None:
                    report.start_failures[session_id] = words
            await self._engine.remove(container.id)
            report.removed.append(container.name)
        return report

    async def _reattach(
        self, container: str, agent_id: str, session_id: str, open_socket: OpenSocket
    ) -> RunningAgent | None:
        """Watch, follow and verify a container a previous choird started, its socket (and
        workspace guard) made again; None when that cannot be — among others a container made
        before sockets were mounted as a directory, which would never see the new socket."""
        try:
            inspect = await self._engine.inspect(container)
            mounts = {
                str(m.get("Destination")): str(m.get("Source")) for m in inspect.get("Mounts") or []
            }
            if SOCKET_DIR_TARGET not in mounts or WORKSPACE_TARGET not in mounts:
                return None
            socket = await open_socket(agent_id)
            config = self._config()
            egress = await prepare_egress(self._engine, config.container)
            profile = agent_profile(config, agent_id, egress.network)
            workspace = Path(mounts[WORKSPACE_TARGET])
            guard = await asyncio.to_thread(_guard, profile, workspace, socket)
        except ChoirError as error:
            log.error(f"cannot adopt {agent_id}: {error.message}", fields={"id": container[:12]})
            return None
        image = str((inspect.get("Config") or {}).get("Image") or "") or None
        held = _Container(
            RunningAgent(agent_id, session_id, None, container, image),
            profile,
            str(workspace),
            str(socket),
            guard,
            egress,
            mounts.get(REPO_TARGET),  # as it was started: verified against that
        )
        self._agents[agent_id] = held
        resume = resume_point(self._home.agent_log(agent_id))
        held.watcher = asyncio.create_task(
            self._watch(held, resume=resume), name=f"watch-{agent_id}"
        )
        with contextlib.suppress(ChoirError):
            report = await self._verify(held)
            if not report.ok:
                log.warning(
                    "an adopted container does not match today's profile (it was created "
                    "before a change): agent verify shows it; restart it to apply",
                    fields={"agent_id": agent_id, "failed": report.failed},
                )
        # checked from the next verify on: the opening comes with choird's listener, after this
        held.link = _endpoint_in(inspect)
        return held.agent

    def close(self) -> None:
        self._unsubscribe()
        self._engine.close()

    async def _watch(self, held: _Container, *, resume: ResumePoint | None = None) -> int:
        """Copy the container's output to the agent's log until it exits (an adopted one's from
        `resume`: after what the previous choird copied), then end its session as it ended."""
        agent = held.agent
        assert agent.container is not None
        self._home.logs.mkdir(parents=True, exist_ok=True)
        try:
            with AppendSink(self._home.agent_log(agent.agent_id)) as appended:  # never torn
                sink = SkipCopied(appended, resume.copied if resume else ())
                since = resume.since if resume else None
                try:
                    code = await self._engine.follow(agent.container, sink, since=since)
                finally:
                    sink.finish()
        except ChoirError as error:
            log.error(str(error), fields={"agent_id": agent.agent_id})
            code = -1
        # before the session ends (and the workspace's lease with it): a next start on the
        # workspace must find it either still mounted nosuid or not at all, never in between
        await asyncio.to_thread(held.guard.release)
        if self._agents.get(agent.agent_id) is held:
            del self._agents[agent.agent_id]
        await note_exit(self._sessions, agent, code, self.name, self._home)
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
        failed = [c for c in report.checks if c.required and not c.ok]
        return (
            f"{agent_id}'s container does not match the security profile (failed: "
            f"{'; '.join(f'{c.item}: {c.actual}' for c in failed)}); it was removed — fix "
            "the workspace or config, or is the engine ignoring settings (e.g. rootless "
            "without cgroup limits)?"
        )
    return None


def _endpoint_in(inspect: dict[str, Any]) -> tuple[str, int] | None:
    """The choird listener a container was started to reach (`--endpoint=`), if any."""
    for arg in inspect.get("Args") or []:
        if str(arg).startswith("--endpoint="):
            return endpoint_of(str(arg).partition("=")[2])
    return None


def _guard(profile: SecurityProfile, workspace: Path, socket: Path) -> WorkspaceGuard:
    """The workspace and the agent's socket made the container uid's (blocking)."""
    uid, _, gid = profile.user.partition(":")
    privileged = os.geteuid() == 0
    try:
        guard = guard_workspace(workspace, int(uid), int(gid), privileged=privileged)
        if privileged:
            _grant(socket, int(uid), int(gid))
    except OSError as error:
        where = error.filename or workspace
        raise ChoirError(
            f"cannot prepare workspace {workspace} for the agent: {error.strerror} ({where})"
        ) from None
    return guard


def _grant(socket: Path, uid: int, gid: int) -> None:
    """The agent's socket (a socket file, or a directory holding it) usable by `uid` alone."""
    os.chown(socket, uid, gid, follow_symlinks=False)
    if socket.is_dir() and not socket.is_symlink():
        for inside in socket.iterdir():
            os.chown(inside, uid, gid, follow_symlinks=False)
