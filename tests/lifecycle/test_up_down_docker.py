"""`choir up` on a machine with Docker: the default agent is built into an image and runs in a
hardened container; `agent update` rebuilds it and resumes the session; `choir down` leaves no
container behind. Skipped without an engine (failed in CI, `CHOIR_REQUIRE_DOCKER=1`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import pytest

from choir.home import ChoirHome
from tests.docker_support import require_docker
from tests.harness.processes import run_choirctl
from tests.lifecycle.support import commit_file
from tests.lifecycle.test_up_down import choir, processes_of
from tests.runtime.conftest import BUILD_TIMEOUT_S

# two image builds: minutes on a loaded machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT_S)]


def containers_of(home: ChoirHome) -> list[str]:
    client = docker.from_env()
    try:
        found = client.containers.list(all=True, filters={"label": f"choir.home={home.root}"})
        return [str(container.name) for container in found]
    finally:
        client.close()


def remove_images(tags: set[str]) -> None:
    client = docker.from_env()
    try:
        for tag in tags:
            client.images.remove(tag, force=True)
    finally:
        client.close()


def status(home: ChoirHome) -> dict[str, Any]:
    done = run_choirctl(home, "agent", "status", "agent-1", "--json")
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_up_on_docker_chat_update_and_down(root: Path) -> None:
    require_docker()
    home = ChoirHome(root / "h")
    tags: set[str] = set()
    try:
        up = choir(home, "up", "--no-tui", "--runtime", "docker")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "agent-1   built" in up.stdout
        assert "docker runtime (sandboxed), DM console" in up.stdout
        before = status(home)
        tags.add(f"choir-agent-agent-1:{before['image']['image_version']}")
        assert (before["runtime"], before["sandboxed"]) == ("docker", True)
        assert containers_of(home) != []

        reply = run_choirctl(home, "chat", "agent-1", "hello")
        assert reply.returncode == 0, reply.stderr
        assert reply.stdout.startswith("Hello!")

        commit_file(home.sources / "global", "identity/USER.md", "The operator likes tea.\n")
        update = run_choirctl(home, "agent", "update", "agent-1")
        after = status(home)
        tags.add(f"choir-agent-agent-1:{after['image']['image_version']}")
        assert update.returncode == 0, update.stderr
        assert update.stdout.startswith("agent-1 redeployed: session ")
        assert "build step 6/10 agent image" in update.stderr
        assert after["session_id"] == before["session_id"]
        assert after["image"] != before["image"]
        assert run_choirctl(home, "chat", "agent-1", "hello").stdout.startswith("Hello!")

        down = choir(home, "down")
        assert down.returncode == 0, down.stderr
        assert containers_of(home) == []
        assert processes_of(home) == []
    finally:
        choir(home, "down")  # after a failure: nothing may outlive the test
        remove_images(tags)
