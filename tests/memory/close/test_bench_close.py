"""`bench.memory`'s session close figure, its code path once on a short session."""

from __future__ import annotations

import pytest

from bench.memory_close import close_figures, session_events
from choir.protocol.log.events import ToolResultCommitted, UserMsg


def test_the_bench_session_is_realistic() -> None:
    events = session_events(1_000)
    assert len(events) == 1_000
    assert {type(e) for e in events} >= {UserMsg, ToolResultCommitted}


@pytest.mark.timeout(180)
async def test_the_close_bench_closes_its_session_with_every_vector() -> None:
    figures = await close_figures(300)  # it refuses to report a close that left vectors out
    assert figures["session_close_10k_chunks"] > 10
    assert figures["session_close_10k_events_s"] > 0
    assert figures["session_close_10k_postgres_cpu_s"] > 0
