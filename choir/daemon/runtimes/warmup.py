"""The agent protocol's models, built while choird's first agent boots.

choir's wire models build their validators at first use (`defer_build`: choirctl, and a choird
nobody starts an agent on, never pay for those they do not use). The first agent a choird runs
would wait for ~50-80 ms of choird's CPU building those of INIT_HELLO, HEARTBEAT and
REPORT_STATUS when it first calls them; choird builds them right after spawning it instead,
one per turn of its event loop, while the agent's interpreter starts (~0.3 s, on another core).
Last the event union's adapter (`EVENT_ADAPTER`, 15-40 ms), which the first heartbeat carrying
events needs (`event_json`): that heartbeat would otherwise wait for it on the way to the
agent's first reply.
"""

from __future__ import annotations

import asyncio
from typing import Final

from pydantic import BaseModel

from choir.protocol.log.events import EVENT_ADAPTER
from choir.protocol.wire import payloads

WIRE_MODELS: Final[tuple[type[BaseModel], ...]] = (
    payloads.InitHelloRequest,
    payloads.InitHelloResponse,
    payloads.FetchDynamicConfigRequest,
    payloads.FetchDynamicConfigResponse,
    payloads.ReportStatusRequest,
    payloads.HeartbeatRequest,
    payloads.HeartbeatResponse,
)
"""What an agent's first seconds call, in the order it calls them."""

_building: set[asyncio.Task[None]] = set()
_begun = False


def build_while_agents_boot() -> None:
    """Build `WIRE_MODELS` in the background, once per process."""
    global _begun
    if _begun:
        return
    _begun = True
    task = asyncio.get_running_loop().create_task(build_wire_models(), name="wire-models")
    _building.add(task)
    task.add_done_callback(_building.discard)


async def build_wire_models() -> None:
    for model in WIRE_MODELS:
        if not model.__pydantic_complete__:
            model.model_rebuild()
        await asyncio.sleep(0)  # a request that came in meanwhile goes first
    if not EVENT_ADAPTER.pydantic_complete:
        EVENT_ADAPTER.rebuild()
