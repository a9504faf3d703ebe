"""The apply pipeline on the docker runtime (issue 17): an approved `choir.propose.skill` is
committed, merged, built into a new agent image by a real `docker build` and the agent's
container replaced by one of it, its session resumed — then the agent starts the new skill.

choird runs as a real process with `--runtime docker`; the scripted model runs inside the
agent's container on its loopback (`serve_model_in`: a container reaches nothing else), started
again in the container the update made. Skipped without an engine, failed in CI
(`CHOIR_REQUIRE_DOCKER=1`), like every docker test.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from choir.config.scaffolding.gitrepo import git
from choir.store.postgres.target import ConnectParams
from tests.docker_support import require_docker
from tests.faults.scene import home_for
from tests.faults.support import IN_CONTAINER_PORT, as_json, serve_model_in, spawn_choird, teardown
from tests.harness.homes import read_config
from tests.proposals.test_skill_apply_live import SCRIPT, Scene
from tests.security.test_docker_http import build

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture
def scene(root: Path, pg_params: ConnectParams) -> Any:
    require_docker()
    home = home_for(root, pg_params, f"http://127.0.0.1:{IN_CONTAINER_PORT}/v1")
    workspace = Path(read_config(home)["workspaces"]["default"]["path"])
    (workspace / ".script.json").write_text(SCRIPT.model_dump_json())
    made = Scene(home)
    yield made
    teardown(made.home, made.choird)


async def container_of(scene: Scene) -> str:
    return str(as_json(await scene.ctl("agent", "status", "agent-1", "--json"))["container"])


def in_container(container: str, *command: str) -> str:
    done = subprocess.run(
        ["docker", "exec", container, *command], capture_output=True, text=True, timeout=60
    )
    return done.stdout


async def test_an_approved_skill_is_built_into_a_new_image_and_the_container_replaced(
    scene: Scene,
) -> None:
    scene.choird = await asyncio.to_thread(spawn_choird, scene.home, "--runtime", "docker")
    built = await asyncio.to_thread(build, scene.home)  # the first image: longer than a start
    assert built.returncode == 0, built.stderr
    started = as_json(await scene.ctl("agent", "start", "agent-1", "--dm", "console", "--json"))
    session = started["session_id"]
    before = await container_of(scene)
    await asyncio.to_thread(serve_model_in, before)
    said = await scene.ctl("chat", "agent-1", "please build a triage skill")
    assert "I proposed the triage skill." in said.stdout, (said.stdout, said.stderr)
    [approval] = as_json(await scene.ctl("approval", "list", "--json"))["approvals"]
    old_image = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))["image"]

    approved = await scene.ctl("approval", "approve", approval["approval_id"])
    assert approved.returncode == 0, approved.stderr
    shown = await scene.ended(approval["approval_id"], within=1200)

    assert shown["status"] == "applied", shown
    apply = shown["apply"]
    assert apply["step"] == "done"
    assert apply["image_id"].startswith("sha256:")  # what docker built
    assert git(scene.repo, "rev-parse", "main").strip() == apply["commit_id"]
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert status["session_id"] == session  # resumed in the new container
    after = str(status["container"])
    assert status["image"] != old_image, (status["image"], old_image)
    assert "triage.json" in in_container(after, "find", "/choir", "-name", "triage.json")

    await asyncio.to_thread(serve_model_in, after)
    said = await scene.ctl("chat", "agent-1", "now use the triage skill")
    assert "Triage is running." in said.stdout, (said.stdout, said.stderr)
