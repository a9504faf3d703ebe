"""Approvals over Telegram (§19.6) end to end: a real choird, agent-1 (process runtime) whose
scripted model proposes a tool when asked, python-telegram-bot against the local Bot API
server, and presses of the approval message's buttons as Telegram delivers them."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.gateway.telegram.approvals import KEY_FILE
from choir.daemon.gateway.telegram.callback_data import sign
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ToolCallsStep
from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
from tests.harness.botapi import BotApiServer, Sent
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import read_config, write_config
from tests.harness.proposals import TOOL_PROPOSAL

from .conftest import BOSS, PHONE, STRANGER

pytestmark = pytest.mark.slow

SUMMARY_LINE = "weather.lookup: Fetch the forecast for `city` and return temperature and sky"
WRITING = "Committing its manifest and a stub for a human to write."
"""What an approved tool's chat is told first (§8.10: a human writes the tool)."""
RENAME = {
    "summary": "Sign my commits as choir agent one",
    "patch": {"git_identities": {"agent-1": {"name": "choir agent one"}}},
    "rationale": "asked",
}
"""A config change that takes effect only when agent-1 restarts."""


@pytest.fixture
def script() -> Script:
    return Script(
        steps=[
            ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
            ReplyStep(after="tool", match="proposal submitted", repeat=True, text="Proposed."),
            ToolCallsStep(
                match="propose a tool",
                repeat=True,
                calls=[ScriptedCall(name="choir.propose.tool", arguments=TOOL_PROPOSAL)],
            ),
            ToolCallsStep(
                match="rename your git identity",
                repeat=True,
                calls=[ScriptedCall(name="choir.propose.config_change", arguments=RENAME)],
            ),
            ReplyStep(match="slowly", repeat=True, delay_ms=6000, text="done, slowly"),
            ReplyStep(repeat=True, text="I only echo."),
        ]
    )


@pytest.fixture
async def agent(home: ChoirHome) -> AsyncIterator[tuple[ChoirClient, str]]:
    """choird, and agent-1 running bound to the DM `phone`: the client and the session."""
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        started = await client.agent_start("agent-1", {"dm": "phone"})
        yield client, str(started.session_id)
        await client.agent_stop("agent-1")


async def proposed(api: BotApiServer) -> Sent:
    """Have agent-1 propose a tool from the phone; the approval message it gets."""
    api.user_says(PHONE, "please propose a tool")
    await api.wait_for(lambda: any(m.buttons for m in api.sent(PHONE)), within=30)
    [card] = [m for m in api.sent(PHONE) if m.buttons]
    return card


def approval_id_of(card: Sent) -> str:
    return card.text.rsplit("/reject ", 1)[1].strip()


async def answered(api: BotApiServer, callback_id: str, within: float = 10) -> str:
    await api.wait_for(lambda: api.answer_to(callback_id) is not None, within=within)
    answer = api.answer_to(callback_id)
    assert answer is not None
    return answer.text


def edited(api: BotApiServer, card: Sent) -> Sent:
    [now] = [m for m in api.sent(card.chat_id) if m.message_id == card.message_id]
    return now


async def agent_told(client: ChoirClient, session_id: str, approval_id: str) -> str:
    """The status the agent committed for the approval (once it is durable in choird)."""
    found: list[str] = []

    async def committed() -> bool:
        events = (await client.session_events(session_id, limit=200)).events
        found[:] = [
            str(e.payload.get("status"))
            for e in events
            if e.event_type == "approval_resolved" and e.payload.get("approval_id") == approval_id
        ]
        return bool(found)

    await poll_until(committed, within=30)
    return found[0]


async def test_approve_by_button_tells_the_chat_edits_the_message_and_the_agent_proceeds(
    agent: tuple[ChoirClient, str], api: BotApiServer
) -> None:
    client, session_id = agent
    card = await proposed(api)
    approval_id = approval_id_of(card)
    assert card.text.startswith(f"agent-1 asks for approval (tool): {SUMMARY_LINE}.")
    assert [label for label, _ in card.buttons] == ["Approve", "Reject"]
    assert all(len(data.encode()) <= 64 for _, data in card.buttons)

    pressed = api.user_presses(PHONE, card, card.buttons[0][1])
    assert await answered(api, pressed) == "Approved"
    shown = await client.approval_show(approval_id)
    assert (shown.status, shown.resolved_by) == ("approved", "phone")
    await api.wait_for(lambda: f"Approved: {SUMMARY_LINE}. {WRITING}" in api.texts(PHONE))
    # each step of the apply is a line in the chat, after the decision, then how it ended
    step = f"Applying {approval_id}: commit: done (base_commit "

    def said() -> list[str]:
        return [t[:9] for t in api.texts(PHONE) if t.startswith((step, "Approved: "))]

    await api.wait_for(lambda: len(said()) == 3)
    assert said() == ["Approved:", "Applying ", "Approved:"]
    assert "awaiting implementation" in api.texts(PHONE)[-1]
    await api.wait_for(lambda: not edited(api, card).buttons)
    assert edited(api, card).text.startswith(card.text + "\n\nApproved by phone at 20")
    assert await agent_told(client, session_id, approval_id) == "approved"


async def test_reject_by_button_rejects_and_a_replayed_press_changes_nothing(
    agent: tuple[ChoirClient, str], api: BotApiServer
) -> None:
    client, session_id = agent
    card = await proposed(api)
    approval_id = approval_id_of(card)
    reject = card.buttons[1][1]
    assert await answered(api, api.user_presses(PHONE, card, reject)) == "Rejected"
    await api.wait_for(lambda: f"Rejected: {SUMMARY_LINE}." in api.texts(PHONE))
    assert await agent_told(client, session_id, approval_id) == "rejected"

    # the same press again (a replay), and the other button of the same message
    assert await answered(api, api.user_presses(PHONE, card, reject)) == "no longer valid"
    approve = card.buttons[0][1]
    assert await answered(api, api.user_presses(PHONE, card, approve)) == "no longer valid"
    shown = await client.approval_show(approval_id)
    assert (shown.status, shown.resolved_by) == ("rejected", "phone")
    await api.wait_for(lambda: not edited(api, card).buttons)
    assert "Rejected by phone at " in edited(api, card).text
    assert sum(t.startswith(("Approved:", "Rejected:")) for t in api.texts(PHONE)) == 1


async def test_a_press_is_answered_at_once_while_the_agent_is_busy_and_the_chat_is_stuck(
    agent: tuple[ChoirClient, str], api: BotApiServer
) -> None:
    client, _ = agent
    card = await proposed(api)
    approval_id = approval_id_of(card)
    api.hold("sendMessage")  # the chat's queued messages cannot leave
    api.user_says(PHONE, "please answer slowly")  # the agent is mid-turn for 6 s
    await api.wait_for(lambda: (PHONE, "typing") in api.actions)
    began = time.monotonic()
    pressed = api.user_presses(PHONE, card, card.buttons[0][1])
    assert await answered(api, pressed, within=5) == "Approved"
    answer = api.answer_to(pressed)
    assert answer is not None
    assert answer.at - began < 2.0  # not behind the turn (6 s) or the stuck chat
    assert (await client.approval_show(approval_id)).status == "approved"
    await api.wait_for(lambda: not edited(api, card).buttons, within=5)
    assert "done, slowly" not in api.texts(PHONE)  # the agent was still working
    api.release("sendMessage")
    await api.wait_for(lambda: "done, slowly" in api.texts(PHONE), within=30)
    assert f"Approved: {SUMMARY_LINE}. {WRITING}" in api.texts(PHONE)


async def test_forged_expired_and_foreign_presses_change_nothing_and_elsewhere_edits_it(
    agent: tuple[ChoirClient, str], api: BotApiServer, home: ChoirHome
) -> None:
    client, _ = agent
    card = await proposed(api)
    approval_id = approval_id_of(card)
    approve = card.buttons[0][1]
    tag = approve.rsplit(".", 1)[1]
    key = (home.root / KEY_FILE).read_bytes()
    assert (home.root / KEY_FILE).stat().st_mode & 0o777 == 0o600
    forged = [
        approve[: -len(tag)] + ("A" if tag[0] != "A" else "B") + tag[1:],  # the tag altered
        f"a{approval_id}.zzzzzz.{tag}",  # a later expiry under the old tag
        f"a{approval_id}",  # no signature at all
        sign(key, "approve", approval_id, PHONE, int(time.time()) - 5, bot="tg"),  # expired
    ]
    presses = [api.user_presses(PHONE, card, data) for data in forged]
    presses.append(api.user_presses(BOSS, card, approve))  # foreign: the phone's button
    for pressed in presses:
        assert await answered(api, pressed) == "no longer valid"
    stranger = api.user_presses(STRANGER, card, approve)  # outside the allowlist: dropped
    await api.wait_for(lambda: not api.pending_updates, within=10)
    assert api.answer_to(stranger) is None
    assert (await client.approval_show(approval_id)).status == "pending"
    assert edited(api, card).buttons  # the message still asks

    await client.approval_approve(approval_id)  # decided elsewhere: choirctl
    await api.wait_for(lambda: not edited(api, card).buttons)
    assert "Approved by choirctl at " in edited(api, card).text
    await api.wait_for(lambda: f"Approved: {SUMMARY_LINE}. {WRITING}" in api.texts(PHONE))
    late = api.user_presses(PHONE, card, approve)
    assert await answered(api, late) == "no longer valid"
    assert (await client.approval_show(approval_id)).resolved_by == "choirctl"


async def test_a_regular_dm_decides_only_its_bound_agents_approvals(
    agent: tuple[ChoirClient, str], api: BotApiServer, home: ChoirHome, root: Path
) -> None:
    client, _ = agent
    (root / "ws-other").mkdir()
    await client.agent_start("agent-2", {"dm": "boss"})
    api.user_says(BOSS, "please propose a tool")
    await api.wait_for(lambda: any(m.buttons for m in api.sent(BOSS)), within=30)
    [card] = [m for m in api.sent(BOSS) if m.buttons]
    approval_id = approval_id_of(card)
    assert card.text.startswith("agent-2 asks for approval (tool): ")
    # a button of agent-2's approval in the phone's chat (as if agent-2 had been bound there)
    key = (home.root / KEY_FILE).read_bytes()
    elsewhere = sign(key, "approve", approval_id, PHONE, int(time.time()) + 600, bot="tg")
    phone_card = Sent(PHONE, card.message_id, card.text, card.params)
    assert await answered(api, api.user_presses(PHONE, phone_card, elsewhere)) == (
        "no longer valid"
    )
    assert (await client.approval_show(approval_id)).status == "pending"
    assert await answered(api, api.user_presses(BOSS, card, card.buttons[0][1])) == "Approved"
    assert (await client.approval_show(approval_id)).resolved_by == "boss"
    await api.wait_for(lambda: any(t.startswith("Approved: ") for t in api.texts(BOSS)))
    await client.agent_stop("agent-2")
    assert api.texts(PHONE) == []  # the refused press did not make it the phone's message


async def test_approve_or_reject_sent_as_a_reply_answers_that_approval(
    agent: tuple[ChoirClient, str], api: BotApiServer
) -> None:
    client, _ = agent
    first = await proposed(api)
    api.user_says(PHONE, "please propose a tool")
    await api.wait_for(lambda: len([m for m in api.sent(PHONE) if m.buttons]) == 2, within=30)
    second = [m for m in api.sent(PHONE) if m.buttons][1]
    api.user_says(PHONE, "/reject", reply_to=second)  # two pending: the reply says which
    await api.wait_for(lambda: f"{approval_id_of(second)} rejected" in api.texts(PHONE))
    assert (await client.approval_show(approval_id_of(second))).status == "rejected"
    assert (await client.approval_show(approval_id_of(first))).status == "pending"
    await api.wait_for(lambda: not edited(api, second).buttons)
    assert "Rejected by phone at " in edited(api, second).text
    assert edited(api, first).buttons


@pytest.fixture
def impatient(home: ChoirHome) -> ChoirHome:
    """The home with approvals timing out after 2 s."""
    data = read_config(home)
    data["approval_timeout_ms"] = 2000
    write_config(home, data)
    return home


async def test_an_unanswered_approval_times_out_and_the_message_says_so(
    impatient: ChoirHome, api: BotApiServer
) -> None:
    async with running_daemon(impatient), await ChoirClient.connect(impatient) as client:
        started = await client.agent_start("agent-1", {"dm": "phone"})
        card = await proposed(api)
        approval_id = approval_id_of(card)
        timed_out = f"Approval timed out: {SUMMARY_LINE}. Rejected automatically."
        await api.wait_for(lambda: timed_out in api.texts(PHONE), within=20)
        await api.wait_for(lambda: not edited(api, card).buttons)
        assert "Timed out at " in edited(api, card).text
        shown = await client.approval_show(approval_id)
        assert (shown.status, shown.resolved_by) == ("rejected", "timeout")
        pressed = api.user_presses(PHONE, card, card.buttons[0][1])
        assert await answered(api, pressed) == "no longer valid"
        assert await agent_told(client, str(started.session_id), approval_id) == "rejected"
        await client.agent_stop("agent-1")


async def test_an_approval_of_an_agent_bound_elsewhere_is_not_sent_to_telegram(
    agent: tuple[ChoirClient, str], api: BotApiServer, home: ChoirHome
) -> None:
    """Sanity of the routing: the console DM's agent gets no Telegram message."""
    client, _ = agent
    await client.agent_stop("agent-1")
    await client.agent_start("agent-1", {"dm": "console"})
    await client.chat_send("agent-1", "please propose a tool")

    async def asked() -> bool:
        return bool((await client.approval_list()).approvals)

    await poll_until(asked, within=30)
    api.user_says(PHONE, "ping")  # the gateway is polling: a later update is seen
    await api.wait_for(lambda: bool(api.sent(PHONE)), within=30)
    assert not any(m.buttons for m in api.sent(PHONE))


async def test_a_restart_only_config_change_gets_an_approve_and_restart_button(
    agent: tuple[ChoirClient, str], api: BotApiServer
) -> None:
    client, session_id = agent
    pid = (await client.agent_status("agent-1")).pid
    api.user_says(PHONE, "please rename your git identity")
    await api.wait_for(lambda: any(m.buttons for m in api.sent(PHONE)), within=30)
    [card] = [m for m in api.sent(PHONE) if m.buttons]
    approval_id = approval_id_of(card)
    assert [label for label, _ in card.buttons] == ["Approve", "Approve + restart", "Reject"]
    assert f"/approve {approval_id} restart or /reject {approval_id}" in card.text
    assert all(len(data.encode()) <= 64 for _, data in card.buttons)

    # the plain button: refused, said in the chat with the way to choose; still pending
    plain = await answered(api, api.user_presses(PHONE, card, card.buttons[0][1]))
    assert plain.startswith(f"approval {approval_id} takes effect only with a restart of agent-1")
    await api.wait_for(lambda: any("the Approve + restart button" in t for t in api.texts(PHONE)))
    assert (await client.approval_show(approval_id)).status == "pending"
    assert card.buttons == edited(api, card).buttons

    # a git identity is config.json beyond agents.agent-1: a user's DM may not approve it
    pressed = api.user_presses(PHONE, card, card.buttons[1][1])
    assert (await answered(api, pressed)).startswith(
        f"approval {approval_id} changes config.json beyond agents.agent-1: only an admin DM"
    )
    assert (await client.approval_show(approval_id)).status == "pending"
    api.user_says(BOSS, f"/approve {approval_id} restart")  # the admin DM may

    async def applied() -> bool:
        return (await client.approval_show(approval_id)).status == "applied"

    await poll_until(applied, within=60)
    shown = await client.approval_show(approval_id)
    assert (shown.resolved_by, shown.resolved_via) == ("boss", "telegram")
    assert "agent-1 restarted" in (shown.outcome or "")
    status = await client.agent_status("agent-1")
    assert (status.session_id, status.pid != pid) == (session_id, True)
    await api.wait_for(lambda: not edited(api, card).buttons)
