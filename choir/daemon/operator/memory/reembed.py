"""`memory.reembed` (§11.9): give agents' memory the configured embedding model's vectors.

Streams `progress` items (`phase: "reembed"`, `step` vectors stored of `total`) after each page
and one (`phase: "reembedded"`, with the agent's row) after each agent's run, then
`{kind: "result", result: {agents: [...]}}`: a reader whose stream breaks midway (choird
killed) can still say which agents finished. The agent (or, with `all`, every configured
agent in turn) is checked before anything runs. A refusal of one agent's work (no embedder
answering, a re-embed of the agent already running) is the stream's error; with `all` it ends
the run instead, and the result says where it `stopped` — the agents finished before it keep
their vectors, and without that the operator could not tell what is left to run. The work
runs on if the reader goes away (`reporting`): what it stored stays, and a rerun resumes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.progress import Report, reporting
from choir.errors import ChoirError, UnavailableError, UsageError, one_line, wire_code
from choir.logs import get_logger
from choir.protocol.base import WireModel
from choir.protocol.operator.answers import AgentReembedded, MemoryReembedded, ReembedStopped
from choir.protocol.operator.items import Progress, ReembedResult
from choir.protocol.operator.requests import MemoryReembed
from choir.protocol.wire.error_codes import ErrorCode
from choir.store.postgres.failures import classify

if TYPE_CHECKING:
    from choir.daemon.memory.reembed import Reembedded, Reembedder

log = get_logger("choird.operator")


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
        lambda report: _run(reembedder, agents, request.all, request.missing, report),
        lambda done: ReembedResult(result=done),
    )


async def _run(
    reembedder: Reembedder, agents: list[str], all_agents: bool, missing: bool, report: Report
) -> MemoryReembedded:
    done: list[AgentReembedded] = []
    for position, agent_id in enumerate(agents):

        async def progress(embedded: int, total: int, agent_id: str = agent_id) -> None:
            report(
                Progress(
                    agent_id=agent_id, phase="reembed", step=embedded, total=total, title="vectors"
                )
            )

        try:
            run = await reembedder.run(agent_id, missing_only=missing, progress=progress)
        except Exception as error:
            if not all_agents:
                raise
            stopped = _stopped(agent_id, error, agents[position + 1 :])
            return MemoryReembedded(agents=done, stopped=stopped)
        done.append(_row(run))
        report(Progress(agent_id=agent_id, phase="reembedded", reembedded=done[-1]))
    return MemoryReembedded(agents=done)


def _row(run: Reembedded) -> AgentReembedded:
    return AgentReembedded(
        agent_id=run.agent_id,
        model=run.model.name,
        dims=run.model.dims,
        previous_model=run.previous.name,
        previous_dims=run.previous.dims,
        embedded=run.embedded,
    )


def _stopped(agent_id: str, error: Exception, not_started: list[str]) -> ReembedStopped:
    """The failure of `agent_id`'s run as data: a refusal's code and line; a database failure
    as `unavailable`; anything else (a bug) as `internal`, logged with its traceback."""
    if isinstance(error, ChoirError):
        code, message = wire_code(error).value, one_line(error.message)
    elif (failure := classify(error)) is not None:
        code = ErrorCode.UNAVAILABLE.value
        message = (
            f"choird's database failed ({failure}) re-embedding {agent_id}: what was stored "
            "stays; check choirctl status, then run the command again"
        )
    else:
        log.exception("memory reembed failed", fields={"agent_id": agent_id})
        code = ErrorCode.INTERNAL.value
        message = f"choird failed re-embedding {agent_id}: see choirctl logs choird"
    return ReembedStopped(agent_id=agent_id, code=code, message=message, not_started=not_started)
