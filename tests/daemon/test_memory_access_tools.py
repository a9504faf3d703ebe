"""Memory classes and roles on the memory host tools: a real choird on real Postgres, the agent
side the real `ControlPlane` client calling as a leased session (what the model's calls become).

Personal memory is per user: the user of a call is its session's bound DM.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from choir.agent.replication.control_plane import ControlPlane
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.daemon.test_memory_tools import query, texts, upsert
from tests.e2e.agent_side import hello
from tests.harness.daemons import agent_control_plane, running_daemon
from tests.harness.homes import external_postgres, make_home, read_config, write_config

pytestmark = pytest.mark.slow

AGENT_2_MEMORIES = [
    {"agent": "agent-1", "class": "app", "role": "read-write"},
    {"class": "knowledge", "role": "read"},
]


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    home = make_home(root, postgres=external_postgres(pg_params))
    data = read_config(home)
    data["dms"]["alice"] = {"gateway": "console", "user_id": "alice"}
    data["agents"]["agent-2"]["memories"] = AGENT_2_MEMORIES
    write_config(home, data)
    return home


@pytest.fixture
async def daemon(home: ChoirHome) -> AsyncIterator[ChoirDaemon]:
    async with running_daemon(home) as running:
        yield running


async def session(
    daemon: ChoirDaemon, agent_id: str, dm: str | None = None
) -> tuple[ControlPlane, str]:
    assert daemon.services is not None
    overrides = {} if dm is None else {"dm": dm}
    started = await daemon.services.sessions.start(agent_id, overrides, new_session=True)
    agent = await agent_control_plane(
        daemon, "uds", started.session_id, started.lease_token, agent_id=agent_id
    )
    await agent.init_hello(hello(agent_id, started.session_id))
    return agent, started.session_id


def refused(result: dict[str, Any], code: str = "access_denied") -> str:
    assert (result["status"], result["error_code"]) == ("error", code), result
    summary: str = result["summary"]
    assert "\n" not in summary
    return summary


async def test_personal_memory_is_the_sessions_user_only(daemon: ChoirDaemon) -> None:
    assert daemon.services is not None
    one, first = await session(daemon, "agent-1")
    stored = await upsert(
        one, op="add", name="user.pet", text="My cat is called Miso.", memory="personal"
    )
    assert stored["status"] == "success", stored
    assert stored["data"]["memory"] == "personal"
    await upsert(one, op="add", name="team.cat", text="The office cat is Pixel.")
    assert sorted(texts(await query(one, store="knowledge", mode="text", query="cat"))) == [
        "My cat is called Miso.",
        "The office cat is Pixel.",
    ]
    only = await query(one, store="knowledge", mode="text", query="cat", memory="personal")
    assert texts(only) == ["My cat is called Miso."]
    assert only["data"]["hits"][0]["memory"] == "personal"

    # agent-2 (no grant can give it) neither reads nor writes agent-1's personal memory
    two, _ = await session(daemon, "agent-2")
    theirs = await query(two, store="knowledge", mode="text", query="cat", target_agent="agent-1")
    assert texts(theirs) == []  # its grant is agent-1's app memory: neither cat is there
    personal = await query(
        two, store="knowledge", mode="text", query="cat", target_agent="agent-1", memory="personal"
    )
    assert "no other agent can read or write it" in refused(personal)

    # another user of agent-1 (a session bound to another DM) does not see the first user's
    await one.close()
    await daemon.services.sessions.stop(first, "test: next user")
    alice, _ = await session(daemon, "agent-1", dm="alice")
    assert texts(await query(alice, store="knowledge", mode="text", query="cat")) == [
        "The office cat is Pixel."
    ]
    gone = await upsert(alice, op="write", name="user.pet", text="overwritten")
    assert "no knowledge item named 'user.pet'" in refused(gone, "not_found")
    taken = await upsert(alice, op="put", name="user.pet", text="x", memory="personal")
    refused(taken, "name_taken")
    near = await query(alice, store="knowledge", mode="neighbours", query="user.pet")
    refused(near, "not_found")
    mine = await upsert(
        alice, op="put", name="alice.pet", text="Alice has a dog.", memory="personal"
    )
    assert mine["status"] == "success", mine
    await alice.close()
    await two.close()


async def test_classes_and_roles_from_config_are_checked_on_every_call(
    daemon: ChoirDaemon,
) -> None:
    one, _ = await session(daemon, "agent-1")
    two, _ = await session(daemon, "agent-2")

    # system memory is read-only to its agent: the operator writes it
    system = await upsert(one, op="add", text="I am agent-1.", memory="system")
    assert refused(system).startswith(
        "memory agent-1/system is the agent's own definition (system class), read-only to it"
    )
    # agent-1 has no `memories` entry: another agent's knowledge is read, never written
    other = await upsert(one, op="add", text="sneaky", target_agent="agent-2")
    assert "read-only to other agents" in refused(other)

    # agent-2 writes agent-1's app memory (granted read-write) and agent-1 reads it as its own
    shared = await upsert(
        two,
        op="add",
        name="release.date",
        text="Release on Friday.",
        memory="app",
        target_agent="agent-1",
    )
    assert shared["status"] == "success", shared
    assert texts(await query(one, store="knowledge", mode="text", query="release")) == [
        "Release on Friday."
    ]
    again = await upsert(
        two, op="write", name="release.date", text="Release on Monday.", target_agent="agent-1"
    )
    assert again["data"]["version"] == 2, again
    # … but not agent-1's knowledge, nor its session memory: not attached
    await upsert(one, op="add", name="secret.plan", text="The plan is to release early.")
    kn = await upsert(two, op="write", name="secret.plan", text="x", target_agent="agent-1")
    assert refused(kn).startswith("memory agent-1/knowledge (knowledge class) is not attached")
    sessions = await query(two, store="session", mode="text", query="x", target_agent="agent-1")
    assert '"class": "knowledge", "role": "read"' in refused(sessions)
    app_read = await query(
        two, store="knowledge", mode="text", query="release plan", target_agent="agent-1"
    )
    assert texts(app_read) == ["Release on Monday."]  # its app memory only, not the plan

    # agent-2 narrowed its own knowledge to read: it cannot write it
    own = await upsert(two, op="add", text="a note")
    assert "set its role to read-write there" in refused(own)
    bad = await upsert(one, op="add", text="x", memory="secrets")
    assert "unknown memory 'secrets'" in refused(bad, "invalid_input")
    moved = await upsert(one, op="write", name="secret.plan", text="y", memory="app")
    assert "never changes memory" in refused(moved, "invalid_input")
    await one.close()
    await two.close()
