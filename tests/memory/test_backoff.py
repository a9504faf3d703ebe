"""§11.9's retry schedule: 1/2/4 s with jitter, three retries, Retry-After honoured up to a cap."""

from __future__ import annotations

import pytest

from choir.daemon.memory.embedding.backoff import Backoff


@pytest.mark.parametrize(
    ("retry", "draw", "asked", "wait"),
    [
        (1, 0.5, None, 1.0),  # the middle of the jitter band is the nominal wait
        (2, 0.5, None, 2.0),
        (3, 0.5, None, 4.0),
        (1, 0.0, None, 0.75),  # jitter: +-25 %
        (3, 0.999_999, None, 5.0),
        (4, 0.5, None, None),  # three retries, then give up
        (1, 0.5, 10.0, 10.0),  # a longer Retry-After wins
        (2, 0.5, 0.5, 2.0),  # a shorter one does not shorten the backoff
        (1, 0.5, 31.0, None),  # asked to wait longer than allowed: give up now
        (4, 0.5, 1.0, None),
    ],
)
def test_wait_before_each_retry(retry: int, draw: float, asked: float | None, wait: float | None):
    got = Backoff().wait_s(retry, draw, asked)
    assert got == (None if wait is None else pytest.approx(wait, abs=1e-5))


def test_base_scales_the_whole_schedule():
    fast = Backoff(base_s=0.01)
    assert [fast.wait_s(r, 0.5) for r in (1, 2, 3, 4)] == [0.01, 0.02, 0.04, None]
