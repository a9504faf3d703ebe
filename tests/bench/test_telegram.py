"""`bench.telegram`'s code path once, quickly: a real choird, agent-1 on the process runtime,
the local Bot API server; every figure measured and no rate limit broken."""

from __future__ import annotations

import pytest

from bench.telegram import run
from tests.harness.homes import short_root


@pytest.mark.slow
@pytest.mark.serial
async def test_a_quick_run_measures_every_figure_within_telegrams_limits() -> None:
    with short_root("tb-") as root:
        result = await run(root, quick=True)

    assert len(result.roundtrips_ms) == 3
    assert all(0 < ms < 10_000 for ms in result.roundtrips_ms)
    assert result.choird_cpu_ms > 0
    assert result.agent_cpu_ms > 0
    assert len(result.presses_ms) == 2
    assert all(0 < ms < 5_000 for ms in result.presses_ms)  # not behind the 1.5 s turn
    assert 0 < result.sends_per_s <= 30  # the bot's budget (25/s), never Telegram's 30
    assert result.updates_per_s > 0
    assert result.violations == 0
    assert 0 < result.other_chats_ms < 5_000  # answered within the held chat's backoff
