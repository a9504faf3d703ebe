"""`choirctl knowledge expand` as an operator runs it (the real CLI in a subprocess, a real
choird with a summary tree grown by real sessions): a roll-up to its summaries, a summary to
its archive, the archive to the session messages it covers (a page, `--offset` reads on), in
text and `--json`; an unknown item and an item outside the tree are one-line refusals."""

from __future__ import annotations

from choir.logs import REDACTED
from tests.harness.daemons import pool_of
from tests.harness.homes import GIT_TOKEN
from tests.memory.close.support import run_session, wait_closed
from tests.memory_ops.test_tool_rows import tool_session

from .conftest import Filled
from .summary_tree import grow_tree
from .test_memory_choirctl import run


async def test_the_operator_expands_a_rollup_down_to_its_events(filled: Filled) -> None:
    tree = await grow_tree(filled.daemon, opening=f"deploy with the token {GIT_TOKEN} please")

    root = (await run(filled, "knowledge", "expand", "agent-1", tree.root, "--json")).json()
    branch = (await run(filled, "knowledge", "expand", "agent-1", tree.branch, "--json")).json()
    leaf = (await run(filled, "knowledge", "expand", "agent-1", tree.archive, "--json")).json()
    page = await run(filled, "knowledge", "expand", "agent-1", tree.archive, "--limit", "2")
    text = await run(filled, "knowledge", "expand", "agent-1", tree.root)

    assert (root["level"], root["item"]["name"]) == ("rollup", tree.root)
    assert [s["name"] for s in root["sources"]] == [tree.branch]
    assert "deploy script" in root["sources"][0]["text"]
    assert (branch["level"], [s["name"] for s in branch["sources"]]) == ("summary", [tree.archive])
    assert (leaf["level"], leaf["session_id"]) == ("archive", tree.session_id)
    assert (leaf["from_rev"], leaf["upto_rev"]) == (1, 8)
    revs = [m["rev"] for m in leaf["messages"]]
    assert revs, leaf
    assert revs == sorted(revs)
    assert revs[0] >= 1
    assert revs[-1] <= 8
    assert leaf["next_offset"] is None
    assert {m["who"] for m in leaf["messages"]} >= {"user"}
    assert leaf["messages"][0]["text"] == f"deploy with the token {REDACTED} please"
    assert GIT_TOKEN not in page.out + str(leaf)

    assert page.code == 0, page.err
    lines = page.out.splitlines()
    assert lines[0] == (
        f"{tree.archive} (archive of agent-1): session {tree.session_id}, revs 1-8, 2 message(s)"
    )
    more = lines[-1]
    assert more.startswith(f"(more: choirctl knowledge expand agent-1 {tree.archive} --offset ")
    offset = more.rsplit(" ", 1)[1].rstrip(")")
    rest = (
        await run(
            filled, "knowledge", "expand", "agent-1", tree.archive, "--offset", offset, "--json"
        )
    ).json()
    assert [m["rev"] for m in rest["messages"]] == [r for r in revs if r > int(offset)]

    assert text.code == 0, text.err
    assert text.out.splitlines()[0] == f"{tree.root} (rollup of agent-1): 1 source(s)"
    assert f"  {tree.branch}  " in text.out


async def test_expand_refuses_an_unknown_item_and_one_outside_the_tree(filled: Filled) -> None:
    await filled.client.knowledge_put("agent-1", "the office wifi is choir-guest", name="wifi")

    missing = await run(filled, "knowledge", "expand", "agent-1", "rollup/no-such")
    outside = await run(filled, "knowledge", "expand", "agent-1", "wifi")
    no_agent = await run(filled, "knowledge", "expand", "agent-9", "wifi")

    assert (missing.code, missing.out) == (4, "")
    assert "no knowledge item 'rollup/no-such'" in missing.err
    assert "choirctl knowledge list agent-1" in missing.err
    assert len(missing.err.splitlines()) == 1
    assert (outside.code, outside.out) == (2, "")
    assert "'wifi' is not part of the summary tree: expand a roll-up (rollup/…)" in outside.err
    assert len(outside.err.splitlines()) == 1
    assert no_agent.code == 4, no_agent.err


async def test_a_summary_expands_to_its_tool_leaf_and_the_leaf_to_its_events(
    filled: Filled,
) -> None:
    await filled.daemon.memory_started()
    session_id = await run_session(filled.daemon, tool_session(0))
    await wait_closed(pool_of(filled.daemon), session_id)
    segment = session_id.removeprefix("s-")

    branch = (
        await run(filled, "knowledge", "expand", "agent-1", f"summary/{segment}", "--json")
    ).json()
    [leaf] = branch["sources"]
    events = (await run(filled, "knowledge", "expand", "agent-1", leaf["name"], "--json")).json()

    assert leaf["name"] == f"tools/{segment}/6"
    assert (events["level"], events["from_rev"], events["upto_rev"]) == ("tools", 2, 6)
    assert events["messages"], events
    assert all(2 <= m["rev"] <= 6 for m in events["messages"])
