"""What an agent container gets: its image, its security profile from config.json `container`
(§15.3), its command and its identity-only environment; and the kernel's view of it."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from choir.config import ChoirConfig
from choir.config.container import ContainerConfig
from choir.core.security_profile import (
    SOCKET_TARGET,
    WORKSPACE_TARGET,
    ContainerLimits,
    SecurityProfile,
    parse_proc_status,
)
from choir.daemon.runtime import Artefact
from choir.errors import ConfigError
from choir.home import ChoirHome

MIB = 1024 * 1024
ImageSource = Callable[[ChoirHome, ChoirConfig, str], Awaitable[Artefact]]
"""Makes the agent's image ready: `ensure_agent_image`, as an Artefact."""
ConfigFn = Callable[[], ChoirConfig]

AGENT_COMMAND: Final = (
    "choir-agent",
    "--control-plane=uds",
    f"--socket={SOCKET_TARGET}",
    "--root=/choir",
    f"--workspace={WORKSPACE_TARGET}",
    "--lease-token-stdin",
)
AGENT_HOME: Final = "/tmp/home"
"""HOME inside the container: on the /tmp tmpfs, private to this container."""


async def built_image(home: ChoirHome, config: ChoirConfig, agent_id: str) -> Artefact:
    """The agent's image from `agent build` (§17.3), built first if anything changed."""
    from choir.daemon.image_build import ensure_agent_image

    ref = await ensure_agent_image(home, config, agent_id)
    return Artefact(ref.version, image=ref.tag)


def agent_profile(config: ContainerConfig) -> SecurityProfile:
    """The profile of an agent container started now: config's limits, choird's uid:gid."""
    host_cpus = os.cpu_count() or 1
    if config.cpus > host_cpus:
        raise ConfigError(
            [f"container.cpus: {config.cpus:g} is more than this host's {host_cpus} CPUs"],
            header="config.json cannot be applied to a container: lower container.cpus",
        )
    limits = ContainerLimits(config.cpus, config.memory_mb * MIB, config.pids)
    return SecurityProfile(limits, user=f"{os.getuid()}:{os.getgid()}", network=config.network)


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


def proc_status(pid: int | None) -> dict[str, str] | None:
    """The kernel's view of the container's main process, when choird can see it."""
    if pid is None:
        return None
    try:
        if b"choir-agent" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return None  # another PID namespace (a remote or rootless engine)
        return parse_proc_status(Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return None
