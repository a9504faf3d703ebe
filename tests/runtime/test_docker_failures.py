"""A docker start that cannot become a running agent says why in one line and leaves nothing.

The docker runtime runs on a real engine with images made for the case — one without
`choir-agent`, one whose `choir-agent` exits at once — for a session of a real choird.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from choir.config import ChoirConfig
from choir.core.security.mountinfo import Mount, mount_at, parse_mountinfo
from choir.daemon.app import ChoirDaemon
from choir.daemon.runtimes.base import Artefact
from choir.daemon.runtimes.docker import DockerRuntime
from choir.errors import ChoirError
from choir.home import ChoirHome
from choir.store.sessions import SessionStatus
from tests.docker_support import BASE_IMAGE, VERSION, own_image, runtime_on
from tests.harness.agent_logs import agent_log_text
from tests.harness.daemons import poll_until, session_row
from tests.runtime.conftest import containers_of

pytestmark = pytest.mark.slow

EXITS_AT_ONCE = "choir-rt-test-exits"
"""The repository of the image whose entry point exits at once; each test tags its own."""
EXITED = "agent-1's container exited at once (code {code}): see choirctl logs agent-1"
DOCKERFILE = f"""FROM {BASE_IMAGE}
RUN printf '#!/bin/sh\\nexit 3\\n' > /usr/local/bin/choir-agent \\
    && chmod +x /usr/local/bin/choir-agent
"""


@pytest.fixture
def exiting_image(engine: docker.DockerClient) -> Iterator[str]:
    with own_image(engine, EXITS_AT_ONCE, DOCKERFILE) as tag:
        yield tag


async def start_on(
    daemon: ChoirDaemon, image: str, image_id: str | None = None
) -> tuple[DockerRuntime, str, str | None]:
    """Start agent-1's session on a docker runtime whose image is `image` (built as
    `image_id`): the runtime, the session and the refusal — None when the container was still
    running when checked (its exit is then noticed by the watcher)."""

    async def images(_home: ChoirHome, _config: ChoirConfig, _agent: str) -> Artefact:
        return Artefact(VERSION, image=image, image_id=image_id)

    runtime, config = await runtime_on(daemon, images)
    services = daemon.services
    assert services is not None
    started = await services.sessions.start("agent-1", {})
    artefact = await runtime.prepare("agent-1", config)
    workspace = Path(config.workspaces[started.bindings.workspace].path)
    socket = await daemon.open_agent_socket("agent-1")
    try:
        await runtime.start("agent-1", started, artefact, workspace=workspace, socket=socket)
    except ChoirError as refused:
        return runtime, started.session_id, refused.message
    return runtime, started.session_id, None


async def settled(daemon: ChoirDaemon, runtime: DockerRuntime, session_id: str) -> None:
    """The end state either way: session crashed, no container, nothing running."""

    async def crashed() -> bool:
        return (await session_row(daemon, session_id)).status == SessionStatus.CRASHED

    await poll_until(crashed, within=10)
    engine = docker.from_env()
    try:
        await poll_until(lambda: not containers_of(engine, daemon.home), within=10)
    finally:
        engine.close()
    assert runtime.running("agent-1") is None


def crash_reason(caplog: pytest.LogCaptureFixture, session_id: str) -> str:
    (crash,) = [
        record.fields  # type: ignore[attr-defined]
        for record in caplog.records
        if record.message == "session crashed" and record.fields.get("session_id") == session_id  # type: ignore[attr-defined]
    ]
    return str(crash["reason"])


async def test_an_image_without_choir_agent_crashes_saying_why(
    daemon: ChoirDaemon, caplog: pytest.LogCaptureFixture
) -> None:
    runtime, session_id, refusal = await start_on(daemon, BASE_IMAGE)
    try:
        await settled(daemon, runtime, session_id)
        assert refusal in (
            None,
            "agent-1's container exited at once (code 127): see choirctl logs agent-1",
        )
        assert "choir-agent" in agent_log_text(daemon.home, "agent-1")  # docker-init's word
        assert crash_reason(caplog, session_id) == (
            "choir-agent exited with code 127 without ending its session"
        )
    finally:
        runtime.close()


async def test_an_agent_exiting_at_once_crashes_with_its_code(
    daemon: ChoirDaemon, exiting_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    runtime, session_id, refusal = await start_on(daemon, exiting_image)
    try:
        await settled(daemon, runtime, session_id)
        assert refusal in (
            None,
            "agent-1's container exited at once (code 3): see choirctl logs agent-1",
        )
        assert crash_reason(caplog, session_id) == (
            "choir-agent exited with code 3 without ending its session"
        )
    finally:
        runtime.close()


async def test_a_start_runs_the_image_built_even_if_its_tag_moved_since(
    daemon: ChoirDaemon,
    engine: docker.DockerClient,
    exiting_image: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # another home on this host builds the same agent id at the same commits: same tag, its
    # own image. The start must run the image this home built (exits 3), not what the tag
    # names now (the base image, without choir-agent: 127)
    built = engine.images.get(exiting_image).id
    runtime, session_id, refusal = await start_on(daemon, BASE_IMAGE, built)
    try:
        await settled(daemon, runtime, session_id)
        assert refusal in (None, EXITED.format(code=3))
        assert crash_reason(caplog, session_id) == (
            "choir-agent exited with code 3 without ending its session"
        )
    finally:
        runtime.close()


def workspace_mount(path: str) -> Mount | None:
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    return mount_at(mounts, os.path.realpath(path))


async def test_a_container_that_cannot_be_created_leaves_no_mount_no_container_no_task(
    daemon: ChoirDaemon,
) -> None:
    # the egress rules are installed while the container is created: a create that fails must
    # still release the workspace and wait for the rules, never leave either behind
    runtime, _, refusal = await start_on(daemon, "choir-rt-test-missing:none")
    try:
        assert refusal is not None
        assert "choir-rt-test-missing" in refusal, refusal
        assert runtime.running("agent-1") is None
        engine = docker.from_env()
        try:
            assert not containers_of(engine, daemon.home)
        finally:
            engine.close()
        assert daemon.services is not None
        workspace = daemon.services.stage.running.config.workspaces["default"].path
        assert workspace_mount(workspace) is None  # the nosuid bind of a root choird, undone
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("egress-")]
    finally:
        runtime.close()
