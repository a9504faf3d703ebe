"""Docker in tests: skip where no engine answers, fail in CI (`CHOIR_REQUIRE_DOCKER=1`).

A developer without Docker still runs the rest of the suite; CI installs and starts an engine
(`scripts/ensure-docker` in `.ci/run`) and sets CHOIR_REQUIRE_DOCKER=1, so a missing engine
there is a failure, never a silent skip.

    from tests.docker_support import require_docker

    def test_x() -> None:
        require_docker()          # skip (or fail in CI) unless an engine answers

The docker runtime's own tests start it on images made for the case rather than on a built
agent image: `own_image` builds one (a test-unique tag, removed after) and `runtime_on` makes a
`DockerRuntime` of a running choird's services that starts whatever image `images` names.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Final

import pytest

from choir.protocol import VersionInfo

if TYPE_CHECKING:
    import docker

    from choir.config import ChoirConfig
    from choir.daemon.app import ChoirDaemon
    from choir.daemon.runtimes.base import Artefact
    from choir.daemon.runtimes.docker import DockerRuntime
    from choir.home import ChoirHome

REQUIRE_ENV: Final = "CHOIR_REQUIRE_DOCKER"
"""Set to 1 (CI) to turn "no Docker engine" into a failure."""
BASE_IMAGE: Final = "debian:bookworm-slim"
"""The base OS image scripts/ensure-docker makes available locally."""
VERSION: Final = VersionInfo(
    agent_id="agent-1",
    image_version="test",
    global_repo_commit="none",
    agent_repo_commit="none",
    tool_manifest_hash="0" * 64,
    skill_manifest_hash="0" * 64,
)
"""The version an image made for a test claims (no build made it)."""

Images = Callable[["ChoirHome", "ChoirConfig", str], Awaitable["Artefact"]]
"""What the docker runtime asks for the image to start (`ensure_agent_image`'s part)."""


@functools.cache
def engine_problem() -> str | None:
    """Why Docker tests cannot run here, or None when an engine answers with the base image."""
    import docker
    import docker.errors
    import requests.exceptions

    if (refused := socket_refused()) is not None:
        return f"no Docker engine answers ({refused}; run scripts/ensure-docker)"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
            client.images.get(BASE_IMAGE)
        finally:
            client.close()
    except docker.errors.ImageNotFound:
        return f"the base image {BASE_IMAGE} is missing (run scripts/ensure-docker)"
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as error:
        return f"no Docker engine answers ({type(error).__name__}; run scripts/ensure-docker)"
    return None


def socket_refused() -> str | None:
    """Why the engine's Unix socket refuses a connection, or None (or not a Unix socket).

    docker-py leaves the socket of a refused connect unclosed, and its ResourceWarning then
    fails whichever test the garbage collector happens to run in: ask with our own socket first.
    """
    import socket

    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(5)
        try:
            probe.connect(host.removeprefix("unix://"))
        except OSError as error:
            return type(error).__name__
    return None


def require_docker() -> None:
    """Skip the calling test without an engine — or fail it when CHOIR_REQUIRE_DOCKER=1."""
    problem = engine_problem()
    if problem is None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {problem}", pytrace=False)
    pytest.skip(problem)


def prune_orphan_images() -> int:
    """Remove the agent images built for homes that no longer exist; how many went.

    Every Docker test builds agent images labelled with its (temporary) home. Left behind they
    pile up by the hundred, and each label-filtered list choird makes (a no-op build's check,
    the base-image lookup) scans them all: seconds per call after a few suite runs.
    """
    if engine_problem() is not None:
        return 0
    import docker
    import docker.errors

    client = docker.from_env(timeout=30)
    removed = 0
    try:
        # the low-level list: `images.list` inspects each image after listing, and one removed
        # meanwhile by a parallel build (another checkout, another worker) failed the session
        for image in client.api.images(filters={"label": "choir.role=agent"}):
            home = (image.get("Labels") or {}).get("choir.home")
            if not home or os.path.exists(home):
                continue
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(str(image["Id"]), force=True)
                removed += 1
    finally:
        client.close()
    return removed


@contextlib.contextmanager
def own_image(engine: docker.DockerClient, repository: str, dockerfile: str) -> Iterator[str]:
    """`dockerfile` built as `repository:<unique tag>`, labelled with that tag so that it is an
    image of its own (parallel workers and other checkouts share the engine); its tag. Removed
    afterwards."""
    tag = f"{repository}:{uuid.uuid4().hex[:12]}"
    text = f"{dockerfile.rstrip()}\nLABEL choir.test={tag}\n"
    engine.images.build(fileobj=io.BytesIO(text.encode()), tag=tag, rm=True)
    try:
        yield tag
    finally:
        engine.images.remove(tag, force=True)


async def runtime_on(daemon: ChoirDaemon, images: Images) -> tuple[DockerRuntime, ChoirConfig]:
    """A docker runtime on `daemon`'s sessions and running config that asks `images` for the
    image to start; (the runtime, that config). The caller closes the runtime."""
    from choir.adapters.docker.containers import ContainerEngine
    from choir.adapters.docker.engine import DockerEngine
    from choir.daemon.runtimes.docker import DockerRuntime

    services = daemon.services
    assert services is not None
    config = services.stage.running.config
    engine = ContainerEngine(await DockerEngine.connect())
    runtime = DockerRuntime(
        daemon.home, services.sessions, daemon.hub.push, engine, lambda: config, images=images
    )
    return runtime, config
