"""A job card edited while choird's database is away: the chat goes on seeing it change, choird
logs that a restart would not resume the card, and once the database is back the next write
stores the card again — an [Inject…] prompt sent meanwhile too, whose reply after a restart
still reaches the job.

choird runs as a real process on a home with its embedded Postgres, whose postmaster the test
SIGKILLs; choird's supervisor restarts it after `HOLD_MS` (failpoint `postgres.before_restart`),
longer than a quiet card waits for its next edit (`TICK_S`).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest

from choir.daemon.gateway.telegram.cards import TICK_S
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedModelServer, ToolCallsStep
from choir.store.events import read_events
from choir.store.gateway.job_cards import CardRow, open_cards
from choir.store.postgres.pool import connect
from choir.store.postgres.postmaster import postmaster_pid
from tests.faults.support import embedded_params
from tests.harness.agent_logs import instruction_queued
from tests.harness.botapi import BotApiServer
from tests.harness.homes import make_home, read_config, write_config
from tests.harness.waits import poll_until

from .conftest import PHONE, telegram_home
from .restarts import LEASE, Daemon
from .test_telegram_cards import LISTENER, answered, edge, edits_of, now_of, run, scripted
from .test_telegram_cards_restart import cards_of, prompt_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HOLD_MS = int((TICK_S + 3) * 1000)
"""How long the database stays away: the card is edited meanwhile, if only for its time."""

BEATING = Script(
    steps=[
        *edge("beater"),
        ReplyStep(after="tool", match="halted-now", text="Halted."),
        ToolCallsStep(
            after="tool",
            match="beat",
            repeat=True,
            calls=[run("sleep 0.5; if [ -e halt ]; then echo halted-now; else echo beat; fi")],
        ),
        ToolCallsStep(calls=[run("sleep 0.5; echo beat")]),
    ]
)
"""A job that beats every half second until the test makes the file `halt`."""


@pytest.fixture
def script(request: pytest.FixtureRequest) -> Script:
    found: Script = request.param
    return found


@pytest.fixture
def home(root: Path, model: ScriptedModelServer, api: BotApiServer) -> ChoirHome:
    home = make_home(root)  # the embedded server, which choird restarts when it dies
    data = read_config(home)
    data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
    data.update(LEASE)
    write_config(home, data)
    return telegram_home(home, api.url)


async def stored(home: ChoirHome) -> list[CardRow] | None:
    """The stored cards; None while the database is away."""
    try:
        conn = await connect(await asyncio.to_thread(embedded_params, home))
    except Exception:
        return None
    try:
        return await open_cards(conn)
    except Exception:
        return None
    finally:
        await conn.close()


@scripted(BEATING)
async def test_a_card_edited_with_the_database_away_goes_on_and_is_stored_once_it_is_back(
    daemon: Daemon, api: BotApiServer, home: ChoirHome
) -> None:
    await daemon.start(CHOIR_FAILPOINTS=f"postgres.before_restart=sleep({HOLD_MS})")
    await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    api.user_says(PHONE, "please start the beater")
    await api.wait_for(lambda: bool(cards_of(api, "beater")), within=60)
    [card] = cards_of(api, "beater")

    async def row_shows_the_card() -> bool:
        rows = await stored(home)
        return rows is not None and [r.shown for r in rows] == [now_of(api, card).text]

    await poll_until(row_shows_the_card, within=30, every=0.1)
    [before] = await stored(home) or []
    await kill_postgres(home)
    edited = len(edits_of(api, card))

    lost = "telegram job card edit not stored: a choird restart would not resume it"
    await poll_until(lambda: lost in home.choird_log.read_text(), within=HOLD_MS / 1000 + 10)
    assert len(edits_of(api, card)) > edited  # the chat saw the edit the database missed
    assert now_of(api, card).text != before.shown
    assert now_of(api, card).buttons

    await poll_until(row_shows_the_card, within=60, every=0.2)  # the next write stores it
    [after] = await stored(home) or []
    assert (after.card_id, after.message_id) == (before.card_id, card.message_id)
    assert after.shown != before.shown
    assert daemon.process is not None
    assert daemon.process.process.poll() is None  # choird rode it out

    (Path(read_config(home)["workspaces"]["default"]["path"]) / "halt").touch()
    await api.wait_for(
        lambda: now_of(api, card).text.startswith("Core job beater: done"), within=60
    )
    assert not now_of(api, card).buttons
    await poll_until(lambda: _none_stored(home), within=20)


@scripted(LISTENER)
async def test_a_prompt_sent_with_the_database_away_is_answered_after_a_restart(
    daemon: Daemon, api: BotApiServer, home: ChoirHome
) -> None:
    await daemon.start(CHOIR_FAILPOINTS=f"postgres.before_restart=sleep({HOLD_MS})")
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    api.user_says(PHONE, "please start the listener")
    await api.wait_for(lambda: bool(cards_of(api, "listener")), within=60)
    [card] = cards_of(api, "listener")

    async def row_shows_the_card() -> bool:
        rows = await stored(home)
        return rows is not None and [r.shown for r in rows] == [now_of(api, card).text]

    await poll_until(row_shows_the_card, within=30, every=0.1)
    [before] = await stored(home) or []
    # a press needs the database (the DM's bound session): it goes away while Telegram takes
    # the prompt, between the press's read and the prompt's write
    api.hold("sendMessage")
    pressed = api.user_presses(PHONE, card, card.buttons[1][1])
    await poll_until(lambda: any(_is_prompt(c.params) for c in api.sends(PHONE)), within=30)
    await kill_postgres(home)
    api.release("sendMessage")
    lost = "telegram job card prompt not stored: a choird restart would not resume it"
    await poll_until(lambda: lost in home.choird_log.read_text(), within=30)
    assert await answered(api, pressed) == "Reply to the prompt to instruct listener"
    prompt = await prompt_of(api)

    async def edited_since() -> bool:  # an edit's write once the database is back
        rows = await stored(home)
        return bool(rows) and await row_shows_the_card() and rows[0].shown != before.shown

    await poll_until(edited_since, within=HOLD_MS / 1000 + 60, every=0.2)
    [after] = await stored(home) or []
    assert after.prompts == (prompt.message_id,)  # the lost prompt's write, made again
    daemon.kill()
    edited = len(edits_of(api, card))
    await daemon.start()
    await api.wait_for(lambda: len(edits_of(api, card)) > edited, within=30)  # resumed

    api.user_says(PHONE, "use blue", reply_to=prompt)
    await api.wait_for(
        lambda: "Sent to core job listener: it reads it at its next step." in api.texts(PHONE),
        within=30,
    )
    await poll_until(lambda: instruction_queued(home), within=30)  # a push: the job has it now
    (Path(read_config(home)["workspaces"]["default"]["path"]) / "go").touch()
    await api.wait_for(
        lambda: now_of(api, card).text.startswith("Core job listener: done"), within=60
    )
    conn = await connect(await asyncio.to_thread(embedded_params, home))
    try:
        records = await read_events(conn, str(started["session_id"]), 1, 10_000)
    finally:
        await conn.close()
    injected = [r.payload["content"] for r in records if r.event_type == "injected_instruction"]
    assert injected == ["use blue"]
    await poll_until(lambda: _none_stored(home), within=20)


async def kill_postgres(home: ChoirHome) -> None:
    """SIGKILL the embedded postmaster, then wait until its backends are gone too: each exits
    only once it sees the postmaster died, and one still serving choird's pool would take a
    write as if the database were there (on a loaded machine, for seconds)."""
    postmaster = postmaster_pid(home.pgdata)
    assert postmaster is not None
    backends = psutil.Process(postmaster).children()
    os.kill(postmaster, signal.SIGKILL)

    def gone(process: psutil.Process) -> bool:
        try:
            return process.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    await poll_until(lambda: all(map(gone, backends)), within=30, every=0.05)


def _is_prompt(params: dict[str, Any]) -> bool:
    """Whether a sendMessage call sends an [Inject…] prompt (a ForceReply)."""
    markup = params.get("reply_markup")
    return "force_reply" in (markup if isinstance(markup, str) else json.dumps(markup))


async def _none_stored(home: ChoirHome) -> bool:
    return await stored(home) == []
