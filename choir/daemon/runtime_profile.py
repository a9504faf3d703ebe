"""The security profile an agent container gets, from config.json `container` (§15.3)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from choir.config.container import ContainerConfig
from choir.core.security_profile import ContainerLimits, SecurityProfile
from choir.errors import ConfigError

MIB = 1024 * 1024


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
