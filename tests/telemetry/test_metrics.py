"""`ChoirMetrics` fed as choird feeds it: batches of durable events and accepted heartbeats.

A call counts once it ran (its intent was committed), even when its result comes in a later
heartbeat; a proposal refused before running (a result without an intent) is not a tool call;
an intent from a log older than lock waits (no `lock_wait_ms`) adds no wait."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from choir.daemon.agents.ingest import Durable, HeartbeatSeen
from choir.daemon.telemetry.metrics import ChoirMetrics
from choir.protocol import GENESIS_HASH, CommittedEvent, ToolResult
from choir.protocol.log.events import EVENT_ADAPTER

AT = datetime(2026, 11, 27, 4, 0, tzinfo=UTC)


class Log:
    def __init__(self) -> None:
        self.events: list[CommittedEvent] = []

    def commit(self, event: dict[str, Any]) -> CommittedEvent:
        prev = self.events[-1].hash if self.events else GENESIS_HASH
        committed = CommittedEvent.seal(
            rev=len(self.events) + 1,
            lane="edge",
            ts=AT,
            hash_prev=prev,
            event=EVENT_ADAPTER.validate_python(event),
        )
        self.events.append(committed)
        return committed


def intent(call_id: str, tool: str, wait_ms: int | None) -> dict[str, Any]:
    event = {
        "kind": "tool_call_committed",
        "call_id": call_id,
        "tool": tool,
        "side_effect": "read",
        "idempotent": True,
    }
    return event if wait_ms is None else {**event, "lock_wait_ms": wait_ms}


def result(call_id: str, tool: str, ms: int, status: str = "success") -> dict[str, Any]:
    outcome = ToolResult(status=status, summary="done").model_dump(mode="json")  # type: ignore[arg-type]
    return {
        "kind": "tool_result_committed",
        "call_id": call_id,
        "tool": tool,
        "result": outcome,
        "duration_ms": ms,
    }


def scraped(metrics: ChoirMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_calls_are_counted_once_they_ran_across_heartbeats() -> None:
    metrics, log = ChoirMetrics(), Log()
    first = [
        log.commit(intent("c1", "choir.fs.read", 0)),
        log.commit(result("c1", "choir.fs.read", 20)),
        log.commit(result("bad", "choir.nope", 0, status="error")),  # refused: no intent
        log.commit(intent("c2", "choir.exec", 1500)),
    ]
    metrics.replicated(Durable("s-1", "agent-1", first))
    second = [
        log.commit(result("c2", "choir.exec", 3000, status="timeout")),
        log.commit(intent("old", "choir.fs.read", None)),
        log.commit(result("old", "choir.fs.read", 40)),
    ]
    metrics.replicated(Durable("s-1", "agent-1", second))
    got = scraped(metrics)

    def at(name: str, **labels: str) -> float:
        return got[(name, frozenset(labels.items()))]

    assert (
        at("choir_tool_calls_total", agent="agent-1", tool="choir.fs.read", status="success") == 2
    )
    assert at("choir_tool_calls_total", agent="agent-1", tool="choir.exec", status="timeout") == 1
    assert not any(dict(labels).get("tool") == "choir.nope" for _, labels in got)
    exec_labels = {"agent": "agent-1", "tool": "choir.exec"}
    assert at("choir_tool_call_duration_seconds_sum", **exec_labels) == 3.0
    assert at("choir_tool_call_duration_seconds_bucket", **exec_labels, le="2.5") == 0
    assert at("choir_tool_call_duration_seconds_bucket", **exec_labels, le="5.0") == 1
    assert at("choir_lock_wait_seconds_count", agent="agent-1") == 2  # not the old intent
    assert at("choir_lock_wait_seconds_sum", agent="agent-1") == 1.5
    assert at("choir_lock_waits_total", agent="agent-1") == 1
    assert at("choir_replication_events_total", agent="agent-1") == 7


def test_heartbeats_snapshots_lag_and_state() -> None:
    metrics = ChoirMetrics()
    metrics.heartbeat(HeartbeatSeen("s-1", "agent-1", 40, snapshot=False, lag_s=0.12))
    metrics.heartbeat(HeartbeatSeen("s-1", "agent-1", 41, snapshot=True, lag_s=0.05))
    metrics.state(
        agents=["agent-1", "agent-2"],
        up=["agent-1"],
        sessions={"active": 1, "stopped": 3},
        approvals_pending=2,
    )
    got = scraped(metrics)
    assert got[("choir_heartbeats_total", frozenset({("agent", "agent-1")}))] == 2
    assert got[("choir_snapshots_total", frozenset({("agent", "agent-1")}))] == 1
    assert got[("choir_replication_lag_seconds", frozenset({("agent", "agent-1")}))] == 0.05
    assert got[("choir_replication_ack_revision", frozenset({("agent", "agent-1")}))] == 41
    assert got[("choir_agent_up", frozenset({("agent", "agent-2")}))] == 0
    assert got[("choir_sessions", frozenset({("status", "stopped")}))] == 3
    assert got[("choir_approvals_pending", frozenset())] == 2


def test_an_ended_session_forgets_its_open_intents() -> None:
    metrics, log = ChoirMetrics(), Log()
    metrics.replicated(Durable("s-1", "agent-1", [log.commit(intent("c1", "choir.exec", 0))]))
    metrics.session_ended("s-1")
    metrics.replicated(Durable("s-1", "agent-1", [log.commit(result("c1", "choir.exec", 5))]))
    assert (
        "choir_tool_calls_total",
        frozenset({("agent", "agent-1"), ("tool", "choir.exec"), ("status", "success")}),
    ) not in scraped(metrics)


def llm_call(model: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "llm_call", "lane": "edge", "model": model, **fields}


def test_llm_calls_count_tokens_known_cost_and_latency_by_agent_and_model() -> None:
    metrics, log = ChoirMetrics(), Log()
    priced = {"cost_usd": 0.25, "cost_source": "price"}
    events = [
        log.commit(llm_call("big", prompt_tokens=1000, completion_tokens=50, latency_ms=800)),
        log.commit(
            llm_call("big", prompt_tokens=2000, cached_tokens=1500, latency_ms=3000, **priced)
        ),
        log.commit(llm_call("small", completion_tokens=7, latency_ms=40, **priced)),
    ]
    metrics.replicated(Durable("s-1", "agent-1", events))
    got = scraped(metrics)

    def at(name: str, **labels: str) -> float:
        return got[(name, frozenset({"agent": "agent-1", "kind": "llm", **labels}.items()))]

    assert at("choir_model_calls_total", model="big") == 2
    assert at("choir_model_calls_total", model="small") == 1
    assert at("choir_model_tokens_total", model="big", type="prompt") == 3000
    assert at("choir_model_tokens_total", model="big", type="cached") == 1500
    assert at("choir_model_tokens_total", model="big", type="completion") == 50
    assert at("choir_model_cost_usd_total", model="big") == 0.25  # the unknown one adds nothing
    assert at("choir_model_unknown_cost_calls_total", model="big") == 1
    assert at("choir_model_unknown_cost_calls_total", model="small") == 0
    assert at("choir_model_call_duration_seconds_bucket", model="big", le="1.0") == 1
    assert at("choir_model_call_duration_seconds_bucket", model="big", le="5.0") == 2
    assert at("choir_model_call_duration_seconds_sum", model="big") == 3.8


def test_a_billed_tts_result_counts_as_a_tts_call() -> None:
    metrics, log = ChoirMetrics(), Log()
    billed = {"characters": 13, "model_id": "flash", "cost_usd": 0.0039, "cost_source": "price"}
    spoken = ToolResult(status="success", summary="staged", data=billed)
    unbilled = ToolResult(status="error", error_code="timeout", summary="no answer")
    events = [
        log.commit(intent("t1", "choir.tts.speak", 0)),
        log.commit({**result("t1", "choir.tts.speak", 900), "result": spoken.model_dump()}),
        log.commit(intent("t2", "choir.tts.speak", 0)),
        log.commit({**result("t2", "choir.tts.speak", 50), "result": unbilled.model_dump()}),
    ]
    metrics.replicated(Durable("s-1", "agent-1", events))
    got = scraped(metrics)
    tts = frozenset({"agent": "agent-1", "model": "flash", "kind": "tts"}.items())
    assert got[("choir_model_calls_total", tts)] == 1  # the provider never answered the second
    assert got[("choir_model_characters_total", tts)] == 13
    assert got[("choir_model_cost_usd_total", tts)] == 0.0039
    assert got[("choir_model_call_duration_seconds_sum", tts)] == 0.9
    assert (
        got[
            (
                "choir_tool_calls_total",
                frozenset(
                    {("agent", "agent-1"), ("tool", "choir.tts.speak"), ("status", "success")}
                ),
            )
        ]
        == 1
    )
