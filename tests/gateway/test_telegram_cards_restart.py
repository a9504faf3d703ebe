"""Live core-job cards survive a choird restart: the card of a job that runs on, adopted, goes on
being edited; one whose job ended while choird was away gets its final edit; its [Cancel] still
cancels; a choird killed between Telegram taking a card and its message id being stored
sends nothing twice (that card stays as it was: the one card a restart loses); one killed after
a card's final edit drops its row at the next start, the chat unchanged; a job started while
choird was away gets its card once choird is back, however early its start is replicated; and
one whose start choird had stored but not its card (killed in between) gets it once too.

choird runs as a real process (the test's Postgres, the process runtime, the local Bot API
server) so it can be SIGKILLed, or made to exit at a failpoint, while agent-1 runs on.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from choir.daemon.gateway.telegram.cards import EDIT_EVERY_S
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
from choir.store.approvals.pending import list_approvals
from choir.store.events import read_events
from choir.store.gateway.job_cards import CardRow, open_cards
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from tests.faults.support import agent_processes
from tests.harness.agent_logs import instruction_queued
from tests.harness.botapi import BotApiServer, Sent
from tests.harness.homes import read_config, scripted_home
from tests.harness.proposals import TOOL_PROPOSAL
from tests.harness.waits import poll_until

from .conftest import PHONE, telegram_home
from .restarts import Daemon, leased
from .test_telegram_cards import (
    LISTENER,
    SLEEPER,
    answered,
    edge,
    edits_of,
    now_of,
    run,
    scripted,
    spawn,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

GATED = Script(
    steps=[
        *edge("gated"),
        ReplyStep(after="tool", match="gate-two-open", text="Through both gates."),
        ToolCallsStep(
            after="tool",
            match="gate-one-open",
            calls=[run("until [ -e go2 ]; do sleep 0.2; done; echo gate-two-open")],
        ),
        ToolCallsStep(calls=[run("until [ -e go1 ]; do sleep 0.2; done; echo gate-one-open")]),
    ]
)
"""A job of three steps, each of the first two waiting for a file the test makes."""
HOLD_MS = 10_000
"""How long a restarted choird waits after adopting its agents (failpoint
`choird.start.after_adoption`): the agents reconnect within 2 s and replicate meanwhile."""

LATE = Script(
    steps=[
        ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
        ToolCallsStep(
            match="start the late",
            calls=[run("touch at0; until [ -e go0 ]; do sleep 0.2; done; echo gate-zero-open")],
        ),
        ToolCallsStep(after="tool", match="gate-zero-open", calls=[spawn("late", "Be late.")]),
        ReplyStep(after="tool", match="late started", text="Started late."),
        ReplyStep(after="tool", match="gate-one-open", text="Through the gate."),
        ToolCallsStep(calls=[run("until [ -e go1 ]; do sleep 0.2; done; echo gate-one-open")]),
    ]
)
"""Edge spawns the job once the test opens a gate (`at0`: edge waits at it); the job waits at
another."""
PROPOSING = Script(
    steps=[
        ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
        ToolCallsStep(
            match="propose after the gate",
            calls=[run("touch at0; until [ -e go0 ]; do sleep 0.2; done; echo gate-zero-open")],
        ),
        ToolCallsStep(
            after="tool",
            match="gate-zero-open",
            calls=[ScriptedCall(name="choir.propose.tool", arguments=TOOL_PROPOSAL)],
        ),
        ReplyStep(after="tool", match="proposal submitted", text="Proposed."),
    ]
)
"""Edge proposes a tool once the test opens a gate (`at0`: edge waits at it)."""


@pytest.fixture
def script(request: pytest.FixtureRequest) -> Script:
    found: Script = request.param
    return found


@pytest.fixture
def home(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer, api: BotApiServer
) -> ChoirHome:
    return leased(telegram_home(scripted_home(root, pg_params, model.url), api.url))


def workspace(home: ChoirHome) -> Path:
    return Path(read_config(home)["workspaces"]["default"]["path"])


async def stored_cards(params: ConnectParams) -> list[CardRow]:
    conn = await connect(params)
    try:
        return await open_cards(conn)
    finally:
        await conn.close()


async def stops(params: ConnectParams, session_id: str, job: str) -> list[str]:
    """The outcomes of the job's durable `core_stopped` events."""
    conn = await connect(params)
    try:
        records = await read_events(conn, session_id, 1, 10_000)
    finally:
        await conn.close()
    return [
        str(r.payload["outcome"])
        for r in records
        if r.event_type == "core_stopped" and r.payload.get("job_name") == job
    ]


async def started_card(
    daemon: Daemon, api: BotApiServer, params: ConnectParams, job: str
) -> tuple[str, Sent]:
    """choird and agent-1 on the phone, `job` started and its card stored with its message:
    the session and the card."""
    await daemon.start()
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    api.user_says(PHONE, f"please start the {job}")
    await api.wait_for(lambda: bool(cards_of(api, job)), within=60)
    [card] = cards_of(api, job)

    async def stored() -> bool:
        return [(r.message_id, r.job_name) for r in await stored_cards(params)] == [
            (card.message_id, job)
        ]

    await poll_until(stored, within=20, every=0.1)
    return str(started["session_id"]), card


def cards_of(api: BotApiServer, job: str) -> list[Sent]:
    """The card messages of `job` in the phone's chat (one, unless one was sent twice)."""
    return [m for m in api.sent(PHONE) if m.text.startswith(f"Core job {job}")]


def card_sends(api: BotApiServer, job: str) -> int:
    """sendMessage calls of `job`'s card, refused ones too."""
    return sum(
        c.method == "sendMessage" and str(c.params.get("text", "")).startswith(f"Core job {job}")
        for c in api.sends(PHONE)
    )


@scripted(GATED)
async def test_a_card_goes_on_being_edited_after_choird_is_killed_and_started_again(
    daemon: Daemon, api: BotApiServer, home: ChoirHome, pg_params: ConnectParams
) -> None:
    session_id, card = await started_card(daemon, api, pg_params, "gated")
    daemon.kill()
    edited = len(edits_of(api, card))

    await daemon.start()  # adopts agent-1, whose job waits at its first gate
    await api.wait_for(lambda: len(edits_of(api, card)) > edited, within=30)  # resumed
    assert now_of(api, card).buttons
    (workspace(home) / "go1").touch()
    await api.wait_for(lambda: "step 2 · " in now_of(api, card).text, within=60)
    assert now_of(api, card).buttons  # still live
    (workspace(home) / "go2").touch()
    await api.wait_for(lambda: now_of(api, card).text.startswith("Core job gated: done"), within=60)

    final = now_of(api, card)
    assert ", 3 steps\nThrough both gates." in final.text  # counted across the restart
    assert not final.buttons
    assert card_sends(api, "gated") == 1  # edited, never sent again
    assert await stops(pg_params, session_id, "gated") == ["completed"]
    await poll_until(lambda: _none_stored(pg_params), within=20)  # done with: deleted


@scripted(LATE)
async def test_a_job_started_while_choird_was_away_gets_one_card_when_it_comes_back(
    daemon: Daemon, api: BotApiServer, home: ChoirHome, pg_params: ConnectParams
) -> None:
    """Edge asks for the job with choird away; its `core_started` is replicated as the adopted
    agent reconnects, before the gateways start (held there by the failpoint): it still gets
    its card, once."""
    await daemon.start()
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    session_id = str(started["session_id"])
    api.user_says(PHONE, "please start the late")
    gates = workspace(home)
    await poll_until(lambda: (gates / "at0").exists(), within=60, every=0.1)
    daemon.kill()
    (gates / "go0").touch()  # edge asks for the job, whose start waits for choird

    starting = asyncio.create_task(
        daemon.start(CHOIR_FAILPOINTS=f"choird.start.after_adoption=sleep({HOLD_MS})")
    )
    await poll_until(lambda: _started(pg_params, session_id, "late"), within=60, every=0.1)
    assert not starting.done()  # replicated before the gateways started
    await starting
    await api.wait_for(lambda: bool(cards_of(api, "late")), within=30)
    [card] = cards_of(api, "late")
    assert card.buttons
    # its lane reported the tool it waits in before the card was made: that shows, not `starting`
    await api.wait_for(
        lambda: now_of(api, card).text.startswith("Core job late: running a tool"), within=30
    )
    (gates / "go1").touch()
    await api.wait_for(lambda: now_of(api, card).text.startswith("Core job late: done"), within=60)
    assert ", 2 steps\nThrough the gate." in now_of(api, card).text
    assert not now_of(api, card).buttons
    assert card_sends(api, "late") == 1
    await poll_until(lambda: _none_stored(pg_params), within=20)


@scripted(PROPOSING)
async def test_an_approval_asked_as_choird_comes_back_gets_its_message(
    daemon: Daemon, api: BotApiServer, home: ChoirHome, pg_params: ConnectParams
) -> None:
    """The adopted agent's approval request reaches choird before the gateways start (held
    there by the failpoint): its message with buttons still reaches the DM, once."""
    await daemon.start()
    await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    api.user_says(PHONE, "please propose after the gate")
    gates = workspace(home)
    await poll_until(lambda: (gates / "at0").exists(), within=60, every=0.1)
    daemon.kill()
    (gates / "go0").touch()  # edge proposes, which waits for choird

    starting = asyncio.create_task(
        daemon.start(CHOIR_FAILPOINTS=f"choird.start.after_adoption=sleep({HOLD_MS})")
    )
    await poll_until(lambda: _asked(pg_params), within=60, every=0.1)
    assert not starting.done()  # asked before the gateways started
    await starting
    await api.wait_for(lambda: any(m.buttons for m in api.sent(PHONE)), within=30)
    [asked] = [m for m in api.sent(PHONE) if m.buttons]
    assert asked.text.startswith("agent-1 asks for approval (tool): ")
    assert [label for label, _ in asked.buttons] == ["Approve", "Reject"]


@scripted(GATED)
async def test_a_job_that_ended_while_choird_was_away_gets_its_final_edit(
    daemon: Daemon, api: BotApiServer, home: ChoirHome, pg_params: ConnectParams
) -> None:
    session_id, card = await started_card(daemon, api, pg_params, "gated")
    api.hold("editMessageText")  # Telegram takes no edit: the card stays as it is
    (workspace(home) / "go1").touch()
    (workspace(home) / "go2").touch()
    await poll_until(
        lambda: _stopped(pg_params, session_id, "gated"), within=60, every=0.2
    )  # durable: choird heard the end, and its final edit is held
    daemon.kill()
    # the dead choird's held edit is never taken (were none held, the new choird's first
    # try fails instead, and is tried again)
    api.fail("editMessageText", 502, chat_id=PHONE)
    api.release("editMessageText")
    assert now_of(api, card).buttons

    await daemon.start()  # its end was replicated already: read from the session's log
    await api.wait_for(lambda: now_of(api, card).text.startswith("Core job gated: done"), within=60)
    final = now_of(api, card)
    assert ", 3 steps\nThrough both gates." in final.text
    assert not final.buttons
    assert card_sends(api, "gated") == 1
    resumed = '"telegram job card resumed","dm":"phone","job":"gated","ended":true'
    assert resumed in home.choird_log.read_text()  # its end read at the start, from the log
    await poll_until(lambda: _none_stored(pg_params), within=20)


@scripted(SLEEPER)
async def test_a_card_whose_session_crashed_while_choird_was_away_ends_as_crashed(
    daemon: Daemon, api: BotApiServer, home: ChoirHome, pg_params: ConnectParams
) -> None:
    await started_card(daemon, api, pg_params, "sleeper")
    [card] = cards_of(api, "sleeper")
    daemon.kill()
    for process in agent_processes(home):  # the agent dies with choird away
        os.killpg(process.pid, signal.SIGKILL)

    await daemon.start()  # nothing to adopt: the session crashed, and so does the card end
    await api.wait_for(
        lambda: now_of(api, card).text.startswith("Core job sleeper: stopped: its session crashed"),
        within=60,
    )
    assert now_of(api, card).text.endswith("its agent no longer runs")
    assert not now_of(api, card).buttons
    assert card_sends(api, "sleeper") == 1
    await poll_until(lambda: _none_stored(pg_params), within=20)


@scripted(SLEEPER)
async def test_a_graceful_stop_ends_the_card_once(
    daemon: Daemon, api: BotApiServer, pg_params: ConnectParams
) -> None:
    await started_card(daemon, api, pg_params, "sleeper")
    [card] = cards_of(api, "sleeper")
    await daemon.stop()  # stops agent-1, its job cancelled: the card ends now or at the start

    await daemon.start()
    await api.wait_for(
        lambda: now_of(api, card).text.startswith("Core job sleeper: cancelled"), within=60
    )
    assert now_of(api, card).text.endswith("\nthe agent is stopping")
    assert not now_of(api, card).buttons
    assert card_sends(api, "sleeper") == 1
    await poll_until(lambda: _none_stored(pg_params), within=20)


@scripted(SLEEPER)
async def test_cancel_pressed_after_a_restart_cancels_the_job_once(
    daemon: Daemon, api: BotApiServer, pg_params: ConnectParams
) -> None:
    session_id, card = await started_card(daemon, api, pg_params, "sleeper")
    cancel = card.buttons[0][1]
    daemon.kill()
    edited = len(edits_of(api, card))
    await daemon.start()
    await api.wait_for(lambda: len(edits_of(api, card)) > edited, within=30)  # resumed

    assert await answered(api, api.user_presses(PHONE, card, cancel)) == "Cancelling sleeper"
    again = await answered(api, api.user_presses(PHONE, card, cancel))
    assert again in ("sleeper is being cancelled already", "no longer valid")  # never twice
    await api.wait_for(
        lambda: now_of(api, card).text.startswith("Core job sleeper: cancelled"), within=60
    )
    assert not now_of(api, card).buttons
    assert await stops(pg_params, session_id, "sleeper") == ["cancelled"]
    assert await answered(api, api.user_presses(PHONE, card, cancel)) == "no longer valid"
    await poll_until(lambda: _none_stored(pg_params), within=20)


@scripted(LISTENER)
async def test_an_inject_prompt_sent_before_a_restart_is_answered_after_it(
    daemon: Daemon, api: BotApiServer, home: ChoirHome, pg_params: ConnectParams
) -> None:
    session_id, card = await started_card(daemon, api, pg_params, "listener")
    pressed = api.user_presses(PHONE, card, card.buttons[1][1])
    assert await answered(api, pressed) == "Reply to the prompt to instruct listener"
    prompt = await prompt_of(api)

    async def prompt_stored() -> bool:
        return [r.prompts for r in await stored_cards(pg_params)] == [(prompt.message_id,)]

    await poll_until(prompt_stored, within=20, every=0.1)
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
    (workspace(home) / "go").touch()
    await api.wait_for(
        lambda: now_of(api, card).text.startswith("Core job listener: done"), within=60
    )
    conn = await connect(pg_params)
    try:
        records = await read_events(conn, session_id, 1, 10_000)
    finally:
        await conn.close()
    injected = [r.payload["content"] for r in records if r.event_type == "injected_instruction"]
    assert injected == ["use blue"]
    await poll_until(lambda: _none_stored(pg_params), within=20)


async def prompt_of(api: BotApiServer) -> Sent:
    """The [Inject…] prompt in the phone's chat, once sent."""

    def prompts() -> list[Sent]:
        return [m for m in api.sent(PHONE) if m.params.get("reply_markup", {}).get("force_reply")]

    await api.wait_for(lambda: bool(prompts()))
    [prompt] = prompts()
    return prompt


@scripted(GATED)
async def test_a_choird_killed_before_a_sent_card_is_stored_sends_it_once_and_forgets_it(
    daemon: Daemon, api: BotApiServer, home: ChoirHome, pg_params: ConnectParams
) -> None:
    await daemon.start(CHOIR_FAILPOINTS="telegram.card.after_send=exit")
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    session_id = str(started["session_id"])
    api.user_says(PHONE, "please start the gated")
    assert daemon.process is not None
    exited = await asyncio.to_thread(daemon.process.process.wait, 60)
    assert exited == 137  # the failpoint: Telegram took the card, its message id unstored
    [card] = cards_of(api, "gated")
    [row] = await stored_cards(pg_params)
    assert (row.card_id, row.message_id) == (card.buttons[0][1][1:].split(".")[0], None)

    await daemon.start()  # the card may show or not: it is never sent a second time
    await poll_until(lambda: _none_stored(pg_params), within=20)
    why = "telegram job card not resumed: choird stopped while it was being sent"
    assert why in home.choird_log.read_text()  # the operator is told which card
    assert await answered(api, api.user_presses(PHONE, card, card.buttons[0][1])) == (
        "no longer valid"
    )
    (workspace(home) / "go1").touch()
    (workspace(home) / "go2").touch()
    await poll_until(lambda: _stopped(pg_params, session_id, "gated"), within=60, every=0.2)
    await asyncio.sleep(EDIT_EVERY_S)  # what a choird that edited the card would have done by now
    assert card_sends(api, "gated") == 1
    assert edits_of(api, card) == []
    assert now_of(api, card).buttons  # left as it was: the one card the kill lost


@scripted(GATED)
async def test_a_choird_killed_before_a_card_is_stored_sends_it_once_after_the_restart(
    daemon: Daemon, api: BotApiServer, home: ChoirHome, pg_params: ConnectParams
) -> None:
    """choird SIGKILLed with the job's start durable, its card neither stored nor sent: the
    next choird reads the start from the log (past the session's card cursor) and sends the
    card, once; a choird started after the job ended sends nothing more."""
    await daemon.start(CHOIR_FAILPOINTS="telegram.card.before_store=sleep(600000)")
    started = await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    session_id = str(started["session_id"])
    api.user_says(PHONE, "please start the gated")
    await poll_until(lambda: _started(pg_params, session_id, "gated"), within=60, every=0.1)
    await asyncio.sleep(0.5)  # its card's task is at the failpoint
    daemon.kill()
    assert (cards_of(api, "gated"), await stored_cards(pg_params)) == ([], [])

    await daemon.start()  # adopts agent-1, whose job waits at its first gate
    await api.wait_for(lambda: bool(cards_of(api, "gated")), within=30)
    [card] = cards_of(api, "gated")
    assert card.buttons
    assert "telegram job cards sent from the log" in home.choird_log.read_text()
    (workspace(home) / "go1").touch()
    (workspace(home) / "go2").touch()
    await api.wait_for(lambda: now_of(api, card).text.startswith("Core job gated: done"), within=60)
    assert ", 3 steps\nThrough both gates." in now_of(api, card).text
    await poll_until(lambda: _none_stored(pg_params), within=20)

    daemon.kill()  # its row is gone with its final edit; the cursor says it was sent
    await daemon.start()
    await asyncio.sleep(EDIT_EVERY_S)  # what a choird sending it again would have done by now
    assert card_sends(api, "gated") == 1
    assert await stops(pg_params, session_id, "gated") == ["completed"]


@scripted(GATED)
async def test_a_choird_killed_after_a_final_edit_before_its_row_is_dropped_drops_it_once(
    daemon: Daemon, api: BotApiServer, home: ChoirHome, pg_params: ConnectParams
) -> None:
    await daemon.start(CHOIR_FAILPOINTS="telegram.card.before_drop=exit")
    await daemon.ctl("agent", "start", "agent-1", "--dm", "phone")
    api.user_says(PHONE, "please start the gated")
    await api.wait_for(lambda: bool(cards_of(api, "gated")), within=60)
    [card] = cards_of(api, "gated")
    (workspace(home) / "go1").touch()
    (workspace(home) / "go2").touch()
    assert daemon.process is not None
    exited = await asyncio.to_thread(daemon.process.process.wait, 90)
    assert exited == 137  # the failpoint: the card shows its outcome, its row is still stored
    final = now_of(api, card)
    assert final.text.startswith("Core job gated: done")
    assert not final.buttons
    [row] = await stored_cards(pg_params)
    assert row.message_id == card.message_id

    await daemon.start()  # resumes it ended: the same final edit, "not modified", is done with
    await poll_until(lambda: _none_stored(pg_params), within=30)
    assert now_of(api, card) == final
    took = [text for _, text in edits_of(api, card) if text == final.text]
    assert len(took) == 2  # made once, tried once more and refused as not modified
    assert card_sends(api, "gated") == 1
    assert "telegram job card resumed" in home.choird_log.read_text()


async def _none_stored(params: ConnectParams) -> bool:
    return not await stored_cards(params)


async def _asked(params: ConnectParams) -> bool:
    """Whether an approval is pending."""
    conn = await connect(params)
    try:
        return bool(await list_approvals(conn))
    finally:
        await conn.close()


async def _started(params: ConnectParams, session_id: str, job: str) -> bool:
    """Whether the job's `core_started` event is durable."""
    conn = await connect(params)
    try:
        records = await read_events(conn, session_id, 1, 10_000)
    finally:
        await conn.close()
    return any(
        r.event_type == "core_started" and r.payload["job"]["job_name"] == job for r in records
    )


async def _stopped(params: ConnectParams, session_id: str, job: str) -> bool:
    return bool(await stops(params, session_id, job))
