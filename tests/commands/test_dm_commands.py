"""The console DM's commands (§19.3) against a real choird and real agents (process runtime,
scripted model): each command's reply, admin vs regular DMs, and `/approve` by number.

agent-1 is bound to `console` (admin, as `choirctl init` makes it); agent-2 to `dm-agent-2`
(a regular DM). A command's answer arrives on `chat.replies` as category `command`, answering
the command's id; it never reaches the agent (the scripted model would answer it otherwise).
"""

from __future__ import annotations

import asyncio
import copy
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.scripted import ReplyStep, ScriptedCall, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.harness.cluster import Cluster, running_cluster
from tests.harness.homes import short_root
from tests.harness.proposals import TOOL_PROPOSAL

CHOIRCTL = Path(sys.executable).parent / "choirctl"

PROPOSE = "choir.propose.tool"
"""Tool proposals: approved, choird only commits the manifest and a stub on a branch (§8.10's
phase 1) and the agent keeps running; a skill's would be applied (built, the agent updated),
which is not what these tests are about."""


def proposal(tag: str) -> ScriptedCall:
    manifest = copy.deepcopy(TOOL_PROPOSAL["manifest"])
    manifest["llm"]["name"] = f"weather.lookup_{tag}"
    return ScriptedCall(
        name=PROPOSE,
        arguments={**TOOL_PROPOSAL, "manifest": manifest, "rationale": f"because {tag}"},
    )


SCRIPT = [
    ToolCallsStep(match="[propose-one]", calls=[proposal("one")]),
    ToolCallsStep(match="[propose-two]", calls=[proposal("two"), proposal("three")]),
    ReplyStep(after="tool", match="proposal submitted", repeat=True, text="proposed"),
    ReplyStep(repeat=True, text="pong"),
]


@pytest.fixture
def root() -> Iterator[Path]:
    with short_root("cmd-") as path:
        yield path


@pytest.fixture
async def cluster(root: Path, pg_params: ConnectParams) -> AsyncIterator[Cluster]:
    async with running_cluster(root, pg_params, SCRIPT, agents=2) as running:
        await running.start("agent-1")
        await running.start("agent-2")
        yield running


async def command(
    client: ChoirClient, agent_id: str, text: str, *, refused: bool = False, within: float = 30
) -> str:
    """Send a command from `agent_id`'s DM; the text of its answer (`refused`: of its refusal,
    a usage error included)."""
    wanted = "command_error" if refused else "command"
    sent = await client.chat_send(agent_id, text)
    assert sent.injected is False, sent
    assert sent.durable is False, sent
    replies = client.chat_replies(agent_id, after_seq=sent.after_seq)
    try:
        async with asyncio.timeout(within):
            async for reply in replies:
                if reply.in_reply_to == sent.message_id and reply.category != ("command_progress"):
                    assert reply.category == wanted, reply
                    return str(reply.text)
    finally:
        await replies.aclose()
    raise AssertionError(f"no reply to {text!r}")


async def agent_said(client: ChoirClient, session_id: str) -> list[str]:
    """Every user message the agent committed in `session_id` (commands must not be there)."""
    events = (await client.session_events(session_id, limit=1000)).events
    return [str(e.payload.get("text")) for e in events if e.event_type == "user_msg"]


async def test_regular_commands_answer_in_the_chat_and_never_reach_the_agent(
    cluster: Cluster,
) -> None:
    client = cluster.client
    status = await command(client, "agent-2", "/status")
    assert status.startswith("agent-2: running, session ")
    assert "runtime process · dm dm-agent-2 · llm demo" in status
    session = (await client.agent_status("agent-2")).session_id
    assert "cores: none" in await command(client, "agent-2", "/cores")
    assert await command(client, "agent-2", "/cancel nosuch", refused=True) == (
        await _refusal(client.session_cancel(session, "nosuch"))
    )
    assert await command(client, "agent-2", "/compact") == f"asked {session} to compact"
    model = await command(client, "agent-2", "/model")
    assert "llm: demo" in model
    assert await command(client, "agent-2", "/model llm demo") == "agent-2 now uses demo"
    assert "unknown-voice" in await command(client, "agent-2", "/voice unknown-voice", refused=True)
    assert "voice_profile:" in await command(client, "agent-2", "/voice")
    assert await command(client, "agent-2", "/approvals") == "no pending approvals"
    assert await command(client, "agent-2", "/frobnicate", refused=True) == (
        "unknown command /frobnicate: /help lists the commands this DM can run"
    )
    assert await command(client, "agent-2", "/cancel", refused=True) == "usage: /cancel <name>"
    assert await command(client, "agent-2", "/model llm", refused=True) == (
        "usage: /model or /model llm <name>"
    )
    helped = await command(client, "agent-2", "/help")
    assert "/cancel <name>" in helped
    assert "/agent list" not in helped
    injected = await client.chat_send("agent-2", "/inject keep it short")
    assert injected.injected is True
    _, reply = await cluster.say("agent-2", "are you there?")
    assert reply["text"] == "pong"
    events = await command(client, "agent-2", "/events")
    assert "user_msg: are you there?" in events
    assert "agent_replied: pong" in events
    said = await agent_said(client, session)
    assert said == ["are you there?"], "a command reached the agent"
    assert await command(client, "agent-2", "/restart") == "agent-2 restarted"
    assert await command(client, "agent-2", "/stop") == "agent-2 stopped"
    assert await cluster.state("agent-2") == "stopped"


async def _refusal(call: Any) -> str:
    """choird's one-line refusal of the same verb called from the operator API."""
    try:
        await call
    except Exception as error:  # a ChoirError: its message is what the DM replies
        return str(getattr(error, "message", error))
    raise AssertionError("the verb did not refuse")


async def test_a_regular_dm_is_refused_admin_commands_and_other_agents(cluster: Cluster) -> None:
    client = cluster.client
    kept = cluster.workspace("agent-2") / "kept.txt"
    kept.write_text("a refused reset deletes nothing\n")
    admin = {
        "/agent list": "/agent list",
        "/update-all": "/update-all",
        "/config load": "/config load",
        "/start agent-1": "/start",
        "/secret list": "/secret list",
        "/workspace reset agent-2": "/workspace reset",
    }
    for text, spelled in admin.items():
        assert await command(client, "agent-2", text, refused=True) == (
            f"refused: {spelled} is an admin command: this DM may not run it"
        ), text
    assert await command(client, "agent-2", "/stop agent-1", refused=True) == (
        "refused: a regular DM acts only on its bound agent: send /stop without an agent id"
    )
    assert await cluster.state("agent-1") == "running"
    assert kept.exists()
    assert await cluster.state("agent-2") == "running"


async def test_an_admin_dm_runs_admin_commands_on_any_agent(cluster: Cluster) -> None:
    client = cluster.client
    listed = await command(client, "agent-1", "/agent list")
    assert "agent_id=agent-1" in listed
    assert "agent_id=agent-2" in listed
    assert "name=agent-2" in await command(client, "agent-1", "/workspace list")
    assert "secrets:" in await command(client, "agent-1", "/secret list")
    assert "/agent list" in await command(client, "agent-1", "/help")
    assert await command(client, "agent-1", "/stop agent-2") == "agent-2 stopped"
    assert await cluster.state("agent-2") == "stopped"
    assert await command(client, "agent-1", "/start agent-2") == "agent-2 started"
    assert await cluster.state("agent-2") == "running"
    assert await command(client, "agent-1", "/start agent-2 nonsense", refused=True) == (
        "usage: /start <agent-id> [key=value…]"
    )
    assert "staged: yes" in (await command(client, "agent-1", "/config load")).splitlines()
    assert "changes: none" in (await command(client, "agent-1", "/config diff")).splitlines()
    applied = (await command(client, "agent-1", "/config apply")).splitlines()
    assert "config_version: 2" in applied
    assert await command(client, "agent-1", "/restart agent-2") == "agent-2 restarted"
    updated = (await command(client, "agent-1", "/update-all")).splitlines()
    assert updated[0] == "agents:"
    assert "- agent_id=agent-2 · outcome=skipped · reason=up to date: it runs the latest build" in (
        updated
    )
    assert await command(client, "agent-1", "/agent build nosuch", refused=True) == (
        "no agent named 'nosuch' in the running config (known: agent-1, agent-2); "
        "see choirctl agent list"
    )
    kept = cluster.workspace("agent-2") / "kept.txt"
    kept.write_text("reset deletes this\n")
    reset = await command(client, "agent-1", "/workspace reset agent-2")
    assert reset == "workspace agent-2 reset"
    assert not kept.exists()


async def test_update_says_its_steps_as_they_come_then_its_outcome(cluster: Cluster) -> None:
    client = cluster.client
    sent = await client.chat_send("agent-1", "/update agent-2")
    said: list[tuple[str, str]] = []
    replies = client.chat_replies("agent-1", after_seq=sent.after_seq)
    try:
        async with asyncio.timeout(60):
            async for reply in replies:
                if reply.in_reply_to == sent.message_id:
                    said.append((reply.category, reply.text))
                    if reply.category == "command":
                        break
    finally:
        await replies.aclose()
    assert said[0] == ("command_progress", "agent-2: building if needed")
    category, outcome = said[-1]
    assert category == "command"
    assert "outcome: skipped" in outcome.splitlines()
    assert "reason: up to date: it runs the latest build" in outcome.splitlines()
    assert await command(client, "agent-2", "/update", refused=True) == (
        "refused: /update is an admin command: this DM may not run it"
    )


async def test_approve_and_reject_pick_the_only_one_or_by_number(cluster: Cluster) -> None:
    client = cluster.client
    await cluster.say("agent-2", "[propose-one]")
    await cluster.say("agent-1", "[propose-two]")
    pending = (await client.approval_list()).approvals
    mine = [a.approval_id for a in pending if a.agent_id == "agent-1"]
    theirs = [a.approval_id for a in pending if a.agent_id == "agent-2"]
    assert len(mine) == 2
    assert len(theirs) == 1
    # a regular DM sees and answers only its own agent's approvals
    listed = await command(client, "agent-2", "/approvals")
    assert listed.startswith(f"1. {theirs[0]} agent-2")
    assert mine[0] not in listed
    refused = await command(client, "agent-2", f"/approve {mine[0]}", refused=True)
    assert refused.startswith(f"approval {mine[0]} belongs to agent-1, not agent-2")
    # admin: several pending -> a numbered list, then a number picks from it
    offered = (await command(client, "agent-1", "/approve")).splitlines()
    assert len(offered) == 4
    assert offered[-1] == "send /approve <number> to answer one"
    second = offered[1].split()[1]
    assert await command(client, "agent-1", "/approve 2") == f"{second} approved"
    assert (await client.approval_show(second)).status == "approved"
    assert (await client.approval_show(second)).resolved_by == "console"
    assert await command(client, "agent-1", "/approve 9", refused=True) == (
        "no approval numbered 9: /approvals lists pending ones"
    )
    # exactly one pending for the regular DM: /reject takes it
    assert await command(client, "agent-2", "/reject") == f"{theirs[0]} rejected"
    assert (await client.approval_show(theirs[0])).status == "rejected"


async def choirctl_chat(cluster: Cluster, agent_id: str, text: str) -> tuple[int, str, str]:
    """`choirctl chat <agent> <text>` as the operator runs it: exit code, stdout, stderr."""
    choirctl = await asyncio.create_subprocess_exec(
        str(CHOIRCTL), "chat", agent_id, text, "--wait", "20",
        env={**os.environ, "CHOIR_HOME": str(cluster.home.root)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(choirctl.communicate(), 60)
    assert choirctl.returncode is not None
    return choirctl.returncode, out.decode(), err.decode()


async def test_choirctl_chat_prints_a_command_reply_as_text_and_fails_a_refused_one(
    cluster: Cluster,
) -> None:
    code, out, err = await choirctl_chat(cluster, "agent-1", "/status")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("agent-1: running, session ")
    code, out, err = await choirctl_chat(cluster, "agent-2", "/agent list")
    assert code == 1
    assert out == ""
    assert "refused: /agent list is an admin command: this DM may not run it" in err
    assert "Traceback" not in err
