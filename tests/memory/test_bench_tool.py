"""`bench.memory`'s tool round trip, its code path once on a few items (a real choird process)."""

from __future__ import annotations

import pytest

from bench.memory import realistic_texts
from bench.memory_tool import query_figures

pytestmark = pytest.mark.slow


async def test_the_tool_round_trip_is_measured_through_a_real_choird() -> None:
    figures = await query_figures(realistic_texts(20, seed=7), queries=6)
    assert set(figures) == {"memory_query_tool_p50_ms", "memory_query_tool_p99_ms"}
    assert 0 < figures["memory_query_tool_p50_ms"] <= figures["memory_query_tool_p99_ms"]
