"""The `process` runtime (design notes "Embedded defaults"): choir-agent as a host subprocess.

With no container engine, choird still runs agents, unsandboxed (status says so): the agent's
`/choir` tree is merged from the operator's repos into `$CHOIR_HOME/runtime/<agent-id>/choir`
(§6.5 merge rules, §15.1 layout, a version.json choird holds the agent to at INIT_HELLO), and
`choir-agent` runs with only its session's identity and a minimal environment — never choird's,
which may hold API keys. Each agent gets its own process group, so a stop reaches every process
it started. A watcher notices the process exiting; if its session is still active, the session
is marked crashed, which releases its leases at once instead of after the heartbeat threshold.

For now the repos' working trees are read directly (`global_repo.url` and `agents.<id>.repo.url`
as local paths); clone caching and remote repos come with `agent build`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal

from pydantic import ValidationError

from choir.config import ChoirConfig
from choir.config.gitrepo import git, is_repo
from choir.core.skill_registry import load_skills
from choir.core.skill_runner import CONTROL_TOOLS
from choir.daemon.session_state import StartedSession
from choir.daemon.sessions import SessionService
from choir.errors import ConfigError, ConflictError, UsageError
from choir.home import ChoirHome
from choir.logs import get_logger
from choir.protocol import ShutdownPush, VersionInfo, skill_manifest_hash, tool_manifest_hash
from choir.protocol.manifest import ToolManifest
from choir.protocol.problems import validation_problems

log = get_logger("choird.runtime")

PROCESS_IMAGE: Final = "process"
"""version.json's `image_version` for an agent run from working trees, not an image."""
IDENTITY_FROM_AGENT: Final = ("SOUL.md", "SOUL-CORE.md")
"""Identity files the per-agent repo may override (§6.5); USER.md comes from global only."""
STOP_GRACE_S: Final = 15.0
"""How long a graceful stop (summary, flush, TERMINATE_SELF) may take before SIGTERM."""
TERM_GRACE_S: Final = 5.0
"""How long after SIGTERM before SIGKILL."""

StopReason = Literal["stop", "restart", "update", "workspace_reset"]
"""Why an agent is stopped (ShutdownPush.reason); restart and update resume its session."""
PushFn = Callable[[str, dict[str, Any]], object]
"""Send a ServerPush (JSON form) to a session's agent: the daemon's `PushHub.push`."""


@dataclass(frozen=True)
class AgentProcess:
    """One running choir-agent and the task waiting for it to exit."""

    agent_id: str
    session_id: str
    process: asyncio.subprocess.Process
    watcher: asyncio.Task[int]

    @property
    def pid(self) -> int:
        return self.process.pid


class ProcessRuntime:
    """Starts, stops and watches choir-agent processes on this host."""

    name: Final = "process"
    sandboxed: Final = False

    def __init__(self, home: ChoirHome, sessions: SessionService, push: PushFn) -> None:
        self._home = home
        self._sessions = sessions
        self._push = push
        self._agents: dict[str, AgentProcess] = {}

    def running(self, agent_id: str) -> AgentProcess | None:
        return self._agents.get(agent_id)

    def materialize(self, agent_id: str, config: ChoirConfig) -> tuple[Path, VersionInfo]:
        """Merge the agent's `/choir` tree from the repos; the tree and its version.json."""
        global_repo = _local_repo(config.global_repo.url, "global_repo.url")
        agent_repo = _local_repo(config.agents[agent_id].repo.url, f"agents.{agent_id}.repo.url")
        tree = self._home.root / "runtime" / agent_id / "choir"
        shutil.rmtree(tree, ignore_errors=True)
        merge_tree(global_repo, agent_repo, tree)
        version = VersionInfo(
            agent_id=agent_id,
            image_version=PROCESS_IMAGE,
            global_repo_commit=_commit(global_repo),
            agent_repo_commit=_commit(agent_repo),
            **manifest_hashes(tree),
        )
        (tree / "version.json").write_text(version.model_dump_json(indent=2) + "\n")
        return tree, version

    async def start(
        self, agent_id: str, started: StartedSession, *, root: Path, workspace: Path, socket: Path
    ) -> AgentProcess:
        """Spawn choir-agent for `started`; its stderr appends to `logs/<agent-id>.log`."""
        if agent_id in self._agents:
            raise ConflictError(f"{agent_id} already has a running process: stop it first")
        agent_home = root.parent / "home"
        with _prepare(self._home, agent_id, started, workspace, agent_home) as stderr:
            process = await asyncio.create_subprocess_exec(
                str(Path(sys.executable).parent / "choir-agent"),
                "--control-plane",
                "uds",
                "--socket",
                str(socket),
                "--root",
                str(root),
                "--workspace",
                str(workspace),
                env=agent_environment(agent_id, started, agent_home),
                cwd=workspace,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        watcher = asyncio.create_task(self._watch(agent_id, started.session_id, process))
        self._agents[agent_id] = AgentProcess(agent_id, started.session_id, process, watcher)
        log.info(
            "agent process started",
            fields={"agent_id": agent_id, "session_id": started.session_id, "pid": process.pid},
        )
        return self._agents[agent_id]

    async def stop(self, agent_id: str, reason: StopReason = "stop") -> int | None:
        """Graceful stop (§17.2): shutdown push, then SIGTERM, then SIGKILL; the exit code."""
        agent = self._agents.get(agent_id)
        if agent is None:
            return None
        self._sessions.expect_shutdown(agent.session_id, reason)
        self._push(agent.session_id, ShutdownPush(reason=reason).model_dump(mode="json"))
        for grace, next_signal in ((STOP_GRACE_S, signal.SIGTERM), (TERM_GRACE_S, signal.SIGKILL)):
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(agent.watcher), grace)
            log.warning(
                "agent did not stop in time",
                fields={"agent_id": agent_id, "signal": next_signal.name},
            )
            _signal_group(agent.process, next_signal)
        return await agent.watcher

    async def stop_all(self) -> None:
        """Stop every running agent, gracefully first (choird shutting down)."""
        await asyncio.gather(*(self.stop(agent_id) for agent_id in list(self._agents)))

    async def _watch(
        self, agent_id: str, session_id: str, process: asyncio.subprocess.Process
    ) -> int:
        code = await process.wait()
        self._agents.pop(agent_id, None)
        log.info("agent process exited", fields={"agent_id": agent_id, "exit_code": code})
        try:
            await self._sessions.mark_crashed(
                session_id, f"choir-agent exited with code {code} without TERMINATE_SELF"
            )
        except Exception:  # the daemon may be closing its database; the reaper catches up
            log.exception("could not mark the session crashed", fields={"agent_id": agent_id})
        return code


def _prepare(
    home: ChoirHome, agent_id: str, started: StartedSession, workspace: Path, agent_home: Path
) -> BinaryIO:
    """Check the workspace, make the agent's HOME; its log, opened for appending."""
    if not workspace.is_dir():
        raise UsageError(
            f"workspace {started.bindings.workspace} is missing ({workspace}): "
            "create the directory or bind another with --workspace"
        )
    agent_home.mkdir(exist_ok=True)
    home.logs.mkdir(parents=True, exist_ok=True)
    return home.agent_log(agent_id).open("ab")


def agent_environment(agent_id: str, started: StartedSession, home: Path) -> dict[str, str]:
    """The agent's whole environment: its identity, and no variable of choird's own."""
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
    return {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "CHOIR_AGENT_ID": agent_id,
        "CHOIR_SESSION_ID": started.session_id,
        "CHOIR_LEASE_TOKEN": started.lease_token,
    }


def merge_tree(global_repo: Path, agent_repo: Path, tree: Path) -> None:
    """§6.5's merge into §15.1's layout: tools side by side (the agent's override by name in
    the registry), skills merged by file name (agent wins), identity agent-first except USER.md."""
    _copy_dir(global_repo / "tools", tree / "tools" / "global")
    _copy_dir(agent_repo / "tools", tree / "tools" / "agent")
    (tree / "skills").mkdir(parents=True)
    for source in (global_repo / "skills", agent_repo / "skills"):
        for skill in sorted(source.glob("*.json")) if source.is_dir() else []:
            shutil.copyfile(skill, tree / "skills" / skill.name)
    _copy_file(global_repo / "identity" / "USER.md", tree / "USER.md")
    for name in IDENTITY_FROM_AGENT:
        agent_copy = agent_repo / "identity" / name
        _copy_file(
            agent_copy if agent_copy.is_file() else global_repo / "identity" / name, tree / name
        )


def manifest_hashes(tree: Path) -> dict[str, str]:
    """version.json's `tool_manifest_hash` and `skill_manifest_hash` of the merged tree."""
    problems: list[str] = []
    tools: dict[str, ToolManifest] = {}
    for origin in ("global", "agent"):
        for path in sorted((tree / "tools" / origin).glob("*.json")):
            try:
                manifest = ToolManifest.model_validate_json(path.read_bytes())
            except ValidationError as error:
                problems.extend(
                    f"tools/{origin}/{path.name}: {p}" for p in validation_problems(error)
                )
                continue
            tools[manifest.name] = manifest
    if problems:
        raise ConfigError(problems, header="the agent's tools are invalid: fix them in its repos")
    skills = load_skills(tree / "skills", known_tools=[*tools, *CONTROL_TOOLS])
    return {
        "tool_manifest_hash": tool_manifest_hash(tools.values()),
        "skill_manifest_hash": skill_manifest_hash(skills.values()),
    }


def _local_repo(url: str, field: str) -> Path:
    path = Path(url).expanduser()
    if not url or not path.is_absolute() or not path.is_dir():
        raise UsageError(
            f"{field} {url!r} is not a local directory: the process runtime reads the repos' "
            "working trees; set it to an absolute path (remote repos need a container build)"
        )
    return path


def _commit(repo: Path) -> str:
    """HEAD of the repo's working tree, marked when it has uncommitted changes."""
    if not is_repo(repo):
        return "none"
    head = git(repo, "rev-parse", "HEAD").strip()
    dirty = git(repo, "status", "--porcelain").strip()
    return f"{head}+dirty" if dirty else head


def _copy_dir(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    else:
        target.mkdir(parents=True)


def _copy_file(source: Path, target: Path) -> None:
    if source.is_file():
        shutil.copyfile(source, target)


def _signal_group(process: asyncio.subprocess.Process, signum: signal.Signals) -> None:
    """`signum` to the agent's process group (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)
