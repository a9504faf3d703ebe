"""config.json `container`: where agents run and the cgroup limits of their containers (§15.3).

Read by choird at startup and at every agent start; a change applies to agents started after
it (`choirctl agent restart`), never to running containers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from choir.config.base import ConfigModel


def _network(name: str) -> str:
    if name == "host" or name.startswith("container:"):
        raise PydanticCustomError(
            "shared_network",
            "must not share another network namespace (host or container:…, §15.3): "
            "use bridge or a network created with docker network create",
        )
    return name


class ContainerConfig(ConfigModel):
    """How choird runs agents; the limits apply to the docker runtime."""

    runtime: Literal["auto", "docker", "process"] = "auto"
    """`docker` (sandboxed), `process` (a host subprocess in a bwrap sandbox, or unsandboxed
    where bwrap cannot run: development and hosts without Docker) or `auto`: docker when an
    engine answers, else process. `choird --runtime` overrides it."""
    base_image: Annotated[str, Field(min_length=1)] = "debian:bookworm-slim"
    """The OS image `Dockerfile.base` builds FROM (§17.3); it must be in the local image cache
    or pullable (scripts/ensure-docker makes the default without a registry)."""
    cpus: Annotated[float, Field(ge=0.1, le=1024)] = 1.0
    """CPUs one agent container may use (may not exceed the host's)."""
    memory_mb: Annotated[int, Field(ge=64)] = 2048
    """Memory limit of one agent container, in MiB; swap is not allowed on top."""
    pids: Annotated[int, Field(ge=16)] = 512
    """Most processes and threads one agent container may run."""
    network: Annotated[str, Field(min_length=1), AfterValidator(_network)] = "bridge"
    """Docker network of agent containers; agents need outbound access to their LLM endpoint
    (§18.1). Never `host`."""
