"""A failed `agent update` waits in the recovery inbox until it is retried, dismissed, or
superseded by an update that works (issue 19, "Recovery inbox").

Before, a failed update was said once, on the stream of whoever ran it, and then forgotten.
Real choird (process runtime), real agent, real Postgres; choirctl as a subprocess.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from choir.errors import ConflictError, UsageError
from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import choirctl, commit_file, one_error_line
from tests.lifecycle.test_update import BROKEN_TOOL, global_repo

pytestmark = pytest.mark.slow


def listed(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout)["items"])


async def test_a_failed_update_waits_until_retried_and_cannot_be_decided_twice(
    choird: Choird,
) -> None:
    daemon, client = choird
    await client.agent_start("agent-1", {"dm": "console"})
    repo = global_repo(daemon.home)
    commit_file(repo, "tools/broken.tool.json", BROKEN_TOOL)
    with pytest.raises(UsageError):
        await client.agent_update("agent-1")

    [item] = listed(await choirctl(daemon.home, "inbox", "--json"))
    assert item["kind"] == "failed_apply"
    assert item["agent_id"] == "agent-1"
    assert item["title"] == "agent-1: agent.update failed"
    assert "broken.tool.json" in item["context"][0]  # the reason, to decide with
    assert item["choices"] == ["retry", "dismiss"]
    item_id = str(item["item_id"])
    assert item["hint"] == f"choirctl inbox resolve {item_id} retry|dismiss"
    shown = await choirctl(daemon.home, "inbox")
    assert f"decide: choirctl inbox resolve {item_id} retry|dismiss" in shown.stdout

    # fixed, then retried from the inbox: the update runs again, through agent.update's code
    (repo / "tools" / "broken.tool.json").unlink()
    commit_file(repo, "identity/USER.md", "Retried from the inbox.\n")
    done = await choirctl(daemon.home, "inbox", "resolve", item_id, "retry")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{item_id}: agent update agent-1: redeployed")
    assert (await client.inbox_list()).items == []

    again = await choirctl(daemon.home, "inbox", "resolve", item_id, "retry")
    line = one_error_line(again, 5)
    assert f"inbox item {item_id} was already decided elsewhere: retry by choirctl" in line


async def test_an_update_that_works_supersedes_the_failures_before_it(choird: Choird) -> None:
    daemon, client = choird
    await client.agent_start("agent-1", {"dm": "console"})
    repo = global_repo(daemon.home)
    commit_file(repo, "tools/broken.tool.json", BROKEN_TOOL)
    for _ in range(2):
        with pytest.raises(UsageError):
            await client.agent_update("agent-1")
    first, second = (await client.inbox_list(agent_id="agent-1")).items
    assert first.kind == second.kind == "failed_apply"

    (repo / "tools" / "broken.tool.json").unlink()
    commit_file(repo, "identity/USER.md", "Fixed.\n")
    await client.agent_update("agent-1")  # not through the inbox: the items are decided by it

    assert (await client.inbox_list()).items == []
    superseded = r"already decided elsewhere: superseded by agent\.update"
    with pytest.raises(ConflictError, match=superseded):
        await client.inbox_resolve(first.item_id, "dismiss")
    with pytest.raises(UsageError, match="choose one of retry, dismiss, not approve"):
        await client.inbox_resolve(second.item_id, "approve")
    unknown = await choirctl(daemon.home, "inbox", "resolve", "nonsense", "dismiss")
    assert "no inbox item 'nonsense'" in one_error_line(unknown, 4)
    bad_choice = await choirctl(daemon.home, "inbox", "resolve", second.item_id, "maybe")
    assert "unknown choice 'maybe'" in one_error_line(bad_choice, 2)
    nobody = await choirctl(daemon.home, "inbox", "--agent", "nobody")
    assert "no agent named 'nobody'" in one_error_line(nobody, 4)
    await client.agent_stop("agent-1")
