"""The embedding endpoint's circuit breaker, step by step on a fixed clock."""

from __future__ import annotations

from choir.daemon.memory.embedding.breaker import BreakerState, Change, CircuitBreaker


def test_opens_after_k_consecutive_failures_and_probes_after_the_cooldown():
    breaker = CircuitBreaker(threshold=3, cooldown_s=30.0)
    assert [breaker.failed(t) for t in (0.0, 1.0)] == [None, None]
    assert breaker.allow(1.5)
    assert breaker.failed(2.0) is Change.OPENED
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allow(31.9)  # still cooling down
    assert breaker.allow(32.0)  # the one probe
    assert breaker.state is BreakerState.HALF_OPEN
    assert not breaker.allow(32.1)  # others wait for the probe's outcome
    assert breaker.failed(33.0) is Change.REOPENED  # no second warning
    assert not breaker.allow(62.9)
    assert breaker.allow(63.0)
    assert breaker.succeeded() is Change.RECOVERED
    assert (breaker.state, breaker.failures) == (BreakerState.CLOSED, 0)


def test_a_success_resets_the_count():
    breaker = CircuitBreaker(threshold=2)
    assert breaker.failed(0.0) is None
    assert breaker.succeeded() is Change.RECOVERED  # a failed batch, then it worked
    assert breaker.failed(1.0) is None  # counting starts again
    assert breaker.state is BreakerState.CLOSED
    assert breaker.succeeded() is Change.RECOVERED
    assert breaker.succeeded() is None


def test_it_refuses_while_cooling_down_and_while_its_probe_is_out_not_after():
    breaker = CircuitBreaker(threshold=1, cooldown_s=30.0)
    assert not breaker.refusing(0.0)
    breaker.failed(1.0)
    assert breaker.refusing(30.9)
    assert not breaker.refusing(31.0)  # cooled down: the next caller is the probe
    assert breaker.state is BreakerState.OPEN  # asking changes nothing
    assert breaker.allow(31.0)
    assert breaker.refusing(31.5)  # the probe is out


def test_an_abandoned_probe_lets_the_next_call_probe_again():
    breaker = CircuitBreaker(threshold=1, cooldown_s=30.0)
    breaker.failed(0.0)
    assert breaker.allow(30.0)
    breaker.abandoned()  # its caller timed out: no outcome will ever come
    assert breaker.state is BreakerState.OPEN
    assert not breaker.refusing(30.1)
    assert breaker.allow(30.1)
    assert breaker.succeeded() is Change.RECOVERED


def test_abandoned_outside_a_probe_changes_nothing():
    breaker = CircuitBreaker(threshold=1, cooldown_s=30.0)
    breaker.abandoned()
    assert breaker.state is BreakerState.CLOSED
    breaker.failed(0.0)
    breaker.abandoned()
    assert (breaker.state, breaker.opened_at) == (BreakerState.OPEN, 0.0)
