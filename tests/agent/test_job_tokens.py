"""The agent's job tokens (§7.5(3)): one per running job, renewed past half-life, none for edge."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from choir.agent.replication.job_tokens import JobEnded, JobTokens
from choir.protocol import EDGE_LANE
from choir.protocol.wire.job_tokens import JOB_TOKEN_TTL, epoch_ms, job_token_problem

LEASE, SESSION, LANE = "lease-secret", "s-1", "core:fix"


def tokens_at(clock: list[datetime], running: dict[str, str]) -> JobTokens:
    tokens = JobTokens(LEASE, SESSION, clock=lambda: clock[0])
    tokens.job_of = running.get
    return tokens


def test_a_running_jobs_token_is_kept_then_renewed_past_half_life() -> None:
    start = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
    clock, running = [start], {LANE: "job-1"}
    tokens = tokens_at(clock, running)
    first = tokens.for_lane(LANE)
    assert first is not None
    assert first.expires_at == epoch_ms(start + JOB_TOKEN_TTL)
    clock[0] = start + JOB_TOKEN_TTL / 4
    assert tokens.for_lane(LANE) == first
    clock[0] = start + JOB_TOKEN_TTL * 3 / 4
    renewed = tokens.for_lane(LANE)
    assert renewed is not None
    assert renewed.expires_at > first.expires_at
    assert job_token_problem(renewed, lease_token=LEASE, session_id=SESSION, now=clock[0]) is None
    running[LANE] = "job-2"  # a new job of the same name: its own token
    other = tokens.for_lane(LANE)
    assert other is not None
    assert other.job_id == "job-2"


def test_edge_has_no_token_and_an_ended_jobs_lane_gets_none() -> None:
    clock, running = [datetime.now(UTC)], {LANE: "job-1"}
    tokens = tokens_at(clock, running)
    assert tokens.for_lane(EDGE_LANE) is None
    assert tokens.for_lane(LANE) is not None
    running.clear()
    with pytest.raises(JobEnded):
        tokens.for_lane(LANE)


def test_a_token_is_refused_past_its_expiry_and_with_another_lease() -> None:
    start = datetime.now(UTC)
    token = tokens_at([start], {LANE: "job-1"}).for_lane(LANE)
    assert token is not None
    expired = job_token_problem(
        token, lease_token=LEASE, session_id=SESSION, now=start + JOB_TOKEN_TTL
    )
    assert expired == "the job token of job job-1 has expired"
    foreign = job_token_problem(token, lease_token="other", session_id=SESSION, now=start)
    assert foreign == "the job token of job job-1 was not issued for this session"
    assert LEASE not in repr(token)
    assert token.mac not in repr(token)
