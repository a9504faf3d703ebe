"""choird builds the models of an agent's first calls while the agent boots, not while the
agent waits for its INIT_HELLO answer (`runtimes/warmup`; bench.step_e2e `first_reply_s`)."""

from __future__ import annotations

from tests.harness.processes import run_probe

PROBE = """
import asyncio, importlib
import choir.daemon.app
from choir.daemon.app import AFTER_DATABASE
for module in AFTER_DATABASE:
    importlib.import_module(module)
from choir.daemon.runtimes import warmup
from choir.protocol.log.events import EVENT_ADAPTER
built_at_start = sorted(m.__name__ for m in warmup.WIRE_MODELS if m.__pydantic_complete__)
adapter_at_start = EVENT_ADAPTER.pydantic_complete

async def main():
    warmup.build_while_agents_boot()
    warmup.build_while_agents_boot()  # once per process
    assert len(warmup._building) == 1
    await asyncio.gather(*warmup._building)

asyncio.run(main())
left = sorted(m.__name__ for m in warmup.WIRE_MODELS if not m.__pydantic_complete__)
print(repr((built_at_start, adapter_at_start, left, EVENT_ADAPTER.pydantic_complete)))
"""


def test_a_started_choird_has_them_to_build_and_the_warmup_builds_them_all() -> None:
    built_at_start, adapter_at_start, left, adapter_left = run_probe(PROBE, timeout=60)
    assert "InitHelloResponse" not in built_at_start  # else there would be nothing to gain
    assert "HeartbeatRequest" not in built_at_start
    assert adapter_at_start is False
    assert left == []
    assert adapter_left is True  # the first heartbeat with events finds it built
