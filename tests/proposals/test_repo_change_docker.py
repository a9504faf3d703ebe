"""`choir.propose.repo_change` on the docker runtime (issue 17): the agent's container gets its
own repo read-only at /agent-repo, clones it into /workspace, commits and proposes; choird
fetches the branch from the workspace (the clone belongs to the container's uid), the operator
approves with choirctl, and the change is merged, built into a new image by a real
`docker build` and the container replaced, its session resumed — the new container gets the
mount again and the agent starts the new skill. A write from inside the container into the mount
fails, for the agent's uid and for uid 0 in there alike; no Docker socket is in sight; a choird
killed and started again adopts the container and checks its mount read-only again.

choird runs as a real process with `--runtime docker`; the scripted model (the script of the
process-runtime test) runs inside the agent's container on its loopback (`serve_model_in`).
Skipped without an engine, failed in CI (`CHOIR_REQUIRE_DOCKER=1`), like every docker test.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from choir.config.scaffolding.gitrepo import git
from choir.core.security.profile import REPO_TARGET
from choir.store.postgres.target import ConnectParams
from tests.docker_support import require_docker
from tests.faults.scene import home_for
from tests.faults.support import (
    IN_CONTAINER_PORT,
    as_json,
    kill9,
    serve_model_in,
    spawn_choird,
    teardown,
)
from tests.harness.homes import read_config
from tests.harness.waits import poll_until
from tests.proposals.test_repo_change_live import SCRIPT
from tests.proposals.test_skill_apply_docker import container_of
from tests.proposals.test_skill_apply_live import Scene, head, told
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


def in_container(container: str, command: str, *, user: str | None = None) -> tuple[int, str]:
    """`sh -c command` in the container (as its own user unless `user`); (exit code, output)."""
    as_user = ["--user", user] if user is not None else []
    done = subprocess.run(
        ["docker", "exec", *as_user, container, "sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def repo_mount(container: str) -> dict[str, Any]:
    """The container's mount at /agent-repo, as `docker inspect` has it."""
    done = subprocess.run(
        ["docker", "inspect", "--format", "{{json .Mounts}}", container],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [mount] = [m for m in json.loads(done.stdout) if m["Destination"] == REPO_TARGET]
    return dict(mount)


def cannot_write(container: str, repo: Path) -> None:
    """Writes into the mount fail with EROFS, as the agent's uid and as uid 0 in the container;
    the host repo is unchanged."""
    refs = git(repo, "for-each-ref").strip()
    for user in (None, "0"):
        for command in (
            f"touch {REPO_TARGET}/written",
            f"touch {REPO_TARGET}/.git/written",
            f"git -C {REPO_TARGET} -c safe.directory='*' branch agent-was-here",
        ):
            code, output = in_container(container, command, user=user)
            assert code != 0, (user, command, output)
            assert "Read-only file system" in output, (user, command, output)
    assert not (repo / "written").exists()
    assert not (repo / ".git" / "written").exists()
    assert git(repo, "for-each-ref").strip() == refs


async def test_the_agent_clones_its_read_only_repo_proposes_and_the_change_is_built_and_used(
    scene: Scene,
) -> None:
    scene.choird = await asyncio.to_thread(spawn_choird, scene.home, "--runtime", "docker")
    built = await asyncio.to_thread(build, scene.home)  # the first image: longer than a start
    assert built.returncode == 0, built.stderr
    before = head(scene.repo)
    started = as_json(await scene.ctl("agent", "start", "agent-1", "--dm", "console", "--json"))
    session = started["session_id"]
    container = await container_of(scene)
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert "choir.propose.repo_change" not in status["unavailable_tools"], status
    mount = repo_mount(container)
    assert (mount["Source"], mount["RW"]) == (str(scene.repo.resolve()), False)
    verified = as_json(await scene.ctl("agent", "verify", "agent-1", "--json"))
    assert verified["ok"] is True, verified
    checks = {check["item"]: check for check in verified["checks"]}
    assert checks["repo_read_only"]["ok"] is True, checks["repo_read_only"]
    assert checks["no_docker_socket"]["ok"] is True
    code, _ = in_container(container, "test -e /var/run/docker.sock || test -e /run/docker.sock")
    assert code != 0  # no engine socket anywhere the agent could reach it
    await asyncio.to_thread(cannot_write, container, scene.repo)

    # choird killed: the new one adopts the container and checks it against the repo it has
    assert scene.choird is not None
    await asyncio.to_thread(kill9, scene.choird)
    scene.choird = await asyncio.to_thread(spawn_choird, scene.home, "--runtime", "docker")

    async def adopted() -> bool:
        status = await scene.ctl("agent", "status", "agent-1", "--json")
        return status.returncode == 0 and as_json(status)["container"] == container

    await poll_until(adopted, within=30, every=0.5)
    verified = as_json(await scene.ctl("agent", "verify", "agent-1", "--json"))
    assert verified["ok"] is True, verified
    assert {c["item"] for c in verified["checks"] if c["ok"]} >= {"repo_read_only"}

    await asyncio.to_thread(serve_model_in, container)
    said = await scene.ctl("chat", "agent-1", "please add a greeting skill to your repo")
    assert "I proposed the greeting." in said.stdout, (said.stdout, said.stderr)
    [approval] = as_json(await scene.ctl("approval", "list", "--json"))["approvals"]
    assert (approval["request_type"], approval["status"]) == ("repo_change", "pending")
    branch = f"proposal/{session}/greeting"
    shown = await scene.show(approval["approval_id"])
    assert shown["diff"].startswith(f"# {branch} in {scene.repo} ({before[:12]}..")
    assert "+++ b/skills/greeting.json" in shown["diff"]

    approved = await scene.ctl("approval", "approve", approval["approval_id"])
    assert approved.returncode == 0, approved.stderr
    shown = await scene.ended(approval["approval_id"], within=1200)

    assert shown["status"] == "applied", shown
    apply = shown["apply"]
    assert (apply["step"], apply["branch"], apply["merged_from"]) == ("done", branch, before)
    assert apply["image_id"].startswith("sha256:")  # what docker built
    assert head(scene.repo) == apply["commit_id"] == git(scene.repo, "rev-parse", branch).strip()
    author = git(scene.repo, "show", "-s", "--format=%an", apply["commit_id"]).strip()
    assert author == "choir agent-1"  # committed in the container, as the agent made it
    status = as_json(await scene.ctl("agent", "status", "agent-1", "--json"))
    assert status["session_id"] == session  # resumed in the new container
    after = str(status["container"])
    assert after != container
    assert repo_mount(after)["RW"] is False  # mounted again, read-only
    await asyncio.to_thread(serve_model_in, after)
    said = await scene.ctl("chat", "agent-1", "now use the greeting skill")
    assert "Greeting is running." in said.stdout, (said.stdout, said.stderr)
    assert (await told(scene, session, approval["approval_id"]))["status"] == "applied"
