"""Fixtures of the image build tests: one wheelhouse and one global remote per session.

The wheelhouse is built from this source tree once (the real path: `pip wheel` of choir, `pip
download` of choir-agent's dependencies) and then frozen through `$CHOIR_WHEELHOUSE`, so edits
to the source while the suite runs cannot turn a no-op build into a rebuild. Its cache is the
session's `build_cache` (tests/conftest.py), kept between runs: a rerun with an unchanged tree
downloads nothing. Every test home clones the same `file://`
global remote, so the base image (keyed by the global repo's HEAD) is built once per session.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from choir.adapters.docker.engine import DockerEngine
from choir.config import init_home
from choir.daemon.images.wheelhouse import WHEELHOUSE_ENV, ensure_wheelhouse
from choir.home import ChoirHome
from tests.build.support import bare_remote, make_home, set_repo
from tests.docker_support import require_docker


@pytest.fixture(scope="session")
def wheelhouse(build_cache: Path) -> Iterator[Path]:
    """A wheelhouse built from this checkout, frozen for the session via $CHOIR_WHEELHOUSE."""
    require_docker()
    saved = os.environ.pop(WHEELHOUSE_ENV, None)
    frozen = Path(tempfile.mkdtemp(prefix="choir-wheelhouse-"))
    try:
        wheels = ensure_wheelhouse(ChoirHome(frozen / "unused-home"))
        shutil.copytree(wheels.choir, frozen / "choir")
        shutil.copytree(wheels.deps, frozen / "deps")
        os.environ[WHEELHOUSE_ENV] = str(frozen)
        yield frozen
    finally:
        if saved is None:
            os.environ.pop(WHEELHOUSE_ENV, None)
        else:
            os.environ[WHEELHOUSE_ENV] = saved
        shutil.rmtree(frozen, ignore_errors=True)


@pytest.fixture(scope="session")
def global_remote(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A `file://` bare repo holding the starter global repo (as `choirctl init` makes it)."""
    root = tmp_path_factory.mktemp("global-remote")
    seeded = ChoirHome(root / "seed-home")
    init_home(seeded)
    return bare_remote(seeded.sources / "global", root / "global.git")


@pytest.fixture
def docker_sdk() -> Iterator[docker.DockerClient]:
    require_docker()
    client = docker.from_env(timeout=120)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
async def engine() -> AsyncIterator[DockerEngine]:
    require_docker()
    engine = await DockerEngine.connect()
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture
def build_home(
    tmp_path: Path, wheelhouse: Path, global_remote: str, docker_sdk: docker.DockerClient
) -> Iterator[tuple[ChoirHome, str]]:
    """A fresh home on the shared global remote with a test-unique agent; its images are
    removed afterwards."""
    home, agent_id = make_home(tmp_path)
    set_repo(home, None, global_remote)
    try:
        yield home, agent_id
    finally:
        remove_agent_images(docker_sdk, agent_id)


def remove_agent_images(client: docker.DockerClient, agent_id: str) -> None:
    for image in client.images.list(filters={"label": f"choir.agent={agent_id}"}):
        with contextlib.suppress(docker.errors.APIError):  # still used by a container
            client.images.remove(image.id, force=True)
