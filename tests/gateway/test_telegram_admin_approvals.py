"""Every agent's approvals in an admin DM that asks for them (`approvals: "all"`, §19.6) end to
end: a real choird, agent-1 (process runtime) proposing a tool when asked, python-telegram-bot
against the local Bot API server. `boss` is the admin DM, `phone` agent-1's regular one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from tests.harness.botapi import BotApiServer, Sent
from tests.harness.daemons import running_daemon
from tests.harness.homes import read_config, write_config
from tests.harness.processes import run_choirctl

from .conftest import BOSS, PHONE
from .test_telegram_approvals import (
    SUMMARY_LINE,
    WRITING,
    agent_told,
    answered,
    approval_id_of,
    edited,
    proposed,
    script,
)

pytestmark = pytest.mark.slow

__all__ = ["script"]  # the proposing model of the approvals tests


def approvals_all(home: ChoirHome, dm: str) -> ChoirHome:
    data = read_config(home)
    data["dms"][dm]["approvals"] = "all"
    write_config(home, data)
    return home


@pytest.fixture
async def agent(home: ChoirHome) -> AsyncIterator[tuple[ChoirClient, str]]:
    """choird with `boss` taking every approval, agent-1 bound to `phone`."""
    approvals_all(home, "boss")
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        started = await client.agent_start("agent-1", {"dm": "phone"})
        yield client, str(started.session_id)
        await client.agent_stop("agent-1")


async def boss_copy(api: BotApiServer) -> Sent:
    await api.wait_for(lambda: any(m.buttons for m in api.sent(BOSS)), within=30)
    [card] = [m for m in api.sent(BOSS) if m.buttons]
    return card


async def test_an_admin_dm_taking_all_approvals_decides_another_dms_and_both_copies_end(
    agent: tuple[ChoirClient, str], api: BotApiServer
) -> None:
    client, session_id = agent
    phone = await proposed(api)
    boss = await boss_copy(api)
    approval_id = approval_id_of(phone)
    assert boss.text == phone.text  # the same request, its own buttons signed for its chat
    assert [label for label, _ in boss.buttons] == ["Approve", "Reject"]
    assert {data for _, data in boss.buttons}.isdisjoint(data for _, data in phone.buttons)
    # a copy's button works only in its own chat
    foreign = api.user_presses(BOSS, boss, phone.buttons[0][1])
    assert await answered(api, foreign) == "no longer valid"
    assert (await client.approval_show(approval_id)).status == "pending"

    assert await answered(api, api.user_presses(BOSS, boss, boss.buttons[0][1])) == "Approved"
    shown = await client.approval_show(approval_id)
    assert (shown.status, shown.resolved_by) == ("approved", "boss")
    outcome = f"Approved: {SUMMARY_LINE}. {WRITING}"
    # each chat with a copy hears the outcome, and every copy says who decided, buttons gone
    await api.wait_for(lambda: outcome in api.texts(PHONE) and outcome in api.texts(BOSS))
    await api.wait_for(lambda: not edited(api, phone).buttons and not edited(api, boss).buttons)
    for card in (phone, boss):
        assert edited(api, card).text.startswith(card.text + "\n\nApproved by boss at 20")
    assert await agent_told(client, session_id, approval_id) == "approved"

    # the other copy, and the same one again, are no longer valid anywhere
    late = [
        api.user_presses(PHONE, phone, phone.buttons[1][1]),
        api.user_presses(BOSS, boss, boss.buttons[0][1]),
    ]
    for pressed in late:
        assert await answered(api, pressed) == "no longer valid"
    assert (await client.approval_show(approval_id)).resolved_by == "boss"
    awaiting = f"Approved: {SUMMARY_LINE}. awaiting implementation: "  # phase 1 ended (§8.10)
    for chat in (PHONE, BOSS):
        await api.wait_for(lambda c=chat: any(t.startswith(awaiting) for t in api.texts(c)))
        said = [t for t in api.texts(chat) if t.startswith(("Approved:", "Rejected:"))]
        assert said[0] == outcome
        assert len(said) == 2
        assert said[1].startswith(awaiting)


async def test_an_approval_decided_elsewhere_edits_the_admin_copy_of_a_console_agent(
    home: ChoirHome, api: BotApiServer
) -> None:
    """`all` is every agent's, a Telegram DM bound or not: here the console DM's agent-1,
    rejected by choirctl."""
    approvals_all(home, "boss")
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        started = await client.agent_start("agent-1", {"dm": "console"})
        await client.chat_send("agent-1", "please propose a tool")
        boss = await boss_copy(api)
        approval_id = approval_id_of(boss)
        assert boss.text.startswith(f"agent-1 asks for approval (tool): {SUMMARY_LINE}.")
        await client.approval_reject(approval_id)
        await api.wait_for(lambda: f"Rejected: {SUMMARY_LINE}." in api.texts(BOSS))
        await api.wait_for(lambda: not edited(api, boss).buttons)
        assert "\n\nRejected by choirctl at 20" in edited(api, boss).text
        assert await agent_told(client, str(started.session_id), approval_id) == "rejected"
        pressed = api.user_presses(BOSS, boss, boss.buttons[0][1])
        assert await answered(api, pressed) == "no longer valid"
        assert api.sent(PHONE) == []  # a regular DM gets only its own agent's
        await client.agent_stop("agent-1")


async def test_by_default_an_admin_dm_gets_no_other_dms_approvals(
    home: ChoirHome, api: BotApiServer
) -> None:
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "phone"})
        card = await proposed(api)
        await client.approval_approve(approval_id_of(card))
        await api.wait_for(lambda: not edited(api, card).buttons)
        # the copies are sent before any outcome is handled: none was on its way to the boss
        assert api.sent(BOSS) == []
        await client.agent_stop("agent-1")


def test_config_check_refuses_all_approvals_on_a_regular_dm(home: ChoirHome) -> None:
    approvals_all(home, "phone")
    before = (home.root / "config.json").read_text()
    run = run_choirctl(home, "config", "check")
    assert run.returncode == 3
    assert run.stderr.splitlines() == [
        "error: config.json has 1 problem(s):",
        '  dms.phone.approvals: "all" is for admin DMs only; set "admin": true on dms.phone '
        'or use "approvals": "bound"',
    ]
    assert "Traceback" not in run.stderr
    assert (home.root / "config.json").read_text() == before
    # the admin DM may, and a word other than the two is refused as a shape error
    data = read_config(home)
    data["dms"]["phone"]["approvals"] = "bound"
    data["dms"]["boss"]["approvals"] = "all"
    write_config(home, data)
    assert run_choirctl(home, "config", "check").returncode == 0
    data["dms"]["boss"]["approvals"] = "every"
    write_config(home, data)
    refused = run_choirctl(home, "config", "check")
    assert refused.returncode == 3
    assert "dms.boss.approvals: Input should be 'bound' or 'all'" in refused.stderr
