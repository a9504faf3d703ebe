"""The console starts an agent with its memory key: the palette's agent start asks for a key
file on the operator's machine, reads and checks it there (choirctl's parser) and sends the key
as choirctl does. On a real choird whose agent-1 has an encrypted personal memory
(`tests.harness.memory_encryption`): started with the key, the agent stores a sealed item and
the console shows it opened; a bad key file is refused in one notification, nothing started."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from choir.core.memory.sealed_items import LOCKED_TEXT, SEALED_TEXT
from choir.home import ChoirHome
from choir.scripted import Script
from tests.harness.memory_encryption import SCRIPT, SECRET, encrypt_personal, say
from tests.tui.actions.conftest import Choird, notes
from tests.tui.actions.test_actions_catalogue import answer_shown, noted, run
from tests.tui.conftest import column
from tests.tui.pilot import console, show_tab, until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

START = "Agent: start"


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
        app.select_agent("agent-1")
        await show_tab(pilot, "memory")
        await pilot.press("k")  # the Memory tab's knowledge list: opened too
        await until(pilot, lambda: SECRET in column(app, "memory-results", "text"), what=SECRET)
        await choird.client.agent_stop("agent-1")  # the key is gone: the list says locked
        await pilot.press("k")
        await until(
            pilot, lambda: LOCKED_TEXT in column(app, "memory-results", "text"), what="locked"
        )


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
