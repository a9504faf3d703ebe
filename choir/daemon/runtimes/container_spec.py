"""What an agent container gets: its image, its security profile from config.json `container`
(§15.3) and the uid it runs as, its command and its identity-only environment; and the kernel's
view of it."""

from __future__ import annotations

import os
import pwd
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from choir.adapters.docker.host import DEFAULT_SOCKET
from choir.config import ChoirConfig
from choir.config.container import AGENT_UID_SPAN
from choir.core.security.agent_users import agent_uids
from choir.core.security.profile import (
    SOCKET_TARGET,
    WORKSPACE_TARGET,
    ContainerLimits,
    SecurityProfile,
    parse_proc_status,
)
from choir.daemon.proposals.repo_change import mount_source
from choir.daemon.runtimes.agent_link import HttpLink, control_plane_args
from choir.daemon.runtimes.base import Artefact
from choir.errors import ConfigError
from choir.home import ChoirHome

MIB = 1024 * 1024
ImageSource = Callable[[ChoirHome, ChoirConfig, str], Awaitable[Artefact]]
"""Makes the agent's image ready: `ensure_agent_image`, as an Artefact."""
ConfigFn = Callable[[], ChoirConfig]


def agent_command(link: HttpLink | None) -> tuple[str, ...]:
    """choir-agent's command in the container: its socket at /run/choir, or choird's HTTPS
    listener on the bridge (`bridge_link`) trusting the certificate copied beside that socket.
    The lease token comes on stdin, never here."""
    return (
        "choir-agent",
        *control_plane_args(Path(SOCKET_TARGET), link),
        "--root=/choir",
        f"--workspace={WORKSPACE_TARGET}",
        "--lease-token-stdin",
    )


EXEC_WAIT_S: Final = 5.0
"""How long `kernel_view` waits for a just-started container's process to become its own."""
AGENT_HOME: Final = "/tmp/home"
"""HOME inside the container: on the /tmp tmpfs, private to this container."""


async def built_image(home: ChoirHome, config: ChoirConfig, agent_id: str) -> Artefact:
    """The agent's image from `agent build` (§17.3), built first if anything changed."""
    from choir.daemon.images.build import ensure_agent_image

    ref = await ensure_agent_image(home, config, agent_id)
    return Artefact(ref.version, image=ref.tag, image_id=ref.id)


def agent_profile(config: ChoirConfig, agent_id: str, network: str) -> SecurityProfile:
    """The profile of `agent_id`'s container started now on `network`: config's limits, and
    the agent's own uid:gid when choird is root (`agent_user`), else choird's."""
    container = config.container
    host_cpus = os.cpu_count() or 1
    if container.cpus > host_cpus:
        raise ConfigError(
            [f"container.cpus: {container.cpus:g} is more than this host's {host_cpus} CPUs"],
            header="config.json cannot be applied to a container: lower container.cpus",
        )
    limits = ContainerLimits(container.cpus, container.memory_mb * MIB, container.pids)
    uid, gid = agent_user(config, agent_id)
    privileged = os.geteuid() == 0
    return SecurityProfile(limits, f"{uid}:{gid}", network=network, mounts_enforced=privileged)


def agent_user(config: ChoirConfig, agent_id: str) -> tuple[int, int]:
    """The uid:gid `agent_id`'s container runs as: never 0. choird's own when it is not root
    (it could not give the workspace to anyone else); as root, the agent's uid from
    `container.agent_uid_base`, which must be no host user's."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    uid = agent_uids(config.agents, config.container.agent_uid_base, AGENT_UID_SPAN)[agent_id]
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid, uid
    raise ConfigError(
        [f"container.agent_uid_base: {agent_id}'s uid {uid} is the host user {user}'s"],
        header="an agent must not share a uid with a host user: move container.agent_uid_base "
        "to a range no user has",
    )


def container_repo(config: ChoirConfig, agent_id: str) -> tuple[Path, str] | str:
    """`mount_source` for a container: (the repo's host path, ref) mounted read-only, or why
    not — which includes a repo the container's uid could not read (choird as root runs it as
    the agent's own uid, for which only the "other" permission bits count)."""
    source = mount_source(config, agent_id)
    if isinstance(source, str) or os.geteuid() != 0:
        return source
    for path in (source[0], source[0] / ".git"):
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            continue  # a bare repository has no .git
        except OSError as error:
            return f"cannot read {path}: {error.strerror}"
        if mode & (stat.S_IROTH | stat.S_IXOTH) != stat.S_IROTH | stat.S_IXOTH:
            return (
                f"{path} is not readable by the agent's uid (mode {stat.S_IMODE(mode):04o}): "
                f"chmod -R o+rX {source[0]} to let the agent clone it"
            )
    return source


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def loopback_endpoint(config: ChoirConfig, llm: str) -> str | None:
    """The model's endpoint when it is on loopback — inside a container that is the container
    itself, so every LLM call would fail; None when it is reachable (or the demo model)."""
    model = config.models.get(llm)
    if model is None or model.endpoint is None:
        return None
    host = urlsplit(model.endpoint).hostname or ""
    return model.endpoint if host in ("localhost", "::1") or host.startswith("127.") else None


def container_environment(agent_id: str, session_id: str) -> dict[str, str]:
    """Identity only (§14.1): never a secret, never choird's own environment."""
    return {
        "HOME": AGENT_HOME,
        "LANG": "C.UTF-8",
        "CHOIR_AGENT_ID": agent_id,
        "CHOIR_SESSION_ID": session_id,
    }


def docker_socket_dir() -> str | None:
    """The directory of the engine's Unix socket (`$DOCKER_HOST`, else the default), resolved;
    None for an engine over TCP."""
    where = os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET
    if not where.startswith("unix://"):
        return None
    return os.path.realpath(os.path.dirname(where.removeprefix("unix://")))


@dataclass(frozen=True)
class KernelView:
    """The kernel's view of the container's main process (docker-init), as text."""

    status: dict[str, str]
    mountinfo: str


def kernel_view(pid: int | None) -> KernelView | None:
    """`/proc/<pid>/status` and `mountinfo` of the container's main process, when choird can
    see it. Right after a start the process may still be runc's (about to exec docker-init):
    that is waited out, briefly; a pid that stays someone else's is another PID namespace (a
    remote or rootless engine) and gives None, as does a process already gone."""
    if pid is None:
        return None
    deadline = time.monotonic() + EXEC_WAIT_S
    proc = Path(f"/proc/{pid}")
    try:
        while b"choir-agent" not in (proc / "cmdline").read_bytes():
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)
        status = (proc / "status").read_text()
        mountinfo = (proc / "mountinfo").read_text()
    except OSError:
        return None
    return KernelView(parse_proc_status(status), mountinfo)
