"""The accept loop: bursts logged once, admission caps per listener and peer, fair turns."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import warnings
from pathlib import Path

import pytest

from choir.transport.acceptor import Admission, Burst, accept_forever


def test_a_burst_is_reported_at_its_start_with_the_size_of_the_one_before() -> None:
    burst = Burst(quiet_s=1.0)
    starts = [burst.note(t) for t in (0.0, 0.1, 0.5, 1.2, 5.0, 5.5)]
    # 0.0 starts a burst (nothing before); 0.1 and 0.5 join it; 1.2 is 0.7 after 0.5, so it
    # joins too; 5.0 starts the next, reporting the 4 of the first; 5.5 joins it
    assert starts == [0, None, None, None, 4, None]


def test_admission_caps_the_listener_and_each_peer() -> None:
    admission = Admission(max_total=3, max_per_peer=2)
    for peer in (1, 1, 2):
        assert admission.refusal(peer) is None
        admission.opened(peer)
    assert admission.refusal(3) is not None  # the listener is full
    admission.closed(2)
    assert admission.refusal(1) is not None  # peer 1 holds its two
    assert admission.refusal(3) is None
    admission.closed(1)
    assert admission.refusal(1) is None
    assert admission.total == 1


def test_without_a_per_peer_cap_only_the_total_counts() -> None:
    admission = Admission(max_total=2, max_per_peer=None)
    admission.opened(None)
    assert admission.refusal(None) is None
    admission.opened(None)
    assert admission.refusal(None) is not None


@pytest.mark.parametrize("refused", [True, False], ids=["refused", "served"])
async def test_connections_waiting_are_accepted_one_loop_turn_apart(refused: bool) -> None:
    """`sock_accept` returns without suspending while a connection waits, so a peer that
    reconnects as fast as it is refused (or served without a wait, as the HTTP listener's
    hand-off is) held choird's event loop for as long as it kept the backlog full: 0.8 s at a
    stretch from one process. Fifty connections already waiting must be taken with the loop
    run in between each two."""
    turns = 0
    taken: list[int] = []
    all_taken = asyncio.Event()

    def refuse(connection: socket.socket) -> str | None:
        taken.append(turns)
        if len(taken) == len(waiting):
            all_taken.set()
        return "full" if refused else None

    async def serve(connection: socket.socket) -> None:
        connection.close()

    async def count_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    with socket.create_server(("127.0.0.1", 0), backlog=128) as listener:
        listener.setblocking(False)
        waiting = [socket.create_connection(listener.getsockname()) for _ in range(50)]
        counting = asyncio.create_task(count_turns())
        accepting = asyncio.create_task(accept_forever(listener, "test", refuse, serve))
        try:
            await asyncio.wait_for(all_taken.wait(), 10)
        finally:
            for task in (counting, accepting):
                task.cancel()
            await asyncio.gather(counting, accepting, return_exceptions=True)
            for connection in waiting:
                connection.close()
    assert len(set(taken)) == len(taken), taken  # other tasks ran between any two accepts


@pytest.mark.parametrize("turns", [1, 2, 3])
async def test_a_connection_arriving_as_the_listener_closes_is_never_left_unclosed(
    scratch_dir: Path, turns: int
) -> None:
    """Closing a listener cancels its accept loop. With `loop.sock_accept`, a connection that
    arrived in the same loop turn was accepted into a future nobody read any more, and its
    socket lingered unclosed until the collector found it (a ResourceWarning that failed
    whichever test ran then). The loop is cancelled 1, 2 and 3 turns after a peer connects:
    every connection accepted is handed over, none is dropped."""
    path = scratch_dir / "listener.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    listener.setblocking(False)
    served: list[socket.socket] = []

    async def serve(connection: socket.socket) -> None:
        served.append(connection)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop_task = asyncio.create_task(accept_forever(listener, "test", lambda _: None, serve))
        await asyncio.sleep(0)  # the loop waits for a connection
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.setblocking(False)
        client.connect(str(path))
        for _ in range(turns):
            await asyncio.sleep(0)
        loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task
        for connection in served:
            connection.close()
        client.close()
        listener.close()
        gc.collect()

    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
