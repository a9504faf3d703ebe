"""PushHub: per-session seq, replay after a seq, fan-out, and cutting off a stalled reader."""

from __future__ import annotations

import asyncio

import pytest

from choir.protocol.wire.envelope import ErrorCode
from choir.transport import PushHub, RpcError


async def next_seqs(subscription: object, count: int) -> list[int]:
    async with asyncio.timeout(2):
        return [(await anext(subscription))["seq"] for _ in range(count)]  # type: ignore[call-overload]


async def test_seq_counts_per_session_and_every_subscriber_gets_each_push() -> None:
    hub = PushHub()
    first, second = hub.subscribe("a"), hub.subscribe("a")
    other = hub.subscribe("b")
    assert [hub.push("a", {"kind": "compact"}) for _ in range(3)] == [1, 2, 3]
    assert hub.push("b", {"kind": "compact"}) == 1
    assert await next_seqs(first, 3) == [1, 2, 3]
    assert await next_seqs(second, 3) == [1, 2, 3]
    assert await next_seqs(other, 1) == [1]
    assert hub.subscriber_count("a") == 2


async def test_history_is_bounded_and_replayed_after_the_given_seq() -> None:
    hub = PushHub(history=3)
    for _ in range(5):
        hub.push("a", {"kind": "compact"})
    assert await next_seqs(hub.subscribe("a"), 3) == [3, 4, 5]
    assert await next_seqs(hub.subscribe("a", after_seq=4), 1) == [5]


async def test_a_client_of_a_previous_server_gets_every_kept_push_and_higher_seqs() -> None:
    # The agent saw seq 7 from the choird before a restart; this hub numbered only two pushes
    # (a chat sent before the agent resubscribed): both are delivered, and new ones follow 7.
    hub = PushHub()
    hub.push("a", {"kind": "compact"})
    hub.push("a", {"kind": "compact"})
    resumed = hub.subscribe("a", after_seq=7)
    assert await next_seqs(resumed, 2) == [1, 2]
    assert hub.push("a", {"kind": "compact"}) == 8
    assert await next_seqs(resumed, 1) == [8]


async def test_a_stalled_reader_is_cut_off_with_a_resume_hint() -> None:
    hub = PushHub(backlog=2)
    subscription = hub.subscribe("a")
    hub.push("a", {"kind": "compact"})
    assert await next_seqs(subscription, 1) == [1]
    for _ in range(3):
        hub.push("a", {"kind": "compact"})
    with pytest.raises(RpcError) as caught:
        await anext(subscription)
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert "after_seq=1" in caught.value.message
    assert hub.subscriber_count("a") == 0


async def test_close_session_ends_iteration_and_forgets_history() -> None:
    hub = PushHub()
    subscription = hub.subscribe("a")
    hub.push("a", {"kind": "compact"})
    hub.close_session("a")
    assert [e["seq"] async for e in subscription] == [1]
    assert list(hub.sessions()) == []
    assert hub.push("a", {"kind": "compact"}) == 1


async def test_a_closed_subscription_receives_nothing_more() -> None:
    hub = PushHub()
    subscription = hub.subscribe("a")
    await subscription.aclose()
    hub.push("a", {"kind": "compact"})
    assert [e async for e in subscription] == []
    assert hub.subscriber_count("a") == 0


async def test_a_restarted_hub_numbers_above_its_predecessor_so_no_push_is_skipped() -> None:
    """An adopted agent saw seq 2 of the choird that died; the new one pushed three times (a
    redelivered message among them) before the agent resubscribed. Numbered from 1 again, the
    new pushes 1 and 2 were skipped as already seen; from choird's start time, none is."""
    old = PushHub(base=1_000)
    assert [old.push("a", {"kind": "compact"}) for _ in range(2)] == [1_001, 1_002]
    new = PushHub(base=5_000)
    for _ in range(3):
        new.push("a", {"kind": "compact"})
    resumed = new.subscribe("a", after_seq=1_002)
    assert await next_seqs(resumed, 3) == [5_001, 5_002, 5_003]

    same_numbers = PushHub()  # what choird did before: two of three pushes lost
    for _ in range(3):
        same_numbers.push("a", {"kind": "compact"})
    assert await next_seqs(same_numbers.subscribe("a", after_seq=2), 1) == [3]
