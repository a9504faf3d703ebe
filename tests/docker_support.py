"""Docker in tests: skip where no engine answers, fail in CI (`CHOIR_REQUIRE_DOCKER=1`).

A developer without Docker still runs the rest of the suite; CI installs and starts an engine
(`scripts/ensure-docker` in `.ci/run`) and sets CHOIR_REQUIRE_DOCKER=1, so a missing engine
there is a failure, never a silent skip.

    from tests.docker_support import require_docker

    def test_x() -> None:
        require_docker()          # skip (or fail in CI) unless an engine answers
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Final

import pytest

REQUIRE_ENV: Final = "CHOIR_REQUIRE_DOCKER"
"""Set to 1 (CI) to turn "no Docker engine" into a failure."""
BASE_IMAGE: Final = "debian:bookworm-slim"
"""The base OS image scripts/ensure-docker makes available locally."""


@functools.cache
def engine_problem() -> str | None:
    """Why Docker tests cannot run here, or None when an engine answers with the base image."""
    import docker
    import docker.errors
    import requests.exceptions

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
        for image in client.images.list(filters={"label": "choir.role=agent"}):
            home = image.labels.get("choir.home")
            if not home or os.path.exists(home):
                continue
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(str(image.id), force=True)
                removed += 1
    finally:
        client.close()
    return removed
