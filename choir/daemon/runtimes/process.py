"""The `process` runtime (design notes "Embedded defaults"): choir-agent as a host subprocess.

With no container engine, choird still runs agents: in a bubblewrap sandbox when bwrap works here
(`sandbox_bwrap`, `choir.core.security.sandbox`: own namespaces, the workspace as the only
writable host path, no host home or `$CHOIR_HOME` in sight), else unsandboxed — status and
`agent verify` say which. The agent's `/choir` tree is merged from the operator's repos into
`$CHOIR_HOME/runtime/<agent-id>/choir` (`agent_tree`: §6.5 merge rules, §15.1 layout, the
version.json choird holds the agent to at INIT_HELLO), and `choir-agent` runs with only its
session's identity and a minimal environment — never choird's, which may hold API keys. The
lease token goes in on stdin, so no environment holds it. It reaches choird on its own socket,
or under `choird --transport http` on choird's HTTP(S) listener (`agent_link`). An agent that may
propose repo changes (`repo_change.mount_source`) is told where to clone its repo from
(`$CHOIR_AGENT_REPO`): in the sandbox a read-only bind at `/agent-repo`, unsandboxed its path.

Nothing an agent started outlives it: in the sandbox, the agent is the only child of the PID
namespace's init, and the namespace dies with it; unsandboxed, it runs under `choir.subreaper`,
which adopts whatever detaches and kills it when the agent exits. Neither is tied to choird: a
choird that exits leaves its agents running. A watcher notices the agent exiting; if its
session is still active, the session is marked crashed, which releases its leases at once
instead of after the heartbeat threshold. A session the reaper declares crashed (no heartbeat)
has its hung tree killed. At choird start, the agents a previous choird on this home left running
are adopted when their session still holds its lease (`runtime_adopt`: recorded by the wrapper's
pid and start time), and killed otherwise. The agent's output goes straight to its log file,
never through a pipe to choird, so a dead choird cannot break it. A sandboxed agent is checked
against the sandbox at every start, and refused (killed) when the kernel's view does not match.

Repos given as local paths are read in place (working trees, uncommitted work included); repos
given as URLs are read from choird's clones (`repos`, fetched at `config load` and choird start).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final, Literal, Protocol

import psutil

from choir import subreaper
from choir.config import ChoirConfig
from choir.core.security.profile import REPO_TARGET, ProfileReport, unsandboxed
from choir.core.security.sandbox import (
    HOME_TARGET,
    TREE_TARGET,
    WORKSPACE_TARGET,
    SandboxLayout,
    bwrap_args,
    check_sandbox,
)
from choir.daemon.images import repos
from choir.daemon.images.agent_tree import materialize
from choir.daemon.images.agent_tree import merge_tree as merge_tree
from choir.daemon.proposals.repo_change import clone_environment, mount_source
from choir.daemon.runtimes.adopt import (
    AdoptedProcess,
    ProcessRecord,
    forget_process,
    record_process,
    recorded_processes,
)
from choir.daemon.runtimes.agent_link import (
    CERTIFICATE_NAME,
    HttpLink,
    LinkFn,
    control_plane_args,
    no_link,
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
from choir.daemon.runtimes.bwrap import (
    BWRAP_ENV,
    Sandbox,
    SandboxFound,
    find_sandbox,
    must_be_hidden,
    read_view,
)
from choir.daemon.runtimes.container_spec import now_iso
from choir.daemon.runtimes.process_tree import descendant_running, find_agent, kill_tree
from choir.daemon.runtimes.schema_memo import SchemaMemo
from choir.daemon.runtimes.warmup import build_while_agents_boot
from choir.daemon.runtimes.workspace_guard import hand_over, narrow_mode
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import SessionEnded, StartedSession
from choir.errors import ChoirError, ConflictError, UsageError
from choir.failpoints import passed_on
from choir.home import ChoirHome, narrow
from choir.logs import get_logger
from choir.logs.last_words import start_failure
from choir.protocol import VersionInfo
from choir.store.sessions import SessionStatus

__all__ = ["TERM_GRACE_S", "ProcessRuntime", "StopReason", "merge_tree"]

log = get_logger("choird.runtime")

PROCESS_IMAGE: Final = "process"
"""version.json's `image_version` for an agent run from working trees, not an image."""
AGENT_EXECUTABLE: Final = Path(sys.executable).parent / "choir-agent"
AGENT_FOUND_WITHIN_S: Final = 30.0
"""How long choir-agent may take to appear in its wrapper (it is there in milliseconds)."""
SANDBOXED_RUNTIME: Final = "process (bwrap)"
"""The runtime as `agent verify` names it when agents run in the sandbox."""


class _Handle(Protocol):
    """A wrapper choird started (`asyncio.subprocess.Process`) or adopted (`AdoptedProcess`)."""

    pid: int

    async def wait(self) -> int | None:
        """The exit code; None when it is unknown (an adopted process is not our child)."""
        ...


@dataclass
class _Process:
    agent: RunningAgent
    process: _Handle
    """The wrapper: bwrap, or the subreaper (started by this choird, or adopted)."""
    workspace: Path
    socket: Path
    wrapper: psutil.Process
    """The same process as `process`, as psutil knows it (signals check it is still that one)."""
    main: psutil.Process | None = None
    """choir-agent itself, inside the wrapper (None until found, or if it never ran)."""
    watcher: asyncio.Task[int | None] | None = None
    kills: set[asyncio.Future[None]] = field(default_factory=set)


class ProcessRuntime:
    """Starts, stops and watches choir-agent processes on this host."""

    def __init__(
        self,
        home: ChoirHome,
        sessions: SessionService,
        push: PushFn,
        link: LinkFn = no_link,
        sandbox: SandboxFound | None = None,
    ) -> None:
        """`sandbox`: what `find_sandbox` found, when it ran already (choird probes bwrap while
        it imports); None: look now."""
        self._home = home
        self._link = link
        """choird's HTTP(S) listener when agents use it (`--transport http`), else None."""
        self._sessions = sessions
        self._push = push
        self._agents: dict[str, _Process] = {}
        self._schemas = SchemaMemo(home)
        self._clone_from: dict[str, tuple[Path, str] | None] = {}
        """The repo each agent may clone (`mount_source`), as of its last `prepare`."""
        self._sandbox, note = sandbox if sandbox is not None else find_sandbox()
        if self._sandbox is None:
            log.warning("process runtime: agents run unsandboxed", fields={"reason": note})
        else:
            log.info("process runtime: agents run in a bwrap sandbox", fields={"bwrap": note})
        self._unsubscribe = sessions.subscribe(self._on_session_ended)

    @property
    def name(self) -> Literal["process"]:
        return "process"

    @property
    def sandboxed(self) -> bool:
        """True when agents run in the bwrap sandbox: shown as `process (bwrap)`."""
        return self._sandbox is not None

    def running(self, agent_id: str) -> RunningAgent | None:
        held = self._agents.get(agent_id)
        return held.agent if held is not None else None

    def clone_source(self, agent_id: str, config: ChoirConfig) -> tuple[str, str] | str:
        """(repo path, ref) the agent is given to clone for `choir.propose.repo_change`, or why
        not: in the sandbox its repo bound read-only at `REPO_TARGET`, unsandboxed its host path
        (which it must only read: nothing stops a host process)."""
        source = mount_source(config, agent_id)
        if isinstance(source, str):
            return source
        return (REPO_TARGET if self._sandbox is not None else str(source[0])), source[1]

    async def prepare(self, agent_id: str, config: ChoirConfig) -> Artefact:
        source = mount_source(config, agent_id)
        self._clone_from[agent_id] = source if isinstance(source, tuple) else None
        tree, version = await asyncio.to_thread(self.materialize, agent_id, config)
        return Artefact(version, root=tree)

    def materialize(
        self, agent_id: str, config: ChoirConfig, tree: Path | None = None
    ) -> tuple[Path, VersionInfo]:
        """Merge the agent's `/choir` tree from the repos; the tree and its version.json.

        `tree` elsewhere than the agent's own (`agent update` stages a candidate beside it)."""
        tree = tree or self._home.root / "runtime" / agent_id / "choir"
        shutil.rmtree(tree, ignore_errors=True)
        self._schemas.load()
        agent_key = repos.repo_key(agent_id)
        with (
            repos.clone_lock(repos.clone_path(self._home, repos.GLOBAL)),
            repos.clone_lock(repos.clone_path(self._home, agent_key)),
        ):  # local paths are read in place; URLs from choird's clones (fetched at config load)
            global_repo = repos.checkout(self._home, repos.GLOBAL, config.global_repo, fetch=False)
            agent_repo = repos.checkout(
                self._home, agent_key, config.agents[agent_id].repo, fetch=False
            )
            version = materialize(
                global_repo.path,
                agent_repo.path,
                tree,
                agent_id=agent_id,
                image_version=PROCESS_IMAGE,
                commits=(global_repo.commit, agent_repo.commit),
            )
        self._schemas.save()
        return tree, version

    async def start(
        self,
        agent_id: str,
        started: StartedSession,
        artefact: Artefact,
        *,
        workspace: Path,
        socket: Path,
    ) -> RunningAgent:
        """Spawn choir-agent for `started`; its stderr appends to `logs/<agent-id>.log`."""
        if agent_id in self._agents:
            raise ConflictError(f"{agent_id} already has a running process: stop it first")
        if artefact.root is None:
            raise UsageError(f"{agent_id} has no /choir tree to run: the process runtime needs one")
        agent_home = artefact.root.parent / "home"
        link = self._link()
        place_certificate(socket, link)
        source = self._clone_from.get(agent_id)
        with _prepare(self._home, agent_id, started, workspace, agent_home) as stderr:
            if self._sandbox is not None:
                if os.geteuid() == 0:
                    await asyncio.to_thread(_take_back, workspace)
                layout = SandboxLayout(
                    self._sandbox.host,
                    str(workspace),
                    str(artefact.root),
                    str(socket),
                    agent_id,
                    repo=str(source[0]) if source is not None else None,
                )
                env = agent_environment(agent_id, started, Path(HOME_TARGET))
                if source is not None:
                    env.update(clone_environment(REPO_TARGET, source[1]))
                process = await _spawn_sandboxed(self._sandbox, layout, env, stderr, link)
            else:
                command = _agent_command(socket, artefact.root, workspace, link)
                env = agent_environment(agent_id, started, agent_home)
                if source is not None:
                    env.update(clone_environment(str(source[0]), source[1]))
                process = await _spawn_unsandboxed(command, env, workspace, stderr)
        await _hand_over(process, started.lease_token)
        try:
            wrapper = psutil.Process(process.pid)
        except psutil.NoSuchProcess:  # exited, and reaped already by asyncio's watcher thread
            code = await process.wait()
            where = "sandbox" if self._sandbox else "process"
            raise ChoirError(
                f"{agent_id}'s {where} exited at once (code {code}): see choirctl logs {agent_id}"
            ) from None
        build_while_agents_boot()  # the models of the agent's first calls, while it boots
        await asyncio.to_thread(
            record_process, self._home, agent_id, started.session_id, process.pid, workspace
        )
        held = _Process(
            RunningAgent(agent_id, started.session_id, process.pid),
            process,
            workspace,
            socket,
            wrapper,
        )
        self._agents[agent_id] = held
        held.watcher = asyncio.create_task(self._watch(held), name=f"watch-{agent_id}")
        try:
            await self._started(held, process)
        except BaseException:
            if self._agents.get(agent_id) is held:
                del self._agents[agent_id]
            await self._kill(held)
            raise
        log.info(
            "agent process started",
            fields={
                "agent_id": agent_id,
                "session_id": started.session_id,
                "pid": held.agent.pid,
                "sandbox": "bwrap" if self._sandbox else "none",
                "control_plane": link.url if link else "socket",
            },
        )
        return held.agent

    async def _started(self, held: _Process, process: asyncio.subprocess.Process) -> None:
        """Find choir-agent in its wrapper; in the sandbox, refuse it unless it matches."""
        agent_id = held.agent.agent_id
        held.main = await find_agent(process, str(AGENT_EXECUTABLE), AGENT_FOUND_WITHIN_S)
        if held.main is None:
            where = "sandbox" if self._sandbox else "process"
            code = process.returncode
            if code is None:
                raise ChoirError(
                    f"{agent_id}'s choir-agent did not start in its {where} within "
                    f"{AGENT_FOUND_WITHIN_S:g} s: see choirctl logs {agent_id}"
                )
            raise ChoirError(
                f"{agent_id}'s {where} exited at once (code {code}): see choirctl logs {agent_id}"
            )
        held.agent.pid = held.main.pid
        if self._sandbox is None:
            return
        report = await self._verify(held)
        failed = [check for check in report.checks if not check.ok]
        if failed:
            shown = "; ".join(f"{c.item}: {c.actual} (expected {c.expected})" for c in failed)
            raise ChoirError(
                f"{agent_id}'s sandbox does not match its profile ({shown}); it was killed — "
                f"check bwrap on this host, or start choird with {BWRAP_ENV}= (empty) to run "
                "agents unsandboxed"
            )

    async def stop(self, agent_id: str, reason: StopReason = "stop") -> int | None:
        """Graceful stop (§17.2): shutdown push, then SIGTERM, then SIGKILL; the exit code
        (None for an agent adopted after a choird restart: not our child, its code unknown)."""
        held = self._agents.get(agent_id)
        if held is None or held.watcher is None:
            return None
        self._sessions.expect_shutdown(held.agent.session_id, reason)
        plan = graceful_stop(reason, self._sessions.config)
        self._push(held.agent.session_id, plan.push.model_dump(mode="json"))
        for grace, next_signal in ((plan.grace_s, signal.SIGTERM), (TERM_GRACE_S, signal.SIGKILL)):
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(held.watcher), grace)
            log.warning(
                "agent did not stop in time",
                fields={"agent_id": agent_id, "signal": next_signal.name},
            )
            if next_signal == signal.SIGTERM:
                _terminate(held)
            else:
                await self._kill(held)
        return await held.watcher

    async def stop_all(self) -> None:
        """Stop every running agent, gracefully first (choird shutting down)."""
        await asyncio.gather(*(self.stop(agent_id) for agent_id in list(self._agents)))

    async def remove_orphans(self) -> list[str]:
        """choir-agent processes a previous choird on this home left running: killed."""
        found = await asyncio.to_thread(_orphans, self._home.agent_socks)
        for pid in found:
            _signal_group(pid, signal.SIGKILL)
        return [f"pid {pid}" for pid in found]

    async def adopt(self, keep: KeepFn, open_socket: OpenSocket) -> Adopted:
        """At start: re-attach the recorded agents `keep` accepts (their wrapper's pid and start
        time still match, choir-agent still runs in it) and give them their socket back; kill
        every other choir-agent of this home (`runtime_adopt`)."""
        report = Adopted()
        for record in await asyncio.to_thread(recorded_processes, self._home):
            held = await asyncio.to_thread(self._found, record)
            agent_id = record.agent_id
            kept = held is not None and agent_id not in self._agents
            kept = kept and keep(agent_id, record.session_id)
            if held is not None and kept and await _reopened(open_socket, agent_id):
                self._agents[agent_id] = held
                held.watcher = asyncio.create_task(self._watch(held), name=f"watch-{agent_id}")
                report.agents.append(held.agent)
                continue
            if held is not None:
                await self._kill(held)
                report.removed.append(f"pid {record.pid}")
            else:
                await self._last_words(record, report)
            forget_process(self._home, agent_id, record.pid)
        handled = {held.pid for held in report.agents} | {
            int(name.split()[1]) for name in report.removed
        }
        for pid in await asyncio.to_thread(_orphans, self._home.agent_socks):
            if pid not in handled:
                _signal_group(pid, signal.SIGKILL)
                report.removed.append(f"pid {pid}")
        return report

    async def _last_words(self, record: ProcessRecord, report: Adopted) -> None:
        """Why `record`'s agent, gone, gave its start up, if its log says (choird was away)."""
        log_file = self._home.agent_log(record.agent_id)
        failure = await asyncio.to_thread(
            start_failure, log_file, record.session_id, record.started
        )
        if failure is not None:
            report.start_failures[record.session_id] = failure

    def _found(self, record: ProcessRecord) -> _Process | None:
        """The agent `record` names, if its wrapper still runs choir-agent (blocking)."""
        if not record.alive():
            return None
        main = descendant_running(record.pid, str(AGENT_EXECUTABLE))
        try:
            wrapper = psutil.Process(record.pid)
        except psutil.Error:
            return None
        if main is None:
            return None
        agent = RunningAgent(record.agent_id, record.session_id, main.pid)
        socket = self._home.agent_socket(record.agent_id)
        workspace = Path(record.workspace)
        return _Process(agent, AdoptedProcess(record), workspace, socket, wrapper, main)

    async def verify(self, agent_id: str) -> ProfileReport:
        held = self._agents.get(agent_id)
        if held is None:
            raise ConflictError(f"{agent_id} has no running process to verify: start it first")
        if self._sandbox is None:
            held.agent.verified = unsandboxed(agent_id, now_iso())
            return held.agent.verified
        return await self._verify(held)

    async def _verify(self, held: _Process) -> ProfileReport:
        """The sandbox items, read back from the kernel's view of choir-agent."""
        agent_id = held.agent.agent_id
        assert self._sandbox is not None
        assert held.main is not None
        bound = [target for _, target in self._sandbox.host.ro_binds]
        bound.append(str(held.socket.parent / CERTIFICATE_NAME))  # public: what it trusts
        hidden = must_be_hidden(self._home.root, held.socket, bound)
        try:
            view = await asyncio.to_thread(read_view, held.main.pid, held.workspace, hidden)
        except OSError as error:
            raise ConflictError(f"{agent_id} is no longer running ({error.strerror})") from None
        checks = check_sandbox(view)
        held.agent.verified = ProfileReport(agent_id, SANDBOXED_RUNTIME, now_iso(), checks)
        return held.agent.verified

    def close(self) -> None:
        self._unsubscribe()

    async def _watch(self, held: _Process) -> int | None:
        code = await held.process.wait()
        forget_process(self._home, held.agent.agent_id, held.process.pid)
        if held.main is not None:  # the wrapper killed on its own: the agent would run on
            with contextlib.suppress(psutil.Error):
                held.main.kill()
        if self._agents.get(held.agent.agent_id) is held:
            del self._agents[held.agent.agent_id]
        await note_exit(self._sessions, held.agent, code, self.name, self._home)
        return code

    async def _kill(self, held: _Process) -> None:
        """SIGKILL the agent's whole tree, the wrapper last; wait until it is gone."""
        await asyncio.to_thread(kill_tree, held.wrapper)
        await held.process.wait()

    def _on_session_ended(self, ended: SessionEnded) -> None:
        """§13.1: the reaper declared the session crashed while its process still runs."""
        held = self._agents.get(ended.agent_id)
        if held is None or held.agent.session_id != ended.session_id:
            return
        if ended.status in (SessionStatus.CRASHED, SessionStatus.FORKED):
            log.warning("killing the process of a crashed session", fields={"id": ended.agent_id})
            task = asyncio.ensure_future(self._kill(held))
            held.kills.add(task)
            task.add_done_callback(held.kills.discard)


def _prepare(
    home: ChoirHome, agent_id: str, started: StartedSession, workspace: Path, agent_home: Path
) -> BinaryIO:
    """Check the workspace, make the agent's HOME; its log, opened for appending."""
    if not workspace.is_dir():
        raise UsageError(
            f"workspace {started.bindings.workspace} is missing ({workspace}): "
            "create the directory or bind another with --workspace"
        )
    narrow_mode(workspace)  # as the docker runtime does: no other user reaches what it leaves
    agent_home.mkdir(mode=0o700, exist_ok=True)
    narrow(agent_home)
    home.logs.mkdir(parents=True, exist_ok=True)
    fd = os.open(home.agent_log(agent_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)  # logs/ is private, and so is each log in it
    return os.fdopen(fd, "ab")


def _take_back(workspace: Path) -> None:
    """Hand the workspace to choird's own uid when a docker agent (its own uid) left files
    there: the sandbox maps only choird's uid, and to an agent in it, with no capability over
    unmapped owners, a 0700 directory of another uid is closed (`bwrap: Can't chdir to
    /workspace`). The docker runtime does the same the other way round at each start."""
    path = workspace.resolve(strict=True)
    handed = hand_over(path, os.getuid(), os.getgid())
    if handed.changed:
        log.info(
            "workspace handed back to choird's uid (an agent container owned files there)",
            fields={"workspace": str(path), "changed": handed.changed},
        )


def _agent_command(socket: Path, root: Path, workspace: Path, link: HttpLink | None) -> list[str]:
    return [
        str(AGENT_EXECUTABLE),
        # the socket's host path (in the sandbox too) names the agent's home even over HTTP:
        # how orphans are recognised
        *control_plane_args(socket, link),
        f"--root={root}",
        f"--workspace={workspace}",
        "--lease-token-stdin",
    ]


async def _spawn_sandboxed(
    sandbox: Sandbox,
    layout: SandboxLayout,
    env: dict[str, str],
    stderr: BinaryIO,
    link: HttpLink | None,
) -> asyncio.subprocess.Process:
    """bwrap running choir-agent in `layout`; the setuid filter goes in through a pipe."""
    command = _agent_command(Path(layout.socket), Path(TREE_TARGET), Path(WORKSPACE_TARGET), link)
    read_fd = _pipe_holding(sandbox.seccomp)
    try:
        return await asyncio.create_subprocess_exec(
            sandbox.bwrap,
            *bwrap_args(layout, seccomp_fd=read_fd),
            "--",
            sandbox.setsid,
            *command,
            env=env,
            cwd=layout.workspace,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            pass_fds=(read_fd,),
        )
    finally:
        os.close(read_fd)


async def _spawn_unsandboxed(
    command: list[str], env: dict[str, str], workspace: Path, stderr: BinaryIO
) -> asyncio.subprocess.Process:
    """choir-agent under `choir.subreaper`, which forwards stop signals and, when the agent
    exits, kills whatever it left behind."""
    reaper = [sys.executable, "-I", "-S", subreaper.__file__, "--forward", "--"]
    return await asyncio.create_subprocess_exec(
        *reaper,
        *command,
        env=env,
        cwd=workspace,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=stderr,
        start_new_session=True,
    )


def _pipe_holding(data: bytes) -> int:
    """The read end of a pipe holding `data` then EOF (small: the write never blocks)."""
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, data)
    finally:
        os.close(write_fd)
    return read_fd


def _terminate(held: _Process) -> None:
    """SIGTERM to choir-agent itself (bwrap's init would not pass it on), else its wrapper."""
    with contextlib.suppress(psutil.Error):
        (held.main or held.wrapper).terminate()


async def _reopened(open_socket: OpenSocket, agent_id: str) -> bool:
    """The adopted agent's socket listening again; False (logged) when it cannot be."""
    try:
        await open_socket(agent_id)
    except ChoirError as error:
        log.error(f"cannot adopt {agent_id}: {error.message}", fields={"agent_id": agent_id})
        return False
    return True


async def _hand_over(process: asyncio.subprocess.Process, token: str) -> None:
    """The lease token on stdin, then stdin closed (the agent reads one line)."""
    assert process.stdin is not None
    with contextlib.suppress(ConnectionError):  # it died at once: the watcher reports it
        process.stdin.write(f"{token}\n".encode())
        await process.stdin.drain()
    process.stdin.close()


def agent_environment(agent_id: str, started: StartedSession, home: Path) -> dict[str, str]:
    """The agent's whole environment: its identity, and no variable of choird's own — except
    `CHOIR_FAILPOINTS` when choird has it, so fault tests can crash an agent choird started at
    a named point (it holds no secret; `choir.failpoints.passed_on`)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
    return {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "CHOIR_AGENT_ID": agent_id,
        "CHOIR_SESSION_ID": started.session_id,
        **passed_on(),
    }


def _orphans(agent_socks: Path) -> list[int]:
    """Processes whose first or second argument is choir-agent (the agent, or the bwrap or
    subreaper wrapper naming it) on a socket under `agent_socks`. The outermost leads the
    agent's process group (`start_new_session`), so killing each one's group takes the whole
    tree; an inner pid names no group, and its kill is a no-op."""
    prefix = f"--socket={agent_socks}{os.sep}"
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline: list[str] = proc.info.get("cmdline") or []
        agent = any(Path(arg).name == "choir-agent" for arg in cmdline[:2])
        if agent and any(arg.startswith(prefix) for arg in cmdline):
            found.append(int(proc.info["pid"]))
    return found


def _signal_group(pid: int, signum: signal.Signals) -> None:
    """`signum` to the agent's process group (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)
