"""`choir.propose.skill` applied to an agent repo configured as a remote URL: a live choird on
the process runtime, the real `choir-agent`, the scripted model of `test_skill_apply_live`, and
agent-1's repo moved to a bare repository behind a `file://` URL.

choird commits the skill in its own clone of the remote, pushes the proposal branch, pushes the
merge to the remote's main and updates the agent from that commit, so the agent uses the skill
in the same conversation. Fault: choird SIGKILLed (failpoint `exit`) right after the merge was
pushed, before the step was recorded — and after someone else's push, so the merge is a real
merge commit — finishes the apply when it starts again without merging a second time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from choir.config.scaffolding.gitrepo import git
from choir.scripted import Script, ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.faults.support import teardown
from tests.faults.test_choird_restart import home_for
from tests.harness.homes import read_config, write_config
from tests.harness.proposals import push_elsewhere
from tests.harness.waits import poll_until
from tests.proposals.test_skill_apply_live import SCRIPT, Scene

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def scene(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> Any:
    made = Scene(home_for(root, pg_params, model.url))
    data = read_config(made.home)
    git(root, "clone", "-q", "--bare", str(made.repo), str(root / "agent-1.git"))
    data["agents"]["agent-1"]["repo"] = {"url": f"file://{root / 'agent-1.git'}", "ref": "main"}
    write_config(made.home, data)
    yield made
    teardown(made.home, made.choird)


def head(bare: Path, ref: str = "main") -> str:
    return git(bare, "rev-parse", ref).strip()


async def test_an_approved_skill_is_pushed_to_the_remote_and_used_in_the_same_session(
    scene: Scene, root: Path
) -> None:
    bare = root / "agent-1.git"
    await scene.start_choird()
    before = head(bare)
    session, approval_id = await scene.proposed()

    approved = await scene.ctl("approval", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    shown = await scene.ended(approval_id)

    assert shown["status"] == "applied", shown
    apply = shown["apply"]
    assert (apply["merged_from"], apply["branch"]) == (before, f"proposal/{session}/triage")
    assert head(bare) == apply["commit_id"]  # fast-forwarded on the remote
    assert head(bare, apply["branch"]) == apply["commit_id"]
    committed = git(bare, "show", "-s", "--format=%an <%ae>", "main").strip()
    assert committed == "choir agent-1 <agent-1@choir.local>"
    assert head(scene.repo) == before  # the old local repo is not the agent's any more
    assert await scene.active_session() == session  # updated, its session resumed
    said = await scene.ctl("chat", "agent-1", "now use the triage skill")
    assert "Triage is running." in said.stdout, (said.stdout, said.stderr)


async def test_choird_killed_after_pushing_the_merge_finishes_without_merging_again(
    scene: Scene, root: Path
) -> None:
    bare = root / "agent-1.git"
    held = "proposal.after_commit=sleep(8000);proposal.merge.after_push=exit"
    await scene.start_choird(CHOIR_FAILPOINTS=held)
    _, approval_id = await scene.proposed()
    approved = await scene.ctl("approval", "approve", approval_id)
    assert approved.returncode == 0, approved.stderr

    async def committed() -> bool:
        audit = (await scene.show(approval_id))["audit"]
        return any(fact["detail"].startswith("commit: done") for fact in audit)

    await poll_until(committed, within=60, every=0.2)
    theirs = push_elsewhere(bare, root / "work", "theirs")  # while choird waits to merge
    assert scene.choird is not None
    assert await asyncio.to_thread(scene.choird.process.wait, 60) == 137  # killed mid-merge
    pushed = head(bare)
    assert pushed != theirs  # the merge reached the remote; the step was not recorded

    await scene.start_choird()
    shown = await scene.ended(approval_id)

    assert shown["status"] == "applied", shown
    steps = [fact["detail"] for fact in shown["audit"] if fact["action"] == "step"]
    assert steps.count("merge: started") == 2  # run again after the restart
    assert head(bare) == pushed  # the merge already there was taken as done
    parents = git(bare, "rev-list", "--parents", "-n", "1", "main").split()[1:]
    assert parents == [theirs, shown["apply"]["commit_id"]]
    assert git(bare, "rev-list", "--count", "--merges", "main").strip() == "1"
    said = await scene.ctl("chat", "agent-1", "now use the triage skill")
    assert "Triage is running." in said.stdout, (said.stdout, said.stderr)
