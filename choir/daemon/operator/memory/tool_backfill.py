"""`memory.backfill_tools`: give sessions closed before tool-call rows existed their rows.

Streams `progress` items (`phase: "backfill-tools"`, `step` sessions of `total`) after each
session, then `{kind: "result", result: {agents: [...]}}`. Every agent named is checked before
anything runs. Idempotent: the rows are keyed, a second run finds nothing to do; the work runs on
if the reader goes away (`reporting`), and a run cut short is completed by the next.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.progress import Report, reporting
from choir.errors import UnavailableError, UsageError
from choir.protocol.base import WireModel
from choir.protocol.operator.answers import AgentToolsBackfilled, MemoryToolsBackfilled
from choir.protocol.operator.items import BackfillToolsResult, Progress
from choir.protocol.operator.requests import MemoryBackfillTools

if TYPE_CHECKING:
    from choir.daemon.memory.closing.tool_rows import ToolRowBackfill

PHASE = "backfill-tools"


async def memory_backfill_tools(
    ctx: OperatorContext, request: MemoryBackfillTools
) -> AsyncIterator[WireModel]:
    """Stream the backfill of one agent's tool-call rows, or of every agent's (`all`)."""
    if request.all == (request.agent_id is not None):
        raise UsageError(
            "name one agent or pass --all: choirctl memory backfill-tools <agent>|--all"
        )
    agents = sorted(ctx.config.agents) if request.all else [request.agent_id or ""]
    for agent_id in agents:
        ctx.require_agent(agent_id)
    backfill = await ctx.tool_backfill() if ctx.tool_backfill is not None else None
    if backfill is None:
        raise UnavailableError(
            "choird's session memory has not started yet; run the command again in a moment"
        )
    return reporting(
        lambda report: _run(backfill, agents, report),
        lambda done: BackfillToolsResult(result=done),
    )


async def _run(
    backfill: ToolRowBackfill, agents: list[str], report: Report
) -> MemoryToolsBackfilled:
    done = []
    for agent_id in agents:

        async def progress(step: int, total: int, agent_id: str = agent_id) -> None:
            report(
                Progress(agent_id=agent_id, phase=PHASE, step=step, total=total, title="sessions")
            )

        run = await backfill.run(agent_id, progress)
        done.append(
            AgentToolsBackfilled(
                agent_id=agent_id, sessions=run.sessions, rows=run.rows, already=run.already
            )
        )
    return MemoryToolsBackfilled(agents=done)
