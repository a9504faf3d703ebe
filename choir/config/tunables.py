"""Tunable defaults of config.json: timing, budgets, memory sizes and RPC limits.

The top-level keys sit next to the resources (as in the §6.3 example); budgets and RPC limits are
grouped objects. Every default is the spec's where it names one.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from choir.config.base import ConfigModel, Positive


class Budgets(ConfigModel):
    """Hard limits that stop runaway sessions and jobs (§7.6); never reset by injection."""

    max_core_jobs: Positive = 20
    """Core jobs one session may spawn in total (edge-enforced)."""
    total_session_tokens: Positive = 2_000_000
    """LLM tokens (prompt + completion) one session may spend (edge-enforced)."""
    max_tool_calls_per_session: Positive = 500
    """Tool calls across both lanes of one session (edge-enforced)."""
    per_job_max_steps: Positive = 50
    """LLM steps of one core job (core-enforced)."""
    per_job_max_tool_calls: Positive = 100
    """Tool calls of one core job (core-enforced)."""
    per_job_wall_time_ms: Positive = 1_800_000
    """Wall-clock limit of one core job, in ms (core-enforced)."""
    max_injections_per_job: Positive = 10
    """Injections edge may send into one core job (§12.8)."""


class RpcLimits(ConfigModel):
    """Limits of choird's sockets and HTTP transport; oversized or slow peers are cut off."""

    max_frame_bytes: Positive = 1_048_576
    """Largest length-prefixed frame (envelope plus payload) accepted on a socket."""
    max_payload_bytes: Positive = 1_048_576
    """Largest request payload; must not exceed `max_frame_bytes`."""
    read_timeout_ms: Positive = 30_000
    """A peer that starts a frame must finish it within this time."""
    rate_limit_per_s: Positive = 200
    """Requests per second one agent connection may make before being throttled."""


class Tunables(ConfigModel):
    """Top-level tunable keys of config.json; hot-reloadable unless noted."""

    heartbeat_interval_ms: Positive = 5_000
    """How often choir-agent replicates committed events to choird (§13.1)."""
    crash_detection_threshold_ms: Positive = 10_000
    """No heartbeat for this long means crashed; at least 2x `heartbeat_interval_ms`."""
    snapshot_every_events: Positive = 1_000
    """A heartbeat carries a working-memory snapshot after this many events (§13.4)…"""
    snapshot_every_s: Positive = 300
    """…or this many seconds, whichever comes first, if anything was committed since. A resume
    replays only the events after the latest snapshot."""
    rate_limit_retry_ms: Positive = 1_000
    """Wait before retrying a rate-limited LLM call when the provider sends no Retry-After."""
    log_archive_threshold_lines: Positive = 100_000
    """An active log with more lines is gzipped into logs/archive/."""
    approval_timeout_ms: Positive = 1_800_000
    """Unanswered approvals are rejected after this long (§19.6: 30 minutes)."""
    budgets: Budgets = Field(default_factory=Budgets)
    """Session and core job budgets (§7.6)."""
    event_window_size: Positive = 50
    """Committed events kept verbatim in each lane's prompt (§11.3)."""
    mid_term_sessions: Positive = 10
    """Sessions kept as mid-term memory before promotion to long-term (§11.4); read by choird
    at each session close."""
    memory_chunk_chars: Annotated[int, Field(ge=200, le=16_000)] = 2_000
    """The longest chunk a closed session is cut into (§11.4): a longer tool call, skill phase
    or run of messages is split, shorter neighbours are merged up to it. Read at each close."""
    recall_budget_tokens: Annotated[int, Field(ge=0, le=32_000)] = 2_000
    """Tokens of relevant memories put into edge's prompt before each user message is answered
    (design 004; knowledge only); 0 recalls nothing."""
    recall_deadline_ms: Annotated[int, Field(ge=10, le=5_000)] = 150
    """The longest the recall may take: a slower search is given up and the turn goes on
    without it (the event says so)."""
    rollup_idle_s: Annotated[int, Field(ge=0, le=86_400)] = 600
    """Edge idle this long (no user message) rolls up the session summaries no roll-up covers
    yet with the agent's model (design 004, the summary tree's root); 0 never rolls up."""
    summary_timeout_ms: Positive = 30_000
    """Graceful stop skips the session summary if the LLM takes longer (§11.8)."""
    stop_timeout_ms: Positive = 10_000
    """Graceful stop: lanes short of their safe point after this long are cancelled (§17.2)."""
    rpc: RpcLimits = Field(default_factory=RpcLimits)
    """Transport limits."""
