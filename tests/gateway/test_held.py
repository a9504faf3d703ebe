"""`Held`: news heard before a gateway subscribes reaches it first, in order, until sealed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from choir.daemon.gateway.held import Held


class Source:
    """A service's listeners, as `EventIngest` and `SessionService` keep them."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[int], None]] = []

    def subscribe(self, listener: Callable[[int], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def tell(self, n: int) -> None:
        for listener in list(self.listeners):
            listener(n)


def test_a_late_subscriber_hears_what_was_kept_first_then_the_news() -> None:
    source = Source()
    held: Held[[int]] = Held(source.subscribe)
    source.tell(1)
    source.tell(2)
    heard: list[int] = []
    held.subscribe(heard.append)
    source.tell(3)
    assert heard == [1, 2, 3]
    again: list[int] = []
    held.subscribe(again.append)  # before the seal: each subscriber hears all that was kept
    assert again == [1, 2, 3]


def test_sealed_it_keeps_nothing_more_and_passes_news_on() -> None:
    source = Source()
    held: Held[[int]] = Held(source.subscribe)
    source.tell(1)
    early: list[int] = []
    held.subscribe(early.append)
    held.seal()
    source.tell(2)
    late: list[int] = []
    held.subscribe(late.append)
    source.tell(3)
    assert (early, late) == ([1, 2, 3], [3])


def test_unsubscribed_and_closed_it_hears_nothing() -> None:
    source = Source()
    held: Held[[int]] = Held(source.subscribe)
    heard: list[int] = []
    unsubscribe = held.subscribe(heard.append)
    source.tell(1)
    unsubscribe()
    source.tell(2)
    held.close()
    assert (heard, source.listeners) == ([1], [])


def test_a_failing_listener_is_logged_and_the_others_still_hear(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = Source()
    held: Held[[int]] = Held(source.subscribe)
    source.tell(1)

    def broken(n: int) -> None:
        raise RuntimeError(f"broken at {n}")

    held.subscribe(broken)
    heard: list[int] = []
    held.subscribe(heard.append)
    source.tell(2)
    assert heard == [1, 2]
    assert "gateway listener failed" in caplog.text
