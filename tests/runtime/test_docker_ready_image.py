"""A docker start reuses the image it last made ready while that is still the latest build for
the agent — checked with a file read and one image inspect, not a scan of the engine's images —
and asks for the image again as soon as a build made another or the image is gone."""

from __future__ import annotations

import io
from collections.abc import Iterator

import docker
import pytest

from choir.config import ChoirConfig
from choir.daemon.app import ChoirDaemon
from choir.daemon.images.build import latest_image_file, note_latest_image
from choir.daemon.runtimes.base import Artefact
from choir.home import ChoirHome
from tests.docker_support import BASE_IMAGE, VERSION, own_image, runtime_on


@pytest.fixture
def built(engine: docker.DockerClient) -> Iterator[str]:
    """A small image of this test's own (removed after), standing for a newer build."""
    with own_image(engine, "choir-rt-test-ready", f"FROM {BASE_IMAGE}\n") as tag:
        yield tag


async def test_a_start_reuses_the_latest_image_until_a_build_or_removal(
    daemon: ChoirDaemon, engine: docker.DockerClient, built: str
) -> None:
    made_ready: list[str] = []
    current = {"image": BASE_IMAGE}

    async def images(home: ChoirHome, _config: ChoirConfig, agent_id: str) -> Artefact:
        """What ensure_agent_image does, as far as the runtime can tell: note the build."""
        image = engine.images.get(current["image"]).id
        note_latest_image(home, agent_id, image)
        made_ready.append(current["image"])
        return Artefact(VERSION, image=current["image"])

    runtime, config = await runtime_on(daemon, images)
    assert (await runtime.prepare("agent-1", config)).image == BASE_IMAGE
    assert (await runtime.prepare("agent-1", config)).image == BASE_IMAGE
    assert made_ready == [BASE_IMAGE], "the second start asked for the image again"

    current["image"] = built  # a build (agent.build, agent update) made another image
    note_latest_image(daemon.home, "agent-1", engine.images.get(built).id)
    assert (await runtime.prepare("agent-1", config)).image == built
    assert (await runtime.prepare("agent-1", config)).image == built
    assert made_ready == [BASE_IMAGE, built]

    engine.images.remove(built, force=True)  # gone from the engine: made ready again
    engine.images.build(
        fileobj=io.BytesIO(f"FROM {BASE_IMAGE}\nLABEL choir.test={built}-2\n".encode()),
        tag=built,
        rm=True,
    )
    assert (await runtime.prepare("agent-1", config)).image == built
    assert made_ready == [BASE_IMAGE, built, built]
    assert latest_image_file(daemon.home, "agent-1").read_text() == engine.images.get(built).id
