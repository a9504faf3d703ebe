"""Telegram's rate limits (§19.7) end to end against the local Bot API server: a bot's outbox
(python-telegram-bot over real HTTP) paces each chat and the bot, a 429 holds back its chat
alone, order holds, and a send Telegram refuses for good is counted and logged without its
text; an agent's long reply through a real choird leaves paced, in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from itertools import pairwise

import pytest

from choir.client import ChoirClient
from choir.daemon.gateway.telegram.client import BotClient
from choir.daemon.gateway.telegram.outbox import Outbox
from choir.daemon.gateway.telegram.pacing import CHAT_BURST
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script
from choir.scripted.demo import SUMMARY, SUMMARY_REQUEST
from tests.harness.botapi import MAX_TEXT, BotApiServer
from tests.harness.daemons import poll_until, running_daemon

from .conftest import BOSS, PHONE, TOKEN

SLACK_S = 0.15
"""How much earlier than its budget a paced message may reach the server (HTTP jitter)."""
HUGE = "\n".join(f"part {n} " + "x" * (MAX_TEXT - 20) for n in range(6))
"""A reply Telegram takes as six messages, one per line."""


@pytest.fixture
async def outbox(api: BotApiServer) -> AsyncIterator[Outbox]:
    client = BotClient("tg", TOKEN, api.url, secret="tg-token")
    await client.connect()
    box = Outbox(client)
    try:
        yield box
    finally:
        await box.close()
        await client.close()


def arrivals(api: BotApiServer, chat_id: int) -> list[float]:
    return [call.at for call in api.sends(chat_id)]


def assert_paced(times: list[float]) -> None:
    """A burst, then about a second apart at least."""
    gaps = [b - a for a, b in pairwise(times[CHAT_BURST - 1 :])]
    assert gaps, times
    assert min(gaps) >= 1.0 - SLACK_S, gaps


async def test_a_flood_of_one_chat_leaves_paced_and_in_order(
    outbox: Outbox, api: BotApiServer
) -> None:
    texts = [f"message {n}" for n in range(7)]
    for text in texts:
        outbox.send(PHONE, text)
    assert outbox.stats().queued == 7
    await api.wait_sent(PHONE, 7, within=20)
    assert api.texts(PHONE) == texts
    times = arrivals(api, PHONE)
    assert times[CHAT_BURST - 1] - times[0] < 0.5  # the burst leaves at once
    assert_paced(times)
    assert api.violations == []
    await outbox.drain(1)
    assert outbox.stats().queued == 0


async def test_a_429_on_one_chat_holds_back_that_chat_only(
    outbox: Outbox, api: BotApiServer
) -> None:
    api.fail("sendMessage", 429, retry_after=3, chat_id=PHONE)
    outbox.send(PHONE, "first to the phone")
    outbox.send(PHONE, "second to the phone")
    await poll_until(lambda: PHONE in outbox.stats().backoff_s)  # answered 429
    refused_at = api.sends(PHONE)[0].at
    stats = outbox.stats()
    assert 2 < stats.backoff_s[PHONE] <= 3
    assert stats.queued == 2

    began = time.monotonic()
    for n in range(3):
        outbox.send(BOSS, f"boss {n}")
    await api.wait_sent(BOSS, 3, within=5)
    assert time.monotonic() - began < 2.0  # not behind the phone's 3 s backoff
    assert api.texts(PHONE) == []

    sent = await api.wait_sent(PHONE, 2, within=10)
    assert [s.text for s in sent] == ["first to the phone", "second to the phone"]
    assert api.sends(PHONE)[1].at - refused_at >= 3 - SLACK_S
    assert outbox.stats().backoff_s == {}
    assert outbox.stats().failed == 0


async def test_a_refused_send_is_counted_and_logged_without_its_text(
    outbox: Outbox, api: BotApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api.fail("sendMessage", 403, "Forbidden: bot was blocked by the user", chat_id=PHONE)
    outbox.send(PHONE, "the secret plan")
    outbox.send(PHONE, "after it")
    [after] = await api.wait_sent(PHONE, 1)
    assert after.text == "after it"  # dropped at once, never retried: the next one goes on
    assert len(api.sends(PHONE)) == 2

    stats = outbox.stats()
    assert stats.failed == 1
    assert stats.last_error is not None
    assert stats.last_error_at is not None
    assert f"chat {PHONE}" in stats.last_error
    assert "bot was blocked by the user" in stats.last_error
    assert "secret" not in stats.last_error
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "not delivered" in warning.getMessage()
    assert str(PHONE) in warning.getMessage()
    assert all("secret plan" not in r.getMessage() for r in caplog.records)
    assert all("secret plan" not in str(r.__dict__) for r in caplog.records)


async def test_typing_never_goes_to_a_chat_held_back(outbox: Outbox, api: BotApiServer) -> None:
    api.fail("sendMessage", 429, retry_after=2, chat_id=PHONE)
    outbox.send(PHONE, "held")
    await poll_until(lambda: PHONE in outbox.stats().backoff_s)
    assert not outbox.may_hint(PHONE)
    assert outbox.may_hint(BOSS)
    await api.wait_sent(PHONE, 1, within=5)
    assert outbox.may_hint(PHONE)


@pytest.fixture
def script() -> Script:
    return Script(
        steps=[
            ReplyStep(match=SUMMARY_REQUEST, repeat=True, text=SUMMARY),
            ReplyStep(match="flood", repeat=True, text=HUGE),
            ReplyStep(repeat=True, text="I only flood."),
        ]
    )


@pytest.mark.slow
async def test_an_agents_long_reply_leaves_paced_and_in_order(
    home: ChoirHome, api: BotApiServer
) -> None:
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "phone"})
        try:
            api.user_says(PHONE, "flood me")
            parts = await api.wait_sent(PHONE, 6, within=40)
            await asyncio.sleep(0.2)
        finally:
            await client.agent_stop("agent-1")
    assert "\n".join(p.text for p in parts) == HUGE
    assert len(api.texts(PHONE)) == 6
    assert_paced(arrivals(api, PHONE))
    assert api.violations == []
