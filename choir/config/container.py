"""config.json `container`: where agents run, the cgroup limits of their containers (§15.3), the
uids they run as and what their network may reach.

Read by choird at startup and at every agent start; a change applies to agents started after
it (`choirctl agent restart`), never to running containers.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from choir.config.base import ConfigModel

MANAGED_NETWORK: Final = "choir"
"""The `network` value that means "choir's own bridge", where egress is filtered."""
AGENT_UID_SPAN: Final = 65536
"""Agent uids are `agent_uid_base` … `agent_uid_base + AGENT_UID_SPAN - 1`."""
MAX_UID: Final = 2**31 - 1
"""Highest uid choir hands out: some tools read uids as signed 32-bit numbers."""


def _network(name: str) -> str:
    if name == "host" or name.startswith("container:"):
        raise PydanticCustomError(
            "shared_network",
            "must not share another network namespace (host or container:…, §15.3): "
            "use choir (the default) or a network created with docker network create",
        )
    return name


class ContainerConfig(ConfigModel):
    """How choird runs agents; the limits apply to the docker runtime."""

    runtime: Literal["auto", "docker", "process"] = "auto"
    """`docker` (sandboxed), `process` (a host subprocess, unsandboxed: development and hosts
    without Docker) or `auto`: docker when an engine answers, else process. `choird --runtime`
    overrides it."""
    base_image: Annotated[str, Field(min_length=1)] = "debian:bookworm-slim"
    """The OS image `Dockerfile.base` builds FROM (§17.3); it must be in the local image cache
    or pullable (scripts/ensure-docker makes the default without a registry)."""
    cpus: Annotated[float, Field(ge=0.1, le=1024)] = 1.0
    """CPUs one agent container may use (may not exceed the host's)."""
    memory_mb: Annotated[int, Field(ge=64)] = 2048
    """Memory limit of one agent container, in MiB; swap is not allowed on top."""
    pids: Annotated[int, Field(ge=16)] = 512
    """Most processes and threads one agent container may run."""
    network: Annotated[str, Field(min_length=1), AfterValidator(_network)] = MANAGED_NETWORK
    """Docker network of agent containers. `choir` (default): a bridge choird creates and
    filters (see `allow_host_access`, `allow_metadata`); any other name is the operator's own
    network, used as it is and not filtered. Agents need outbound access to their LLM endpoint
    (§18.1). Never `host`."""
    allow_host_access: bool = False
    """Let agents reach services on this host's own addresses (the bridge gateway, the host's
    IPs, ports other containers publish) — e.g. a model server on the host. Blocked by default."""
    allow_metadata: bool = False
    """Let agents reach link-local addresses (169.254.0.0/16: a cloud's instance metadata and
    credentials). Blocked by default."""
    agent_uid_base: Annotated[int, Field(ge=1000, le=MAX_UID - AGENT_UID_SPAN + 1)] = 2_000_000_000
    """When choird runs as root, each agent's container runs as a uid:gid of its own in
    `agent_uid_base` … `agent_uid_base + 65535` (from a hash of the agent id), never 0. Pick a
    range no host user and no /etc/subuid range uses. (A non-root choird runs agents as itself.)"""
