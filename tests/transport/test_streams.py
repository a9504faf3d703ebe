"""Streams and pushes behave the same on every transport, and stop when their reader goes."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from choir.protocol.wire.envelope import ErrorCode
from choir.protocol.wire.pushes import PushEnvelope
from choir.transport import Client, RpcError
from tests.harness.waits import poll_until
from tests.transport.conftest import Served

CONFIG_CHANGED = {"kind": "config_changed", "config_version": 7}


async def test_a_stream_yields_every_item_then_ends(served: Served) -> None:
    async with await served.client() as client:
        items = [item async for item in client.stream("count", {"n": 50})]
        assert await client.call("empty") == {}
    assert items == [{"i": i} for i in range(50)]
    await served.handler.wait_closed("count")


async def test_a_plain_answer_read_as_a_stream_is_one_item(served: Served) -> None:
    async with await served.client() as client:
        items = [item async for item in client.stream("echo", {"a": 1})]
    assert len(items) == 1
    assert items[0]["payload"] == {"a": 1}


async def test_an_error_before_the_stream_starts_raises(served: Served) -> None:
    async with await served.client() as client:
        with pytest.raises(RpcError) as caught:
            _ = [item async for item in client.stream("nope")]
    assert caught.value.code is ErrorCode.NOT_FOUND


async def test_an_error_mid_stream_arrives_after_the_items_before_it(served: Served) -> None:
    received: list[int] = []

    async def read(client: Client) -> None:
        async for item in client.stream("count", {"n": 10, "fail_at": 3}):
            received.append(item["i"])

    async with await served.client() as client:
        with pytest.raises(RpcError) as caught:
            await read(client)
    assert received == [0, 1, 2]
    assert (caught.value.code, caught.value.message) == (
        ErrorCode.UNAVAILABLE,
        "source failed at 3",
    )


async def test_closing_a_stream_early_closes_the_server_iterator(served: Served) -> None:
    async with await served.client() as client:
        async with contextlib.aclosing(client.stream("forever")) as items:
            assert await anext(items) == {"i": 0}
        await served.handler.wait_closed("forever")
        assert await client.call("empty") == {}


async def test_cancelling_the_reading_task_closes_the_server_iterator(served: Served) -> None:
    async with await served.client() as client:
        first = asyncio.Event()

        async def read() -> None:
            async for _ in client.stream("forever"):
                first.set()

        reader = asyncio.create_task(read())
        async with asyncio.timeout(5):
            await first.wait()
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        await served.handler.wait_closed("forever")


async def test_pushes_reach_the_subscribed_session_in_order(served: Served) -> None:
    async with await served.client(session_id="s-1", lease_token="lease-s-1") as client:
        received: list[PushEnvelope] = []
        async with contextlib.aclosing(client.pushes()) as pushes:
            served.hub.push("s-2", {"kind": "compact"})
            for version in range(3):
                served.hub.push("s-1", {**CONFIG_CHANGED, "config_version": version})
            async for envelope in pushes:
                received.append(PushEnvelope.model_validate(envelope))
                if len(received) == 3:
                    break
    assert [e.seq for e in received] == [1, 2, 3]
    assert [e.push.config_version for e in received] == [0, 1, 2]  # type: ignore[union-attr]
    assert {e.session_id for e in received} == {"s-1"}


async def test_pushes_made_before_subscribing_are_replayed_after_after_seq(served: Served) -> None:
    for version in range(5):
        served.hub.push("s-1", {**CONFIG_CHANGED, "config_version": version})
    async with (
        await served.client(session_id="s-1", lease_token="lease-s-1") as client,
        contextlib.aclosing(client.pushes(after_seq=3)) as pushes,
    ):
        seqs = [(await anext(pushes))["seq"] for _ in range(2)]
        served.hub.push("s-1", CONFIG_CHANGED)
        seqs.append((await anext(pushes))["seq"])
    assert seqs == [4, 5, 6]


async def test_closing_the_session_ends_the_push_stream_normally(served: Served) -> None:
    async with await served.client(session_id="s-1", lease_token="lease-s-1") as client:
        served.hub.push("s-1", CONFIG_CHANGED)

        async def drain() -> list[int]:
            return [envelope["seq"] async for envelope in client.pushes()]

        reader = asyncio.create_task(drain())
        await poll_until(lambda: served.hub.subscriber_count("s-1") == 1)
        served.hub.close_session("s-1")
        async with asyncio.timeout(5):
            assert await reader == [1]


async def test_a_wrong_lease_may_not_listen(served: Served) -> None:
    async with await served.client(session_id="s-1", lease_token="lease-s-2") as client:
        with pytest.raises(RpcError) as caught:
            await anext(client.pushes())
        assert await client.call("empty") == {}
    assert caught.value.code is ErrorCode.UNAUTHORIZED
    assert served.hub.subscriber_count("s-1") == 0


async def test_a_reader_going_away_unsubscribes(served: Served) -> None:
    async with await served.client(session_id="s-1", lease_token="lease-s-1") as client:
        served.hub.push("s-1", CONFIG_CHANGED)
        async with contextlib.aclosing(client.pushes()) as pushes:
            await anext(pushes)
            assert served.hub.subscriber_count("s-1") == 1
    await poll_until(lambda: served.hub.subscriber_count("s-1") == 0)
