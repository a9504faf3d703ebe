"""The per-session token bucket and the payload cap."""

from __future__ import annotations

import pytest

from choir.daemon.agents.ratelimit import RateLimiter, check_payload_size
from choir.daemon.agents.refusals import RpcFault
from choir.protocol import ErrorCode


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def allowed(limiter: RateLimiter, session: str, calls: int) -> int:
    """How many of `calls` back-to-back calls pass; the rest must be refused as rate limited."""
    codes: list[ErrorCode | None] = []
    for _ in range(calls):
        try:
            limiter.check(session)
        except RpcFault as fault:
            codes.append(fault.code)
        else:
            codes.append(None)
    assert set(codes) <= {None, ErrorCode.RATE_LIMITED}
    return codes.count(None)


def test_a_burst_of_one_second_then_the_rate():
    ticks = Ticks()
    limiter = RateLimiter(lambda: 10, clock=ticks)

    assert allowed(limiter, "s-1", 15) == 10
    ticks.now += 0.5
    assert allowed(limiter, "s-1", 15) == 5
    ticks.now += 100
    assert allowed(limiter, "s-1", 15) == 10


def test_sessions_have_their_own_buckets_and_forgetting_refills():
    ticks = Ticks()
    limiter = RateLimiter(lambda: 3, clock=ticks)

    assert allowed(limiter, "s-1", 5) == 3
    assert allowed(limiter, "s-2", 5) == 3
    limiter.forget("s-1")
    assert allowed(limiter, "s-1", 5) == 3


def test_a_lower_rate_applies_at_once():
    ticks = Ticks()
    rate = [100]
    limiter = RateLimiter(lambda: rate[0], clock=ticks)
    assert allowed(limiter, "s-1", 1) == 1

    rate[0] = 2

    assert allowed(limiter, "s-1", 5) == 2


def test_payload_cap():
    check_payload_size(1000, 1000)
    with pytest.raises(RpcFault) as caught:
        check_payload_size(1001, 1000)
    assert caught.value.code == ErrorCode.PAYLOAD_TOO_LARGE
    assert caught.value.message.startswith(
        "payload of 1001 bytes exceeds rpc.max_payload_bytes (1000)"
    )
