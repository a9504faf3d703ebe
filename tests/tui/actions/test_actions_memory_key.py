"""The console starts an agent with its memory key: the palette's agent start asks for a key
file on the operator's machine, reads and checks it there (choirctl's parser) and sends the key
as choirctl does. On a real choird whose agent-1 has an encrypted personal memory
(`tests.harness.memory_encryption`): started with the key, the agent stores a sealed item and
the console shows it opened, and the console's own write there is sealed too (refused once the
key is gone); a bad key file is refused in one notification, nothing started. The Agents tab's
`s` asks for the key file of an agent with an encrypted memory; escape starts nothing; the
start's notification says what it sealed of what was written before the marking."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from choir.core.memory.knowledge.graph import ItemFields, Placement
from choir.core.memory.sealed_items import LOCKED_TEXT, SEALED_TEXT
from choir.home import ChoirHome
from choir.protocol.operator.verbs import OperatorVerb as V
from choir.scripted import Script
from tests.harness.memory import memory_store
from tests.harness.memory_encryption import SCRIPT, SECRET, encrypt_personal, say
from tests.tui.actions.conftest import Choird, notes
from tests.tui.actions.test_actions_catalogue import answer_shown, noted, run
from tests.tui.conftest import column
from tests.tui.pilot import console, show_tab, until
from tui.dialogs import TextPrompt

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

START = "Agent: start"
WRITE = "Knowledge: replace an item's text (keeps a version)"
TABBY = "The cat is Miso, a tabby."
SEALED_NOTE = "sealed 1 item of agent-1/personal written before it was marked encrypted"


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def home(home: ChoirHome) -> ChoirHome:
    return encrypt_personal(home)


async def test_an_agent_started_from_the_palette_with_its_key_opens_its_encrypted_item(
    choird: Choird, root: Path
):
    key_file = root / "memory.key"
    key_file.write_text(secrets.token_bytes(32).hex() + "\n")
    async with console(choird.home) as (app, pilot):
        await run(pilot, START, "agent-1", str(key_file))
        await noted(pilot, "agent-1 started")
        assert await say(choird.client, "remember my pet", "stored") == "stored"
        store = choird.daemon.memory_store
        assert store is not None
        stored = await store.get_knowledge("agent-1", "user.pet")
        assert stored.text == SEALED_TEXT  # sealed at rest
        await run(pilot, "Knowledge: show an item", "agent-1", "user.pet")
        assert SECRET in await answer_shown(pilot, SECRET)
        # the console's write there is sealed too, with the key choird holds
        await run(pilot, WRITE, "agent-1", "user.pet", TABBY)
        await noted(pilot, "user.pet written")
        written = await store.get_knowledge("agent-1", "user.pet")
        assert (written.version, written.text) == (stored.version + 1, SEALED_TEXT)
        assert not written.has_vector
        await run(pilot, "Knowledge: show an item", "agent-1", "user.pet")
        await answer_shown(pilot, TABBY)
        app.select_agent("agent-1")
        await show_tab(pilot, "memory")
        await pilot.press("k")  # the Memory tab's knowledge list: opened too
        await until(pilot, lambda: TABBY in column(app, "memory-results", "text"), what=TABBY)
        # a search's hit: opened too, with its memory
        await pilot.press("s", "o", "o", "slash", *"encrypted", "enter")  # knowledge, text
        await until(pilot, lambda: "hit(s) for" in shown(app), what="the search")
        assert column(app, "memory-results", "text") == [TABBY]
        assert column(app, "memory-results", "from") == ["user.pet · personal of console"]
        await choird.client.agent_stop("agent-1")  # the key is gone: the list says locked
        await pilot.press("k")
        await until(
            pilot, lambda: LOCKED_TEXT in column(app, "memory-results", "text"), what="locked"
        )
        # ...and a write is refused in one line naming the fix, nothing written
        await run(pilot, WRITE, "agent-1", "user.pet", "in the clear")
        await noted(pilot, "choirctl agent start agent-1 --memory-key-file PATH", "error")
        assert (await store.get_knowledge("agent-1", "user.pet")).version == written.version


async def test_the_agents_tab_start_asks_for_the_key_of_an_encrypted_memory(
    choird: Choird, root: Path
):
    key_file = root / "memory.key"
    key_file.write_text(secrets.token_bytes(32).hex() + "\n")
    async with console(choird.home) as (app, pilot):
        app.select_agent("agent-1")
        await show_tab(pilot, "agents")
        await until(pilot, lambda: "agent-1" in app.state.agents, what="the agents")
        await pilot.press("s")
        prompt = await until_prompt(pilot)
        assert "memory key file" in prompt.label
        assert "personal memory is encrypted" in prompt.label
        await pilot.press("escape")  # cancelled: nothing starts
        await pilot.pause(0.5)
        assert (await choird.client.agent_status("agent-1")).pid is None
        assert not any("started" in text for _, text in notes(app))

        # written in the clear before the marking: the keyed start seals it and says so
        await choird.daemon.memory_started()
        personal = ItemFields(memory=Placement("personal", "console"))
        await memory_store(choird.daemon).add_knowledge(
            "agent-1", "The user's cat is called Tabby.", name="user.cat", fields=personal
        )
        await pilot.press("s")
        await until_prompt(pilot)
        await pilot.press(*str(key_file), "enter")
        await noted(pilot, f"agent-1 started\n{SEALED_NOTE}")
        # the key is held: the operator's write to the encrypted memory is sealed, not refused
        await choird.client.call(
            V.KNOWLEDGE_PUT, agent_id="agent-1", text=SECRET, name="user.pet",
            memory="personal", user="console",
        )  # fmt: skip
        store = choird.daemon.memory_store
        assert store is not None
        assert (await store.get_knowledge("agent-1", "user.pet")).text == SEALED_TEXT
        await choird.client.agent_stop("agent-1")


def shown(app: Any) -> str:
    return str(app.query_one("#memory-what", Static).content)


async def until_prompt(pilot: Pilot[Any]) -> TextPrompt:
    await until(pilot, lambda: isinstance(pilot.app.screen, TextPrompt), what="the key prompt")
    screen = pilot.app.screen
    assert isinstance(screen, TextPrompt)
    return screen


async def test_a_bad_key_file_is_refused_in_one_notification_and_nothing_starts(
    choird: Choird, root: Path
):
    short = root / "short.key"
    short.write_text("not a key\n")
    async with console(choird.home) as (app, pilot):
        for path, refusal in (
            (short, "the memory key is not a 256-bit key"),
            (root / "missing.key", f"memory key file {root / 'missing.key'}: cannot read it"),
        ):
            await run(pilot, START, "agent-1", str(path))
            await until(pilot, lambda: bool(notes(app)), what="a refusal")
            assert [(severity, refusal in text) for severity, text in notes(app)] == [
                ("error", True)
            ]
            assert "\n" not in notes(app)[0][1]
            app.clear_notifications()
            assert (await choird.client.agent_status("agent-1")).pid is None
