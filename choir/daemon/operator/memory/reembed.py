"""`memory.reembed` (§11.9): give agents' memory the configured embedding model's vectors.

Streams `progress` items (`phase: "reembed"`, `step` vectors stored of `total`) after each page,
then `{kind: "result", result: {agents: [...]}}`. The agent (or, with `all`, every configured
agent in turn) is checked before anything runs; a refusal of the work itself (no embedder
answering, a re-embed of the agent already running) is the stream's error. The work runs on if
the reader goes away (`reporting`): what it stored stays, and a rerun resumes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.progress import Report, reporting
from choir.errors import UnavailableError, UsageError
from choir.protocol.base import WireModel
from choir.protocol.operator.answers import AgentReembedded, MemoryReembedded
from choir.protocol.operator.items import Progress, ReembedResult
from choir.protocol.operator.requests import MemoryReembed

if TYPE_CHECKING:
    from choir.daemon.memory.reembed import Reembedder


async def memory_reembed(ctx: OperatorContext, request: MemoryReembed) -> AsyncIterator[WireModel]:
    """Stream the re-embed of one agent's memory, or of every agent's (`all`)."""
    if request.all == (request.agent_id is not None):
        raise UsageError(
            "name one agent or pass --all: choirctl memory reembed <agent>|--all [--missing]"
        )
    agents = sorted(ctx.config.agents) if request.all else [request.agent_id or ""]
    for agent_id in agents:
        ctx.require_agent(agent_id)
    reembedder = await ctx.reembedder() if ctx.reembedder is not None else None
    if reembedder is None:
        raise UnavailableError(
            "choird's session memory has not started yet; run the command again in a moment"
        )
    return reporting(
        lambda report: _run(reembedder, agents, request.missing, report),
        lambda done: ReembedResult(result=done),
    )


async def _run(
    reembedder: Reembedder, agents: list[str], missing: bool, report: Report
) -> MemoryReembedded:
    done = []
    for agent_id in agents:

        async def progress(embedded: int, total: int, agent_id: str = agent_id) -> None:
            report(
                Progress(
                    agent_id=agent_id, phase="reembed", step=embedded, total=total, title="vectors"
                )
            )

        run = await reembedder.run(agent_id, missing_only=missing, progress=progress)
        done.append(
            AgentReembedded(
                agent_id=agent_id,
                model=run.model.name,
                dims=run.model.dims,
                previous_model=run.previous.name,
                previous_dims=run.previous.dims,
                embedded=run.embedded,
            )
        )
    return MemoryReembedded(agents=done)
