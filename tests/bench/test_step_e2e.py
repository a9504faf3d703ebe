"""`bench.step_e2e`'s code path once: a real choird, agent-1 on the process runtime, one round."""

from __future__ import annotations

import pytest

from bench.step_e2e import TOOL_CALLS, run
from tests.harness.homes import short_root


@pytest.mark.slow
async def test_one_round_measures_every_figure() -> None:
    with short_root("sb-") as root:
        result = await run(root, rounds=1)

    assert result.model_calls == TOOL_CALLS + 1  # each tool call, then the reply
    assert len(result.overheads_ms) == 1
    assert 0 < result.overheads_ms[0] < 10_000
    assert 0 < result.first_reply_s < 60
    assert result.agent_cpu_ms > 0
    assert min(result.choird_mb, result.agent_mb, result.postgres_mb) > 10
    assert result.postgres_backends >= 1  # choird's pool keeps one open
    assert 10 < result.stack_pss_mb < result.choird_mb + result.agent_mb + result.postgres_mb
