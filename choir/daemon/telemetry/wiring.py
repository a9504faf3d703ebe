"""The metrics endpoint inside choird: feed `ChoirMetrics` from the agent services (from before
adoption) and serve it on `metrics.listen` (once the gateways started) until choird stops;
everything is undone on its exit stack."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack
from pathlib import Path

from choir.daemon.agents.services import AgentServices
from choir.daemon.memory.embedding.usage import EmbeddingMeter
from choir.daemon.sessions.state import SessionEnded
from choir.daemon.telemetry.endpoint import serve_metrics
from choir.daemon.telemetry.metrics import ChoirMetrics, ModelCallSeen
from choir.store.census import census
from choir.store.postgres.pool import Pool
from choir.store.sessions import SessionStatus
from choir.store.usage import EmbeddingCall


def embedding_seen(call: EmbeddingCall) -> ModelCallSeen:
    return ModelCallSeen(
        agent=call.agent_id,
        model=call.model,
        kind="embedding",
        latency_s=call.latency_ms / 1000,
        cost_usd=call.cost_usd,
        prompt_tokens=call.tokens,
        characters=call.characters,
    )


def feed_metrics(
    stack: AsyncExitStack, services: AgentServices, embedding: EmbeddingMeter | None = None
) -> ChoirMetrics:
    """Metrics that hear the agents' news while `stack` is open: from before adoption (step 6),
    so what an adopted agent replicates or ends as it reconnects, while choird is still
    starting, is counted too. `embedding` tells of choird's embedding calls."""
    metrics = ChoirMetrics()
    if embedding is not None:
        stack.callback(embedding.subscribe(lambda call: metrics.usage_seen(embedding_seen(call))))
    stack.callback(services.replicator.subscribe(metrics.replicated))
    stack.callback(services.replicator.watch_heartbeats(metrics.heartbeat))

    def ended(session: SessionEnded) -> None:
        metrics.session_ended(session.session_id)

    stack.callback(services.sessions.subscribe(ended))
    return metrics


async def serve_metrics_of(
    stack: AsyncExitStack,
    metrics: ChoirMetrics,
    *,
    listen: str,
    home: Path,
    pool: Pool,
    agents: Callable[[], Iterable[str]],
) -> None:
    """Serve `metrics` on `listen` (relative socket paths under `home`) while `stack` is open;
    `agents` names the configured agents (for `choir_agent_up`)."""

    async def refresh() -> None:
        async with pool.acquire() as conn:
            counts = await census(conn)
        metrics.state(
            agents=agents(),
            up=counts.active_agents,
            sessions={
                status.value: counts.sessions.get(status.value, 0) for status in SessionStatus
            },
            approvals_pending=counts.approvals_pending,
        )

    await stack.enter_async_context(serve_metrics(listen, home, metrics.registry, refresh))
