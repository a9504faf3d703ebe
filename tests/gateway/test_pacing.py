"""The Telegram pacer's arithmetic (`pacing`), time stepped by hand."""

from __future__ import annotations

from itertools import pairwise

import pytest

from choir.daemon.gateway.telegram.pacing import (
    CHAT_BURST,
    CHAT_RATE_PER_S,
    GLOBAL_BURST,
    GLOBAL_RATE_PER_S,
    Pacer,
    TokenBucket,
)


def send_times(pacer: Pacer, chat_id: int, count: int, start: float) -> list[float]:
    """When one chat's sender (waiting as the outbox does) sends `count` messages queued at
    `start`, with the bot otherwise idle."""
    now, times = start, []
    for _ in range(count):
        now += pacer.chat_wait_s(chat_id, now)
        now += pacer.bot_wait_s(now)
        pacer.sent(chat_id, now)
        times.append(now)
    return times


def test_a_quiet_chat_gets_a_burst_then_one_message_a_second() -> None:
    times = send_times(Pacer(0.0), 1, 7, 0.0)
    assert times[:CHAT_BURST] == [0.0] * CHAT_BURST
    paced = times[CHAT_BURST - 1 :]
    gaps = [round(b - a, 6) for a, b in pairwise(paced)]
    assert gaps == [1.0] * (7 - CHAT_BURST)


def test_a_chat_that_rested_has_its_burst_back_but_no_more() -> None:
    pacer = Pacer(0.0)
    send_times(pacer, 1, 5, 0.0)  # 3 at once, then 1 s apart: the last at 2.0
    later = send_times(pacer, 1, CHAT_BURST + 1, 100.0)
    assert later[:CHAT_BURST] == [100.0] * CHAT_BURST
    assert later[CHAT_BURST] == pytest.approx(101.0)


def flood(pacer: Pacer, chats: int, rounds: int) -> list[tuple[float, int]]:
    """Every chat's sender with `rounds` messages queued at 0, taking turns at the bot's
    budget as the outbox's fair lock makes them: (send time, chat) in send order."""
    ready = dict.fromkeys(range(chats), 0.0)
    left = dict.fromkeys(range(chats), rounds)
    sent: list[tuple[float, int]] = []
    now = 0.0
    while any(left.values()):
        chat = min((c for c in left if left[c]), key=lambda c: (ready[c], c))
        now = max(now, ready[chat])
        now += pacer.chat_wait_s(chat, now)
        now += pacer.bot_wait_s(now)
        pacer.sent(chat, now)
        sent.append((now, chat))
        left[chat] -= 1
        ready[chat] = now
    return sent


@pytest.mark.parametrize("chats", [1, 30, 50])
def test_a_flood_keeps_under_both_limits(chats: int) -> None:
    sent = flood(Pacer(0.0), chats, 12)
    times = [at for at, _ in sent]
    for index, at in enumerate(times):  # the bot: never more than 29 in any second
        assert sum(1 for t in times[index:] if t <= at + 1.0) <= GLOBAL_RATE_PER_S + GLOBAL_BURST
    for chat in range(chats):  # a chat: its burst, then a second apart at least
        mine = [at for at, c in sent if c == chat]
        gaps = [b - a for a, b in pairwise(mine[CHAT_BURST - 1 :])]
        assert min(gaps) >= 1.0 - 1e-9
    sustained = times[len(times) // 2 :]  # past the bursts
    rate = (len(sustained) - 1) / (sustained[-1] - sustained[0])
    expected = min(GLOBAL_RATE_PER_S, chats * CHAT_RATE_PER_S)
    assert rate == pytest.approx(expected, rel=0.05)


def test_a_429_holds_back_its_chat_only() -> None:
    pacer = Pacer(0.0)
    pacer.retry_after(1, 10.0, 5.0)
    assert pacer.chat_wait_s(1, 10.0) == pytest.approx(5.0)
    assert pacer.chat_wait_s(2, 10.0) == 0.0
    assert pacer.bot_wait_s(10.0) == 0.0  # the bot's budget is untouched
    assert pacer.backoff(12.0) == {1: 3.0}
    assert pacer.chat_wait_s(1, 15.0) == 0.0
    assert pacer.backoff(15.0) == {}


def test_a_shorter_retry_after_never_shortens_a_longer_one() -> None:
    pacer = Pacer(0.0)
    pacer.retry_after(1, 0.0, 5.0)
    pacer.retry_after(1, 1.0, 1.0)
    assert pacer.chat_wait_s(1, 1.0) == pytest.approx(4.0)


def test_hints_take_only_a_free_slot_and_never_queue() -> None:
    pacer = Pacer(0.0)
    assert all(pacer.spare(0.0) for _ in range(GLOBAL_BURST))
    assert not pacer.spare(0.0)  # spent: the hint is skipped, nothing is owed
    assert pacer.bot_wait_s(0.0) == pytest.approx(1 / GLOBAL_RATE_PER_S)
    assert pacer.spare(1.0)


def test_a_bucket_never_saves_more_than_its_burst() -> None:
    bucket = TokenBucket.full(2.0, 4, 0.0)
    for _ in range(4):
        bucket.take(0.0)
    assert bucket.wait_s(0.0) == pytest.approx(0.5)
    assert bucket.wait_s(1000.0) == 0.0
    assert bucket.tokens == 4
