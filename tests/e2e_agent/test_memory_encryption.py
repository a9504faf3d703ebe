"""Encryption at rest end to end: a real choird and Postgres, the real `choir-agent` on the
process runtime and a scripted model that calls the memory tools as a model would.

agent-1's personal memory is marked encrypted. Started with its key, what the model stores
there is sealed in the database (a placeholder text, a sealed value in data: nothing of the
content, in the item or its versions) and read back opened. Stopped, the key is gone: started
again without it, the item is listed locked and a write is refused. A restarted choird holds
no key: locked again; started with another key, the start is refused and nothing runs. The
operator's writes there (`knowledge add|write|restore`) are sealed with the key choird holds,
as the agent's are, and refused without it; `knowledge show` opens an item while choird holds
the key. A tampered sealed value reads as one that does not open. The
key reaches choird through `choirctl agent start --memory-key-file` (a file, or stdin) and is
nowhere in choird's logs, the agent's environment or its workspace.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from choir.client import ChoirClient
from choir.core.memory.knowledge.graph import ItemFields
from choir.core.memory.sealed_items import LOCKED_TEXT, SEALED_KEY, SEALED_TEXT, open_item
from choir.daemon.operator.memory.access import NOT_IN_A_DM
from choir.errors import ChoirError
from choir.home import ChoirHome
from choir.scripted import Script
from tests.ctl.cli import choirctl
from tests.harness.daemons import running_daemon
from tests.harness.homes import read_config
from tests.harness.memory_encryption import SCRIPT, SECRET, encrypt_personal, say

if TYPE_CHECKING:
    from choir.daemon.memory.store import MemoryStore
    from choir.store.knowledge.items import KnowledgeItem

pytestmark = pytest.mark.slow


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def home(home: ChoirHome) -> ChoirHome:
    return encrypt_personal(home)


def _files_holding(directory: Path, needles: list[bytes]) -> list[str]:
    return [
        str(path)
        for path in directory.rglob("*")
        if path.is_file() and any(needle in path.read_bytes() for needle in needles)
    ]


async def test_an_encrypted_memory_is_sealed_at_rest_and_opens_with_its_key_only(
    home: ChoirHome,
) -> None:
    key = secrets.token_bytes(32)
    needles = [key, key.hex().encode(), base64.b64encode(key)]
    key_file = home.root.parent / "memory.key"
    key_file.write_bytes(key)
    bad_file = home.root.parent / "short.key"
    bad_file.write_text("not a key\n")
    start = ("agent", "start", "agent-1", "--dm", "console", "--new-session", "--json")
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        bad = await asyncio.to_thread(
            choirctl, home.root, *start, "--memory-key-file", str(bad_file)
        )
        assert (bad.code, bad.err.count("\n")) == (2, 1), bad
        assert "the memory key is not a 256-bit key" in bad.err
        run = await asyncio.to_thread(
            choirctl, home.root, *start, "--memory-key-file", str(key_file)
        )
        assert run.code == 0, run
        started = run.json()
        workspace = started["bindings"]["workspace"]
        environ = await asyncio.to_thread(Path(f"/proc/{started['pid']}/environ").read_bytes)
        assert not any(needle in environ for needle in needles)
        assert await say(client, "remember my pet", "stored") == "stored"
        assert await say(client, "note the breed", "stored") == "stored"
        assert await say(client, "what is my pet", "found") == f"found: {SECRET}"
        store = daemon.memory_store
        assert store is not None
        item = await store.get_knowledge("agent-1", "user.pet")
        assert (item.memory_class, item.text, list(item.data)) == (
            "personal",
            SEALED_TEXT,
            [SEALED_KEY],
        )
        assert item.tags == ("pet",)
        _, versions = await store.knowledge_history("agent-1", "user.pet", limit=10)
        assert all("Miso" not in version.text for version in versions)
        assert "Miso" not in json.dumps(item.data)
        opened = open_item(key, "agent-1", "personal", item.data)
        assert (opened.text, opened.data) == (SECRET, {"species": "cat", "breed": "tabby"})
        shown = await client.knowledge_show("agent-1", "user.pet")
        assert (shown.text, shown.data) == (SECRET, {"species": "cat", "breed": "tabby"})
        with pytest.raises(ChoirError, match="agent agent-2 has no encrypted memory: drop"):
            await client.agent_start("agent-2", {"dm": "ops"}, memory_key=key)
        await client.agent_stop("agent-1")

        # stopped: the key is forgotten, the memory locked
        await client.agent_start("agent-1", {"dm": "console"}, new_session=True)
        listed = await say(client, "what is my pet", "found")
        assert listed.startswith(
            "found: (encrypted, locked: memory agent-1/personal is encrypted and locked"
        )
        assert "Miso" not in listed
        refused = await say(client, "remember my pet", "error")
        assert refused.startswith("error: memory agent-1/personal is encrypted and locked")
        await client.agent_stop("agent-1")
        assert (await store.get_knowledge("agent-1", "user.pet")).data == item.data
        shown = await client.knowledge_show("agent-1", "user.pet")
        assert (shown.text, shown.data) == (SEALED_TEXT, item.data)
        await client.agent_start("agent-1", {"dm": "console"}, new_session=True, memory_key=key)
        await client.agent_restart("agent-1")  # a restart keeps the key
        assert await say(client, "what is my pet", "found") == f"found: {SECRET}"
        # choird exits with the agent running and its key held

    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        # a new choird holds no key: the memory is locked until a start supplies it
        await client.agent_start("agent-1", {"dm": "console"}, new_session=True)
        assert (await say(client, "what is my pet", "found")).startswith(
            "found: (encrypted, locked"
        )
        await client.agent_stop("agent-1")

        # another key: the start is refused in one line, nothing runs
        wrong = await asyncio.to_thread(
            choirctl,
            home.root,
            *start,
            "--memory-key-file",
            "-",
            stdin=secrets.token_bytes(32).hex(),
        )
        assert (wrong.code, wrong.err.count("\n")) == (2, 1), wrong
        assert "the memory key does not open memory agent-1/personal" in wrong.err
        assert (await client.agent_status("agent-1")).pid is None

        # a tampered sealed value: read as one that does not open, never as content
        store = daemon.memory_store
        assert store is not None
        sealed = base64.b64decode(item.data[SEALED_KEY])
        broken = sealed[:-1] + bytes([sealed[-1] ^ 1])
        await store.write_knowledge(
            "agent-1",
            "user.pet",
            None,
            fields=ItemFields(data={SEALED_KEY: base64.b64encode(broken).decode()}),
        )
        run = await asyncio.to_thread(
            choirctl, home.root, *start, "--memory-key-file", "-", stdin=key.hex()
        )
        assert run.code == 0, run
        assert (await say(client, "what is my pet", "found")).startswith(
            "found: (encrypted, does not open: a sealed value of agent-1/personal does not open"
        )
        await client.agent_stop("agent-1")
    assert _files_holding(home.logs, needles) == []
    path = Path(read_config(home)["workspaces"][workspace]["path"])
    assert _files_holding(path, needles) == []


async def _views(client: ChoirClient, home: ChoirHome) -> dict[str, list[str]]:
    """user.pet's text in each operator list view: choirctl's and the operator API's."""
    listed = await asyncio.to_thread(choirctl, home.root, "knowledge", "list", "agent-1", "--json")
    history = await asyncio.to_thread(
        choirctl, home.root, "knowledge", "history", "agent-1", "user.pet", "--json"
    )
    about = await asyncio.to_thread(
        choirctl, home.root, "memory", "about", "agent-1", "console", "--json"
    )
    assert (listed.code, history.code, about.code) == (0, 0, 0), (listed, history, about)
    shown = await client.memory_show(str((await client.knowledge_list("agent-1")).items[0].id))
    assert shown.knowledge is not None
    return {
        "knowledge list": [i["text"] for i in listed.json()["items"] if i["name"] == "user.pet"],
        "knowledge history": [history.json()["item"]["text"]]
        + [version["text"] for version in history.json()["versions"]],
        "memory about": [  # what the user taught, not what their sessions left (summaries)
            item["text"] for item in about.json()["items"] if item["name"] == "user.pet"
        ],
        "memory show": [shown.knowledge.text],
    }


async def test_the_list_views_and_the_agents_graph_modes_open_an_item_while_the_key_is_held(
    home: ChoirHome,
) -> None:
    key = secrets.token_bytes(32)
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "console"}, new_session=True, memory_key=key)
        assert await say(client, "remember my pet", "stored") == "stored"
        assert await say(client, "note the breed", "stored") == "stored"
        views = await _views(client, home)
        assert views == {
            "knowledge list": [SECRET],
            "knowledge history": [SECRET, SECRET, SECRET],  # the item, its two versions
            "memory about": [SECRET],
            "memory show": [SECRET],
        }
        # a DM's answer travels through a chat: never opened there
        about = await say(client, "/memory about console", "user.pet")
        assert NOT_IN_A_DM in about
        assert "Miso" not in about
        assert await say(client, "neighbours of my pet", "neighbours") == f"neighbours: {SECRET}"
        assert await say(client, "expand my pet", "expand") == f"expand: {SECRET}"
        await client.agent_stop("agent-1")

        # stopped: the key is gone, every view says the item is locked, nothing of it shown
        views = await _views(client, home)
        assert views["knowledge list"] == views["memory about"] == [LOCKED_TEXT]
        assert views["knowledge history"] == [LOCKED_TEXT] * 3
        assert views["memory show"] == [SEALED_TEXT]  # as knowledge show: the value as stored
        await client.agent_start("agent-1", {"dm": "console"}, new_session=True)
        locked = "(encrypted, locked: memory agent-1/personal is encrypted and locked"
        neighbours = await say(client, "neighbours of my pet", "neighbours")
        assert neighbours.startswith(f"neighbours: {locked}")
        assert (await say(client, "expand my pet", "expand")).startswith(f"expand: {locked}")
        await client.agent_stop("agent-1")


def _ctl(home: ChoirHome, *args: str) -> Any:
    return choirctl(home.root, "knowledge", *args, "--json")


async def _raw(store: MemoryStore, ref: str) -> tuple[KnowledgeItem, list[str]]:
    """The item as stored, and every stored text and data of it and its versions (none of
    which may hold the secret)."""
    item = await store.get_knowledge("agent-1", ref)
    _, versions = await store.knowledge_history("agent-1", ref, limit=50)
    stored = [item.text, json.dumps(item.data)]
    stored += [part for v in versions for part in (v.text, json.dumps(v.data))]
    return item, stored


async def test_the_operators_writes_are_sealed_with_the_key_choird_holds_and_refused_without(
    home: ChoirHome,
) -> None:
    key = secrets.token_bytes(32)
    add = (
        "add", "agent-1", SECRET, "--name", "user.pet", "--memory", "personal",
        "--user", "console", "--tag", "pet", "--data", '{"species": "cat"}',
    )  # fmt: skip
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        # no key held: refused in one line naming the fix, nothing written
        refused = await asyncio.to_thread(_ctl, home, *add)
        assert (refused.code, refused.err.count("\n")) == (2, 1), refused
        assert "memory agent-1/personal is encrypted and locked" in refused.err
        assert "choirctl agent start agent-1 --memory-key-file PATH" in refused.err
        assert (await client.knowledge_list("agent-1")).items == []

        await client.agent_start("agent-1", {"dm": "console"}, new_session=True, memory_key=key)
        added = await asyncio.to_thread(_ctl, home, *add)
        assert added.code == 0, added
        assert (added.json()["embedded"], added.json()["sealed"]) == (False, True)
        store = daemon.memory_store
        assert store is not None
        shown = added.json()["item"]  # the answer opens it, as knowledge show does
        assert (shown["text"], shown["data"], shown["has_vector"]) == (
            SECRET,
            {"species": "cat"},
            False,
        )
        item, stored = await _raw(store, "user.pet")
        assert (item.text, list(item.data), item.has_vector) == (SEALED_TEXT, [SEALED_KEY], False)
        assert not any("Miso" in part for part in stored)
        opened = open_item(key, "agent-1", "personal", item.data)
        assert (opened.text, opened.data) == (SECRET, {"species": "cat"})

        # a write of the data only keeps the text (opened and sealed again with the new data)
        written = await asyncio.to_thread(
            _ctl, home, "write", "agent-1", "user.pet", "--data", '{"species": "cat", "age": 3}'
        )
        assert written.code == 0, written
        assert written.json()["item"]["text"] == SECRET
        # the agent's own tool reads what the operator sealed
        assert await say(client, "what is my pet", "found") == f"found: {SECRET}"
        restored = await asyncio.to_thread(_ctl, home, "restore", "agent-1", "user.pet", "1")
        assert restored.code == 0, restored
        assert restored.json()["item"]["data"] == {"species": "cat"}
        item, stored = await _raw(store, "user.pet")
        assert (item.version, item.text, list(item.data)) == (3, SEALED_TEXT, [SEALED_KEY])
        assert not item.has_vector
        assert not any("Miso" in part for part in stored)
        history = await asyncio.to_thread(_ctl, home, "history", "agent-1", "user.pet")
        assert [v["text"] for v in history.json()["versions"]] == [SECRET] * 3
        # a rename and a tag are no content write: they work as on any item
        renamed = await asyncio.to_thread(_ctl, home, "rename", "agent-1", "user.pet", "pet")
        assert renamed.code == 0, renamed
        tagged = await asyncio.to_thread(_ctl, home, "write", "agent-1", "pet", "--tag", "cat")
        assert tagged.code == 0, tagged
        item, _ = await _raw(store, "pet")
        assert (item.version, item.tags, list(item.data)) == (4, ("cat",), [SEALED_KEY])
        await client.agent_stop("agent-1")

        # the key is gone: a content write is refused, nothing written
        another = (
            "add",
            "agent-1",
            "x",
            "--name",
            "other",
            "--memory",
            "personal",
            "--user",
            "console",
        )
        for args in (("write", "agent-1", "pet", "clear"), another):
            locked = await asyncio.to_thread(_ctl, home, *args)
            assert (locked.code, locked.err.count("\n")) == (2, 1), locked
            assert "is encrypted and locked" in locked.err
        assert (await store.get_knowledge("agent-1", "pet")).version == 4
        listed = (await client.knowledge_list("agent-1")).items
        assert [i.name for i in listed if i.memory == "personal"] == ["pet"]
        # a version written in the clear (before the memory was marked encrypted, here by the
        # store itself): restoring it needs the key to seal it; a sealed one is copied as it is
        await store.write_knowledge(
            "agent-1", "pet", "in the clear, from before", fields=ItemFields(data={"old": 1})
        )
        locked = await asyncio.to_thread(_ctl, home, "restore", "agent-1", "pet", "5")
        assert (locked.code, locked.err.count("\n")) == (2, 1), locked
        assert "is encrypted and locked" in locked.err
        assert (await store.get_knowledge("agent-1", "pet")).version == 5
        copied = await asyncio.to_thread(_ctl, home, "restore", "agent-1", "pet", "3")
        assert copied.code == 0, copied
        assert copied.json()["item"]["text"] == SEALED_TEXT  # as knowledge show: as stored
        item = await store.get_knowledge("agent-1", "pet")
        assert (item.version, item.text, list(item.data)) == (6, SEALED_TEXT, [SEALED_KEY])
        await client.agent_start("agent-1", {"dm": "console"}, new_session=True, memory_key=key)
        sealed = await asyncio.to_thread(_ctl, home, "restore", "agent-1", "pet", "5")
        assert sealed.code == 0, sealed
        assert sealed.json()["item"]["text"] == "in the clear, from before"
        item = await store.get_knowledge("agent-1", "pet")
        assert (item.version, item.text, list(item.data)) == (7, SEALED_TEXT, [SEALED_KEY])
        # the text output says how a sealed item is found (never by its content)
        said = await asyncio.to_thread(
            choirctl, home.root, "knowledge", "write", "agent-1", "pet", "a cat called Miso"
        )
        assert said.out == (
            "wrote version 8 of pet in agent-1's personal memory; "
            "encrypted: found by its name, loc, type and tags only\n"
        ), said
        await client.agent_stop("agent-1")
