"""What choird's metrics endpoint reports, with the names an operator's dashboard expects.

Counters and histograms are fed as things happen, from what choird already sees: each batch of
newly durable events (`EventIngest.subscribe`) gives the tool calls, their run time and lock
wait (`tool_result_committed.duration_ms`, `tool_call_committed.lock_wait_ms`); each accepted
heartbeat (`EventIngest.watch_heartbeats`) gives heartbeats, snapshots, the acknowledged
revision and the replication lag. Gauges of state (agents up, sessions, approvals pending) are
read when scraped (`Scrape`). Counters start at 0 with choird, as Prometheus expects of a
process; `agent status` shows the session's own figures from the stored events instead.

Every billed model call is counted by agent, model and kind (`llm` from each `llm_call`
event; `embedding` and `tts` once `usage_seen` is told of them): calls, tokens by type
(prompt/completion/cached, as OpenTelemetry's GenAI conventions split them), characters, the
known cost in USD (a call of unknown cost adds to `choir_model_unknown_cost_calls` instead,
never 0 to the cost) and the latency histogram.

A tool call counts once it ran: its intent was committed (a proposal refused before that has a
result but no intent), as in `choir.store.tool_stats`. The intents still waiting for their
result are remembered per session and dropped when it ends.

The registry is choird's own (not prometheus_client's global one) with the standard process,
platform and GC collectors, so `process_*` and `python_*` series are there as usual.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from choir.core.spend import TTS_TOOL, tts_billed
from choir.daemon.agents.ingest import Durable, HeartbeatSeen
from choir.protocol import LlmCallRecorded, ToolCallCommitted, ToolResultCommitted

TOOL_BUCKETS_S: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
"""Tool run times span a file read (ms) to a long exec (minutes)."""
WAIT_BUCKETS_S: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60)
"""Most calls wait 0; a contended one as long as another's run."""
MODEL_BUCKETS_S: Final = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
"""A model call takes from an embedding's tens of ms to a long generation's minutes."""
MODEL_LABELS: Final = ("agent", "model", "kind")
TOKEN_TYPES: Final = ("prompt", "completion", "cached")


@dataclass(frozen=True, slots=True)
class ModelCallSeen:
    """One billed model call, as the metrics count it."""

    agent: str
    model: str
    kind: str
    """`llm`, `embedding` or `tts`."""
    latency_s: float
    cost_usd: float | None
    """None: unknown (no price, none reported)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    characters: int = 0


class ChoirMetrics:
    """choird's metrics in one registry."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        self.tool_calls = Counter(
            "choir_tool_calls",
            "Tool calls that ran, by agent, tool and result status",
            ("agent", "tool", "status"),
            registry=registry,
        )
        self.tool_seconds = Histogram(
            "choir_tool_call_duration_seconds",
            "How long a tool call ran once it held its locks",
            ("agent", "tool"),
            buckets=TOOL_BUCKETS_S,
            registry=registry,
        )
        self.lock_wait_seconds = Histogram(
            "choir_lock_wait_seconds",
            "How long a tool call waited for its locks (0 for most)",
            ("agent",),
            buckets=WAIT_BUCKETS_S,
            registry=registry,
        )
        self.lock_waits = Counter(
            "choir_lock_waits",
            "Tool calls that had to wait for their locks",
            ("agent",),
            registry=registry,
        )
        self.events = Counter(
            "choir_replication_events",
            "Committed events the agent replicated and choird made durable",
            ("agent",),
            registry=registry,
        )
        self.heartbeats = Counter(
            "choir_heartbeats", "Heartbeats choird accepted", ("agent",), registry=registry
        )
        self.snapshots = Counter(
            "choir_snapshots",
            "Heartbeats that carried a working-memory snapshot",
            ("agent",),
            registry=registry,
        )
        self.lag_seconds = Gauge(
            "choir_replication_lag_seconds",
            "Last heartbeat: how long its oldest event took from commit to durable",
            ("agent",),
            registry=registry,
        )
        self.ack_rev = Gauge(
            "choir_replication_ack_revision",
            "The last revision choird acknowledged, of the agent's session",
            ("agent",),
            registry=registry,
        )
        self.agent_up = Gauge(
            "choir_agent_up",
            "1 while the agent has an active session, else 0",
            ("agent",),
            registry=registry,
        )
        self.sessions = Gauge(
            "choir_sessions",
            "Sessions in the database by status",
            ("status",),
            registry=registry,
        )
        self.approvals_pending = Gauge(
            "choir_approvals_pending",
            "Approval requests waiting for a decision",
            registry=registry,
        )
        self._model_metrics(registry)
        self._intents: dict[str, dict[str, str]] = {}
        """session id -> call id -> tool, of intents whose result has not arrived yet."""

    def _model_metrics(self, registry: CollectorRegistry) -> None:
        self.model_calls = Counter(
            "choir_model_calls",
            "Billed model calls (kind: llm, embedding, tts) by agent and model",
            MODEL_LABELS,
            registry=registry,
        )
        self.model_tokens = Counter(
            "choir_model_tokens",
            "Tokens of billed model calls by type (prompt, completion, cached; cached are also "
            "counted in prompt)",
            (*MODEL_LABELS, "type"),
            registry=registry,
        )
        self.model_characters = Counter(
            "choir_model_characters",
            "Characters billed (TTS) or embedded",
            MODEL_LABELS,
            registry=registry,
        )
        self.model_cost = Counter(
            "choir_model_cost_usd",
            "Known cost of model calls in USD (calls of unknown cost add nothing here)",
            MODEL_LABELS,
            registry=registry,
        )
        self.model_unknown_cost = Counter(
            "choir_model_unknown_cost_calls",
            "Model calls whose cost is unknown (no price configured, none reported)",
            MODEL_LABELS,
            registry=registry,
        )
        self.model_seconds = Histogram(
            "choir_model_call_duration_seconds",
            "Wall time of a model call, rate-limit waits and retries included",
            MODEL_LABELS,
            buckets=MODEL_BUCKETS_S,
            registry=registry,
        )

    # -- fed as things happen ----------------------------------------------------------------

    def replicated(self, durable: Durable) -> None:
        """Newly durable events of one session: count them, and time its tool calls."""
        agent = durable.agent_id
        self.events.labels(agent).inc(len(durable.events))
        intents = self._intents.setdefault(durable.session_id, {})
        for committed in durable.events:
            event = committed.event
            if isinstance(event, ToolCallCommitted):
                intents[event.call_id] = event.tool
                self._waited(agent, event.lock_wait_ms)
            elif isinstance(event, LlmCallRecorded):
                self.usage_seen(_llm_call(agent, event))
            elif isinstance(event, ToolResultCommitted) and event.tool == TTS_TOOL:
                self._tts(agent, event)
            if isinstance(event, ToolResultCommitted) and event.call_id in intents:
                del intents[event.call_id]
                self.tool_calls.labels(agent, event.tool, event.result.status).inc()
                seconds = (event.duration_ms or 0) / 1000
                self.tool_seconds.labels(agent, event.tool).observe(seconds)

    def _tts(self, agent: str, event: ToolResultCommitted) -> None:
        billed = tts_billed(event.model_dump(mode="json"))
        if billed is not None:
            seen = ModelCallSeen(
                agent=agent,
                model=billed.model_id,
                kind="tts",
                latency_s=(event.duration_ms or 0) / 1000,
                cost_usd=billed.cost.usd,
                characters=billed.characters,
            )
            self.usage_seen(seen)

    def usage_seen(self, call: ModelCallSeen) -> None:
        """Count one billed model call."""
        labels = (call.agent, call.model, call.kind)
        self.model_calls.labels(*labels).inc()
        for kind, count in zip(
            TOKEN_TYPES,
            (call.prompt_tokens, call.completion_tokens, call.cached_tokens),
            strict=True,
        ):
            if count:
                self.model_tokens.labels(*labels, kind).inc(count)
        if call.characters:
            self.model_characters.labels(*labels).inc(call.characters)
        # both series exist from the first call, so a dashboard's rate() sees them start at 0
        cost, unknown = self.model_cost.labels(*labels), self.model_unknown_cost.labels(*labels)
        if call.cost_usd is None:
            unknown.inc()
        else:
            cost.inc(call.cost_usd)
        self.model_seconds.labels(*labels).observe(call.latency_s)

    def _waited(self, agent: str, wait_ms: int | None) -> None:
        if wait_ms is None:  # an intent from before waits were recorded
            return
        self.lock_wait_seconds.labels(agent).observe(wait_ms / 1000)
        if wait_ms > 0:
            self.lock_waits.labels(agent).inc()

    def heartbeat(self, seen: HeartbeatSeen) -> None:
        agent = seen.agent_id
        self.heartbeats.labels(agent).inc()
        if seen.snapshot:
            self.snapshots.labels(agent).inc()
        self.lag_seconds.labels(agent).set(seen.lag_s)
        self.ack_rev.labels(agent).set(seen.ack_rev)

    def session_ended(self, session_id: str) -> None:
        self._intents.pop(session_id, None)

    # -- read when scraped -------------------------------------------------------------------

    def state(
        self,
        *,
        agents: Iterable[str],
        up: Iterable[str],
        sessions: Mapping[str, int],
        approvals_pending: int,
    ) -> None:
        """Set the gauges of state: every configured agent's `up`, sessions by status."""
        running = set(up)
        for agent in agents:
            self.agent_up.labels(agent).set(1 if agent in running else 0)
        for status, count in sessions.items():
            self.sessions.labels(status).set(count)
        self.approvals_pending.set(approvals_pending)


def _llm_call(agent: str, event: LlmCallRecorded) -> ModelCallSeen:
    return ModelCallSeen(
        agent=agent,
        model=event.model,
        kind="llm",
        latency_s=event.latency_ms / 1000,
        cost_usd=event.cost_usd,
        prompt_tokens=event.prompt_tokens,
        completion_tokens=event.completion_tokens,
        cached_tokens=event.cached_tokens,
    )


__all__ = [
    "MODEL_BUCKETS_S",
    "TOOL_BUCKETS_S",
    "WAIT_BUCKETS_S",
    "ChoirMetrics",
    "ModelCallSeen",
]
