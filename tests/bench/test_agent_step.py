"""`bench.agent_step`'s code path once: the real lanes of choir-agent, a few edge steps."""

from __future__ import annotations

from bench.agent_step import REPLY, step_overheads
from choir.scripted import ScriptedModelServer


async def test_a_few_steps_measure_choirs_own_time() -> None:
    async with ScriptedModelServer(REPLY, zero_latency=True) as server:
        overheads = await step_overheads(server.url, 100, 3)

    assert len(overheads) == 3
    assert all(0 < ms < 10_000 for ms in overheads)
