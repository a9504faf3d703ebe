"""Budgets as tables: (counters, charge) -> (counters, exceeded); injection never resets a thing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from choir.core.budgets import (
    BudgetCounters,
    BudgetLimits,
    Charged,
    Exceeded,
    JobCounters,
    charge_injection,
    charge_step,
    charge_tokens,
    charge_tool_call,
    check_wall_time,
    end_job,
    extend,
    from_dict,
    remaining,
    start_job,
    to_dict,
    wall_time_spent,
)

LIMITS = BudgetLimits(
    max_core_jobs=2,
    total_session_tokens=1000,
    max_tool_calls_per_session=5,
    per_job_max_steps=3,
    per_job_max_tool_calls=2,
    per_job_wall_time_ms=60_000,
    max_injections_per_job=2,
)
CORE = "core:refactor-auth"
JOB = "refactor-auth"


def counters(jobs: dict[str, JobCounters] | None = None, **totals: int) -> BudgetCounters:
    return BudgetCounters(jobs=jobs or {}, **totals)


def job(**used: Any) -> dict[str, JobCounters]:
    return {JOB: JobCounters(started_at=100.0, **used)}


Charge = Callable[[BudgetCounters], Charged]


class Case(NamedTuple):
    before: BudgetCounters
    charge: Charge
    after: BudgetCounters
    exceeded: Exceeded | None = None


def _start(name: str = JOB, now: float = 100.0, **kwargs: Any) -> Charge:
    return lambda c: start_job(c, name, now, LIMITS, **kwargs)


CASES = {
    # session (edge enforces)
    "edge tool call": Case(
        counters(), lambda c: charge_tool_call(c, "edge", LIMITS), counters(tool_calls=1)
    ),
    "last session tool call": Case(
        counters(tool_calls=4),
        lambda c: charge_tool_call(c, "edge", LIMITS),
        counters(tool_calls=5),
    ),
    "session tool calls used up": Case(
        counters(tool_calls=5),
        lambda c: charge_tool_call(c, "edge", LIMITS),
        counters(tool_calls=5),
        Exceeded("max_tool_calls_per_session", 5, 5),
    ),
    "core call charges session and job": Case(
        counters(job()),
        lambda c: charge_tool_call(c, CORE, LIMITS),
        counters(job(tool_calls=1), tool_calls=1),
    ),
    "core call within job, session used up": Case(
        counters(job(), tool_calls=5),
        lambda c: charge_tool_call(c, CORE, LIMITS),
        counters(job(), tool_calls=5),
        Exceeded("max_tool_calls_per_session", 5, 5),
    ),
    "job tool calls used up": Case(
        counters(job(tool_calls=2), tool_calls=2),
        lambda c: charge_tool_call(c, CORE, LIMITS),
        counters(job(tool_calls=2), tool_calls=2),
        Exceeded("per_job_max_tool_calls", 2, 2, JOB),
    ),
    "tokens": Case(counters(), lambda c: charge_tokens(c, 400, LIMITS), counters(tokens=400)),
    "tokens up to the limit": Case(
        counters(tokens=600), lambda c: charge_tokens(c, 400, LIMITS), counters(tokens=1000)
    ),
    "tokens past the limit are still counted": Case(
        counters(tokens=900),
        lambda c: charge_tokens(c, 150, LIMITS),
        counters(tokens=1050),
        Exceeded("total_session_tokens", 1000, 1050),
    ),
    "start a job": Case(counters(), _start(), counters(job(), core_jobs=1)),
    "start with edge's tighter time budget": Case(
        counters(),
        _start(time_budget_ms=5_000),
        counters(job(time_budget_ms=5_000), core_jobs=1),
    ),
    "time budget 0 means the default": Case(
        counters(), _start(time_budget_ms=0), counters(job(), core_jobs=1)
    ),
    "core jobs used up": Case(
        counters(core_jobs=2),
        _start(),
        counters(core_jobs=2),
        Exceeded("max_core_jobs", 2, 2),
    ),
    "ended jobs still count": Case(
        end_job(start_job(counters(core_jobs=1), JOB, 0.0, LIMITS)[0], JOB),
        _start(),
        counters(core_jobs=2),
        Exceeded("max_core_jobs", 2, 2),
    ),
    "a name is free again once its job ended": Case(
        counters(core_jobs=1), _start(now=100.0), counters(job(), core_jobs=2)
    ),
    # job (core enforces)
    "core step": Case(
        counters(job()), lambda c: charge_step(c, CORE, LIMITS), counters(job(steps=1))
    ),
    "edge steps are not budgeted": Case(
        counters(tool_calls=3), lambda c: charge_step(c, "edge", LIMITS), counters(tool_calls=3)
    ),
    "job steps used up": Case(
        counters(job(steps=3)),
        lambda c: charge_step(c, CORE, LIMITS),
        counters(job(steps=3)),
        Exceeded("per_job_max_steps", 3, 3, JOB),
    ),
    "injection": Case(
        counters(job(steps=2, tool_calls=1), tool_calls=4, tokens=10),
        lambda c: charge_injection(c, JOB, LIMITS),
        counters(job(steps=2, tool_calls=1, injections=1), tool_calls=4, tokens=10),
    ),
    "injections used up": Case(
        counters(job(injections=2)),
        lambda c: charge_injection(c, JOB, LIMITS),
        counters(job(injections=2)),
        Exceeded("max_injections_per_job", 2, 2, JOB),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_charges(case: Case):
    assert case.charge(case.before) == (case.after, case.exceeded)


WALL_TIME = {
    "within": (job(), 159.999, None),
    "at the limit": (job(), 160.0, None),
    "past the limit": (job(), 160.5, Exceeded("per_job_wall_time_ms", 60_000, 60_500, JOB)),
    "edge's tighter budget": (
        job(time_budget_ms=5_000),
        106.0,
        Exceeded("per_job_wall_time_ms", 5_000, 6_000, JOB),
    ),
    "never looser than the config": (
        job(time_budget_ms=90_000),
        170.0,
        Exceeded("per_job_wall_time_ms", 60_000, 70_000, JOB),
    ),
}


@pytest.mark.parametrize(("jobs", "now", "exceeded"), WALL_TIME.values(), ids=WALL_TIME.keys())
def test_wall_time(jobs: dict[str, JobCounters], now: float, exceeded: Exceeded | None):
    assert check_wall_time(counters(jobs), JOB, now, LIMITS) == exceeded


def test_messages():
    assert Exceeded("per_job_max_tool_calls", 50, 50, JOB).message == (
        "core job refactor-auth exceeded per_job_max_tool_calls (50)"
    )
    assert str(Exceeded("total_session_tokens", 1000, 1050)) == (
        "the session exceeded total_session_tokens (1000)"
    )


def test_remaining():
    used = counters(
        job(steps=1, tool_calls=2, injections=1), core_jobs=1, tool_calls=3, tokens=1200
    )

    assert remaining(used, LIMITS, "edge", now=110.0) == {
        "max_core_jobs": 1,
        "total_session_tokens": 0,
        "max_tool_calls_per_session": 2,
    }
    assert remaining(used, LIMITS, CORE, now=110.0) == {
        "max_core_jobs": 1,
        "total_session_tokens": 0,
        "max_tool_calls_per_session": 2,
        "per_job_max_steps": 2,
        "per_job_max_tool_calls": 0,
        "per_job_wall_time_ms": 50_000,
        "max_injections_per_job": 1,
    }


@pytest.mark.parametrize(
    "misuse",
    [
        lambda: charge_tool_call(counters(), CORE, LIMITS),
        lambda: charge_step(counters(), CORE, LIMITS),
        lambda: charge_injection(counters(), JOB, LIMITS),
        lambda: check_wall_time(counters(), JOB, 0.0, LIMITS),
        lambda: start_job(counters(job()), JOB, 0.0, LIMITS),
        lambda: charge_tokens(counters(), -1, LIMITS),
        lambda: replace(LIMITS, per_job_max_steps=0),
    ],
    ids=["call", "step", "injection", "wall time", "same name twice", "negative tokens", "limit"],
)
def test_misuse_is_an_error(misuse: Callable[[], object]):
    with pytest.raises(ValueError, match=r"not running|already running|negative|at least 1"):
        misuse()


def test_counters_are_read_only():
    used = counters(job())

    with pytest.raises(TypeError):
        used.jobs[JOB] = JobCounters(0.0)  # type: ignore[index]


def test_dict_round_trip_rebases_the_clock():
    used = counters(
        job(steps=2, tool_calls=1, injections=1, time_budget_ms=5_000),
        core_jobs=1,
        tool_calls=9,
        tokens=77,
    )

    data = to_dict(used, now=102.5)

    assert data == {
        "core_jobs": 1,
        "tool_calls": 9,
        "tokens": 77,
        "jobs": {
            JOB: {
                "elapsed_ms": 2_500,
                "steps": 2,
                "tool_calls": 1,
                "injections": 1,
                "time_budget_ms": 5_000,
            }
        },
    }
    restored = from_dict(data, now=7.5)
    assert restored == replace(used, jobs={JOB: replace(used.jobs[JOB], started_at=5.0)})
    assert from_dict(to_dict(used, now=102.5), now=102.5) == used


def test_a_corrupt_dict_is_rejected():
    with pytest.raises(ValidationError):
        from_dict({"tool_calls": -1}, now=0.0)


# No sequence of operations ever lowers a counter; injections change nothing but themselves.

JOBS = ["a", "b", "c"]
OPERATIONS = st.one_of(
    st.tuples(st.just("start"), st.sampled_from(JOBS), st.floats(0, 1000)),
    st.tuples(st.just("end"), st.sampled_from(JOBS)),
    st.tuples(st.just("call"), st.sampled_from(["edge", *JOBS])),
    st.tuples(st.just("step"), st.sampled_from(["edge", *JOBS])),
    st.tuples(st.just("tokens"), st.integers(0, 400)),
    st.tuples(st.just("inject"), st.sampled_from(JOBS)),
    st.tuples(st.just("inject"), st.sampled_from(JOBS)),
)


def _lane(name: str) -> str:
    return name if name == "edge" else f"core:{name}"


def _run(used: BudgetCounters, op: tuple[Any, ...]) -> BudgetCounters:
    kind, arg = op[0], op[1]
    running = arg in used.jobs or arg == "edge"
    if kind == "start":
        return used if arg in used.jobs else start_job(used, arg, op[2], LIMITS)[0]
    if kind == "end":
        return end_job(used, arg)
    if kind == "tokens":
        return charge_tokens(used, arg, LIMITS)[0]
    if not running:
        return used
    if kind == "call":
        return charge_tool_call(used, _lane(arg), LIMITS)[0]
    if kind == "step":
        return charge_step(used, _lane(arg), LIMITS)[0]
    return charge_injection(used, arg, LIMITS)[0]


@given(st.lists(OPERATIONS, max_size=60))
def test_no_operation_lowers_a_counter(ops: list[tuple[Any, ...]]):
    used = BudgetCounters()
    for op in ops:
        after = _run(used, op)
        totals = ("core_jobs", "tool_calls", "tokens")
        assert all(getattr(after, t) >= getattr(used, t) for t in totals)
        for name in set(after.jobs) & set(used.jobs):
            old, new = asdict(used.jobs[name]), asdict(after.jobs[name])
            assert new["started_at"] == old["started_at"]
            assert all(new[k] >= old[k] for k in ("steps", "tool_calls", "injections"))
        if op[0] == "inject" and op[1] in used.jobs:
            expected = {k: v for k, v in asdict(used.jobs[op[1]]).items() if k != "injections"}
            assert {
                k: v for k, v in asdict(after.jobs[op[1]]).items() if k != "injections"
            } == expected
            assert replace(after, jobs={}) == replace(used, jobs={})
            others = {k: v for k, v in used.jobs.items() if k != op[1]}
            assert {k: v for k, v in after.jobs.items() if k != op[1]} == others
        assert after.tool_calls <= LIMITS.max_tool_calls_per_session
        assert after.core_jobs <= LIMITS.max_core_jobs
        assert all(j.injections <= LIMITS.max_injections_per_job for j in after.jobs.values())
        used = after


def test_wall_time_spent_names_the_limit_even_at_the_deadline_to_the_millisecond() -> None:
    limits = BudgetLimits(1, 10, 10, 10, 10, 2000, 1)
    counters, _ = start_job(BudgetCounters(), "j", 100.0, limits, time_budget_ms=1500)
    assert check_wall_time(counters, "j", 101.5, limits) is None
    spent = wall_time_spent(counters, "j", 101.5, limits)
    assert spent == Exceeded("per_job_wall_time_ms", 1500, 1500, "j")


def test_an_extension_raises_the_limit_and_survives_a_snapshot() -> None:
    limits = BudgetLimits(1, 100, 10, 2, 10, 2000, 1)
    used, _ = start_job(BudgetCounters(), "j", 0.0, limits)
    for _ in range(2):
        used, refused = charge_step(used, "core:j", limits)
        assert refused is None
    assert charge_step(used, "core:j", limits)[1] == Exceeded("per_job_max_steps", 2, 2, "j")
    used = extend(used, "per_job_max_steps", 3, "j")
    used = extend(used, "total_session_tokens", 50)
    assert remaining(used, limits, "core:j", 0.0)["per_job_max_steps"] == 3
    assert charge_tokens(used, 140, limits)[1] is None  # 100 + 50 granted
    restored = from_dict(to_dict(used, now=1.0), now=5.0)
    assert restored.granted == {"total_session_tokens": 50}
    assert restored.job("j").granted == {"per_job_max_steps": 3}
    with pytest.raises(ValueError, match="cannot be extended"):
        extend(used, "max_core_jobs", 1)
    with pytest.raises(ValueError, match="name the job"):
        extend(used, "per_job_max_steps", 1)
