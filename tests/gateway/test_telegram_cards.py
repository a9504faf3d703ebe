"""Live core-job cards over Telegram end to end: a real choird, agent-1 (process runtime) whose
scripted model starts a core job when asked, python-telegram-bot against the local Bot API
server, and presses of the card's buttons as Telegram delivers them."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.gateway.telegram.approvals import KEY_FILE, Chat
from choir.daemon.gateway.telegram.callback_data import sign
from choir.daemon.gateway.telegram.cards import (
    EDIT_EVERY_S,
    JobCard,
    card_text,
    elapsed,
    progress_line,
)
from choir.home import ChoirHome
from choir.protocol.log.core_jobs import CoreFinalResult, CoreNeedInfo, CoreProgress
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
from tests.harness.agent_logs import instruction_queued
from tests.harness.botapi import BotApiServer, Sent
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import read_config, write_config

from .conftest import BOSS, PHONE

pytestmark = pytest.mark.slow

TICKS = 8


def spawn(job: str, task: str) -> ScriptedCall:
    return ScriptedCall(name="choir.core.spawn", arguments={"job_name": job, "task_spec": task})


def run(command: str) -> ScriptedCall:
    return ScriptedCall(name="choir.exec", arguments={"command": command})


def edge(job: str) -> list[ToolCallsStep | ReplyStep]:
    """Edge's steps: `start the <job>` spawns it."""
    return [
        ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
        ToolCallsStep(match=f"start the {job}", calls=[spawn(job, f"Be the {job}.")]),
        ReplyStep(after="tool", match=f"{job} started", text=f"Started {job}."),
    ]


# The job's prompt has no user message: its first step is the script's last, unmatched one.
COUNTER = Script(
    steps=[
        *edge("counter"),
        *(
            ToolCallsStep(
                after="tool", match=f"tick{n}", calls=[run(f"sleep 0.8; echo tick{n + 1}")]
            )
            for n in range(1, TICKS)
        ),
        ReplyStep(after="tool", match=f"tick{TICKS}", text=f"Counted to {TICKS}."),
        ToolCallsStep(calls=[run("sleep 0.8; echo tick1")]),
    ]
)
SLEEPER = Script(steps=[*edge("sleeper"), ToolCallsStep(calls=[run("exec sleep 60")])])
LISTENER = Script(
    steps=[
        *edge("listener"),
        ReplyStep(after="tool", match="listened", text="Done, as told."),
        # waits until the test saw its instruction sent: however slow the host, it is running
        ToolCallsStep(calls=[run("until [ -e go ]; do sleep 0.2; done; echo listened")]),
    ]
)


@pytest.fixture
def script(request: pytest.FixtureRequest) -> Script:
    found: Script = request.param
    return found


def scripted(script: Script) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("script", [script], indirect=True)


@pytest.fixture
async def agent(home: ChoirHome) -> AsyncIterator[tuple[ChoirClient, str]]:
    """choird, and agent-1 running bound to the DM `phone`: the client and the session."""
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        started = await client.agent_start("agent-1", {"dm": "phone"})
        yield client, str(started.session_id)
        await client.agent_stop("agent-1")


async def card_of(api: BotApiServer, job: str) -> Sent:
    """Ask agent-1 to start `job` from the phone; the job's card once sent."""
    api.user_says(PHONE, f"please start the {job}")
    await api.wait_for(lambda: any(f"Core job {job}" in m.text for m in api.sent(PHONE)), within=30)
    [card] = [m for m in api.sent(PHONE) if m.text.startswith(f"Core job {job}")]
    return card


def now_of(api: BotApiServer, card: Sent) -> Sent:
    [now] = [m for m in api.sent(card.chat_id) if m.message_id == card.message_id]
    return now


def edits_of(api: BotApiServer, card: Sent) -> list[tuple[float, str]]:
    """The card's editMessageText calls: (when, text)."""
    return [
        (call.at, str(call.params["text"]))
        for call in api.calls
        if call.method == "editMessageText"
        and int(call.params["chat_id"]) == card.chat_id
        and int(call.params["message_id"]) == card.message_id
    ]


async def answered(api: BotApiServer, callback_id: str, within: float = 10) -> str:
    await api.wait_for(lambda: api.answer_to(callback_id) is not None, within=within)
    answer = api.answer_to(callback_id)
    assert answer is not None
    return answer.text


async def stopped(client: ChoirClient, session_id: str, job: str) -> dict[str, object]:
    """The job's `core_stopped` event once durable."""
    found: list[dict[str, object]] = []

    async def durable() -> bool:
        events = (await client.session_events(session_id, limit=500)).events
        found[:] = [
            e.payload
            for e in events
            if e.event_type == "core_stopped" and e.payload.get("job_name") == job
        ]
        return bool(found)

    await poll_until(durable, within=30)
    return found[0]


@scripted(COUNTER)
async def test_a_card_shows_the_job_is_edited_throttled_and_ends_with_its_outcome(
    agent: tuple[ChoirClient, str], api: BotApiServer
) -> None:
    client, session_id = agent
    card = await card_of(api, "counter")
    assert card.text.startswith("Core job counter: ")
    assert [label for label, _ in card.buttons] == ["Cancel", "Inject…"]
    assert all(len(data.encode()) <= 64 for _, data in card.buttons)

    await api.wait_for(lambda: now_of(api, card).text.endswith(f"Counted to {TICKS}."), within=40)
    final = now_of(api, card)
    assert final.text.startswith("Core job counter: done\nafter ")
    assert f", {TICKS + 1} steps\n" in final.text
    assert not final.buttons
    assert (await stopped(client, session_id, "counter"))["outcome"] == "completed"

    edits = edits_of(api, card)
    running = [text for _, text in edits[:-1]]
    assert running, "the card was not edited while the job ran"
    assert all("elapsed" in text for text in running)
    assert any("step " in text and "choir.exec" in text for text in running), edits
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(edits)]
    assert all(gap >= EDIT_EVERY_S - 0.05 for gap in gaps), gaps
    events = (await client.session_events(session_id, limit=500)).events
    emitted = sum(e.event_type == "core_event_emitted" for e in events)
    assert len(edits) < emitted / 3  # throttled: far fewer edits than the job's events
    assert len({text for _, text in edits}) == len(edits)  # never an edit that changes nothing


@scripted(SLEEPER)
async def test_cancel_cancels_the_job_and_forged_or_foreign_presses_do_nothing(
    agent: tuple[ChoirClient, str], api: BotApiServer, home: ChoirHome
) -> None:
    client, session_id = agent
    card = await card_of(api, "sleeper")
    cancel, inject = (data for _, data in card.buttons)
    tag = cancel.rsplit(".", 1)[1]
    card_id = cancel[1:].split(".", 1)[0]
    key = (home.root / KEY_FILE).read_bytes()
    forged = [
        cancel[: -len(tag)] + ("A" if tag[0] != "A" else "B") + tag[1:],  # the tag altered
        f"c{card_id}.zzzzzz.{tag}",  # a later expiry under the old tag
        f"cnosuchcard.{cancel.split('.')[1]}.{tag}",  # another card under this tag
        sign(key, "cancel", card_id, PHONE, int(time.time()) - 5, bot="tg"),  # expired
        sign(key, "cancel", "nosuchcard", PHONE, int(time.time()) + 600, bot="tg"),  # no such card
        sign(
            key, "approve", card_id, PHONE, int(time.time()) + 600, bot="tg"
        ),  # not a card's action
    ]
    presses = [api.user_presses(PHONE, card, data) for data in forged]
    presses.append(api.user_presses(BOSS, card, cancel))  # foreign: the phone's button
    for pressed in presses:
        assert await answered(api, pressed) == "no longer valid"

    async def still_running() -> bool:  # no forged press cancelled it: it reaches its tool
        cores = (await client.session_cores(session_id)).cores
        running = [(c.job_name, c.state) for c in cores if c.state.startswith("CORE_")]
        return running == [("sleeper", "CORE_WAITING_TOOL")]

    await poll_until(still_running, within=20)
    assert now_of(api, card).buttons

    assert await answered(api, api.user_presses(PHONE, card, cancel)) == "Cancelling sleeper"
    assert (await stopped(client, session_id, "sleeper"))["outcome"] == "cancelled"
    await api.wait_for(lambda: now_of(api, card).text.startswith("Core job sleeper: cancelled"))
    assert not now_of(api, card).buttons
    for data in (cancel, inject):  # the job ended: its buttons are spent
        assert await answered(api, api.user_presses(PHONE, card, data)) == "no longer valid"


@scripted(SLEEPER)
async def test_a_regular_dm_acts_only_on_its_own_agents_jobs(
    agent: tuple[ChoirClient, str], api: BotApiServer, home: ChoirHome, root: Path
) -> None:
    client, _ = agent
    (root / "ws-other").mkdir()
    other = str((await client.agent_start("agent-2", {"dm": "boss"})).session_id)
    api.user_says(BOSS, "please start the sleeper")
    await api.wait_for(lambda: any(m.buttons for m in api.sent(BOSS)), within=30)
    [card] = [m for m in api.sent(BOSS) if m.buttons]
    assert card.text.startswith("Core job sleeper: ")
    assert not any(m.buttons for m in api.sent(PHONE))  # agent-2's job: the boss's chat only
    # the card's button as if it had been signed for the phone's chat
    card_id = card.buttons[0][1][1:].split(".", 1)[0]
    key = (home.root / KEY_FILE).read_bytes()
    elsewhere = sign(key, "cancel", card_id, PHONE, int(time.time()) + 600, bot="tg")
    phone_card = Sent(PHONE, card.message_id, card.text, card.params)
    assert await answered(api, api.user_presses(PHONE, phone_card, elsewhere)) == (
        "no longer valid"
    )

    async def still_running() -> bool:  # the forged press cancelled nothing
        cores = (await client.session_cores(other)).cores
        return [c.state for c in cores if c.job_name == "sleeper"] == ["CORE_WAITING_TOOL"]

    await poll_until(still_running, within=20)
    cancel = card.buttons[0][1]
    assert await answered(api, api.user_presses(BOSS, card, cancel)) == "Cancelling sleeper"
    assert (await stopped(client, other, "sleeper"))["outcome"] == "cancelled"
    await client.agent_stop("agent-2")


@scripted(LISTENER)
async def test_inject_prompts_for_an_instruction_and_the_reply_reaches_the_job(
    agent: tuple[ChoirClient, str], api: BotApiServer, model: ScriptedModelServer, home: ChoirHome
) -> None:
    client, session_id = agent
    card = await card_of(api, "listener")
    inject = card.buttons[1][1]
    pressed = api.user_presses(PHONE, card, inject)
    assert await answered(api, pressed) == "Reply to the prompt to instruct listener"
    await api.wait_for(lambda: any(m.params.get("reply_markup", {}).get("force_reply")
                                   for m in api.sent(PHONE)))  # fmt: skip
    [prompt] = [m for m in api.sent(PHONE) if m.params.get("reply_markup", {}).get("force_reply")]
    assert prompt.text == "Reply to this message with an instruction for core job listener."

    api.user_says(PHONE, "use blue", reply_to=prompt)
    sent = "Sent to core job listener: it reads it at its next step."
    await api.wait_for(lambda: sent in api.texts(PHONE))
    await poll_until(lambda: instruction_queued(home), within=30)  # a push: the job has it now
    workspace = Path(read_config(home)["workspaces"]["default"]["path"])
    (workspace / "go").touch()  # the job's command ends: its next step reads the instruction
    await api.wait_for(
        lambda: now_of(api, card).text.startswith("Core job listener: done"), within=40
    )

    events = (await client.session_events(session_id, limit=500)).events
    injected = [e.payload for e in events if e.event_type == "injected_instruction"]
    assert injected == [
        {"kind": "injected_instruction", "target": "core:listener", "content": "use blue",
         "source": "user"}
    ]  # fmt: skip
    last = [r.body for r in model.requests if "listened" in json.dumps(r.body)][-1]
    assert "[INJECTED] use blue" in json.dumps(last)  # the job's model read it
    assert "Done, as told." in now_of(api, card).text
    # the reply went to the job, not to edge as a message
    messages = [e.payload for e in events if e.event_type == "user_message"]
    assert all("use blue" not in json.dumps(m) for m in messages)


@scripted(COUNTER)
async def test_a_429_on_an_edit_delays_that_card_and_it_still_ends_with_the_outcome(
    agent: tuple[ChoirClient, str], api: BotApiServer
) -> None:
    api.fail("editMessageText", 429, retry_after=4)
    card = await card_of(api, "counter")
    await api.wait_for(lambda: now_of(api, card).text.endswith(f"Counted to {TICKS}."), within=40)
    tries = [call.at for call in api.calls if call.method == "editMessageText"]
    assert len(tries) >= 2
    assert tries[1] - tries[0] >= 4 - 0.05  # Telegram's retry_after, not the usual 3 s
    assert not now_of(api, card).buttons


@pytest.fixture
def no_cards(home: ChoirHome) -> ChoirHome:
    data = read_config(home)
    data["dms"]["phone"]["job_cards"] = False
    write_config(home, data)
    return home


@scripted(COUNTER)
async def test_a_dm_with_job_cards_off_gets_no_card(no_cards: ChoirHome, api: BotApiServer) -> None:
    async with running_daemon(no_cards), await ChoirClient.connect(no_cards) as client:
        started = await client.agent_start("agent-1", {"dm": "phone"})
        api.user_says(PHONE, "please start the counter")
        done = f"Core job report: core job counter completed: Counted to {TICKS}."
        await api.wait_for(lambda: done in api.texts(PHONE), within=40)
        assert (await stopped(client, str(started.session_id), "counter"))["outcome"] == (
            "completed"
        )
        await client.agent_stop("agent-1")
    assert not any(m.text.startswith("Core job counter") for m in api.sent(PHONE))
    assert not any(m.buttons for m in api.sent(PHONE))
    assert not [c for c in api.calls if c.method == "editMessageText"]


# -- the texts (pure) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (42, "42s"), (185, "3m 05s"), (3720, "1h 02m"), (-3, "0s")],
)
def test_elapsed_reads_as_a_person_says_it(seconds: int, shown: str) -> None:
    assert elapsed(timedelta(seconds=seconds)) == shown


def test_a_card_reads_as_it_runs_and_as_it_ended() -> None:
    chat = Chat(None, None, "phone", "regular", PHONE)  # type: ignore[arg-type]
    began = datetime(2026, 11, 27, 5, 0, tzinfo=UTC)
    card = JobCard("id", chat, "s-1", "build-docs", began, state="running a tool", step=3)
    card.progress = "choir.exec: build the docs"
    assert card_text(card, began + timedelta(seconds=75)) == (
        "Core job build-docs: running a tool\nstep 3 · 1m 15s elapsed\nchoir.exec: build the docs"
    )
    card.cancelling = True
    assert card_text(card, began).startswith("Core job build-docs: cancelling…\n")
    card.outcome, card.report = "terminated", "exec failed: exit 2"
    card.ended_at = began + timedelta(seconds=9)
    assert card_text(card, began + timedelta(hours=1)) == (
        "Core job build-docs: failed\nafter 9s, 3 steps\nexec failed: exit 2"
    )


def test_progress_lines() -> None:
    assert progress_line(CoreProgress(phase="step 2", focus="Count  in\nsteps")) == (
        "step 2: Count in steps"
    )
    assert progress_line(CoreProgress(phase="scan", percent=40)) == "scan (40%)"
    assert progress_line(CoreNeedInfo(question="Which colour?")) == "asks: Which colour?"
    assert progress_line(CoreFinalResult(summary="done")) is None
