"""Session and core-job budgets (§7.6, §12.8): counters, limits, and the checks between them.

Pure: counters are immutable values, every operation returns new ones, and the clock is passed
in (monotonic seconds). Edge enforces the session budgets (core jobs, tokens, tool calls), each
core job its own (steps, tool calls, wall time, injections received).

Countable actions are charged *before* they happen: a charge that would pass its limit is refused
— `Exceeded` comes back and the counters are unchanged — so a tool call, step, core job or
injection over budget never runs. Tokens are known only after an LLM call, so they are charged
after it and may pass the limit once; the `Exceeded` returned then stops the session.

Nothing here ever lowers a counter (§4 invariant 3: injection never resets budgets); a job's own
counters go away only when the job ends (`end_job`), and the session's never do. A budget that
ran out may be *extended* by a human (`extend`, issue 19's budgets that ask): the grant raises
that limit for the session (or the job), never lowers what was used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Final

from pydantic import Field

from choir.protocol.base import WireModel
from choir.protocol.log.lanes import job_name_of


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """The configured budgets; field names match config.json's `budgets` object."""

    max_core_jobs: int
    """Core jobs one session may start (edge)."""
    total_session_tokens: int
    """LLM tokens one session may spend (edge)."""
    max_tool_calls_per_session: int
    """Tool calls of all lanes of one session (edge)."""
    per_job_max_steps: int
    """LLM steps of one core job (core)."""
    per_job_max_tool_calls: int
    """Tool calls of one core job (core)."""
    per_job_wall_time_ms: int
    """Wall-clock time of one core job, in ms (core)."""
    max_injections_per_job: int
    """Instructions edge may inject into one core job (§12.8)."""

    def __post_init__(self) -> None:
        for limit in fields(self):
            if getattr(self, limit.name) < 1:
                raise ValueError(f"budget {limit.name} must be at least 1")


JOB_EXTENDABLE: Final = frozenset(
    {"per_job_max_steps", "per_job_max_tool_calls", "per_job_wall_time_ms"}
)
"""A core job's budgets a human may extend when they run out."""
SESSION_EXTENDABLE: Final = frozenset({"total_session_tokens", "max_tool_calls_per_session"})
"""The session's budgets a human may extend when they run out (while a job asks)."""
UNITS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "per_job_max_steps": "steps",
        "per_job_max_tool_calls": "tool calls",
        "per_job_wall_time_ms": "ms",
        "total_session_tokens": "tokens",
        "max_tool_calls_per_session": "tool calls",
    }
)
"""What an extension of each extendable budget counts."""


def _nothing_granted() -> Mapping[str, int]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class JobCounters:
    """What one running core job has used."""

    started_at: float
    """Monotonic time the job started, for its wall-time budget."""
    steps: int = 0
    tool_calls: int = 0
    injections: int = 0
    time_budget_ms: int | None = None
    """Edge's own wall-time budget for the job (CoreJobStart), when tighter than the default."""
    granted: Mapping[str, int] = field(default_factory=dict)
    """Extensions a human granted to the job's budgets, by budget name (added to the limit);
    replaced whole by `extend`, never changed in place."""


def _no_jobs() -> Mapping[str, JobCounters]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class BudgetCounters:
    """Everything a session has used: its totals, and each running core job's counters."""

    core_jobs: int = 0
    """Core jobs started this session."""
    tool_calls: int = 0
    """Tool calls of all lanes this session."""
    tokens: int = 0
    """LLM tokens spent this session."""
    jobs: Mapping[str, JobCounters] = field(default_factory=_no_jobs)
    """Running core jobs by name (read-only)."""
    granted: Mapping[str, int] = field(default_factory=_nothing_granted)
    """Extensions a human granted to the session's budgets, by budget name."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", MappingProxyType(dict(self.jobs)))
        object.__setattr__(self, "granted", MappingProxyType(dict(self.granted)))

    def job(self, name: str) -> JobCounters:
        """The counters of running job `name`; ValueError if it was never started."""
        try:
            return self.jobs[name]
        except KeyError:
            raise ValueError(f"core job {name!r} is not running; call start_job first") from None

    def with_job(self, name: str, counters: JobCounters) -> BudgetCounters:
        return replace(self, jobs={**self.jobs, name: counters})


@dataclass(frozen=True, slots=True)
class Exceeded:
    """A budget that is used up: which one, its limit, and how much was used."""

    budget: str
    """The limit's name, e.g. `per_job_max_tool_calls`."""
    limit: int
    used: int
    job: str | None = None
    """The core job whose budget it is; None for a session budget."""

    @property
    def message(self) -> str:
        """One line for the user and the log."""
        who = f"core job {self.job}" if self.job else "the session"
        return f"{who} exceeded {self.budget} ({self.limit})"

    def __str__(self) -> str:
        return self.message


Charged = tuple[BudgetCounters, Exceeded | None]
"""New counters, and the budget that refused (or ran out), if any."""


def start_job(
    counters: BudgetCounters,
    job: str,
    now: float,
    limits: BudgetLimits,
    *,
    time_budget_ms: int | None = None,
) -> Charged:
    """Start core job `job` at monotonic time `now`, within the session's max_core_jobs."""
    if job in counters.jobs:
        raise ValueError(f"core job {job!r} is already running; pick another name")
    if counters.core_jobs >= limits.max_core_jobs:
        return counters, Exceeded("max_core_jobs", limits.max_core_jobs, counters.core_jobs)
    budget = time_budget_ms if time_budget_ms else None
    started = replace(counters, core_jobs=counters.core_jobs + 1)
    return started.with_job(job, JobCounters(now, time_budget_ms=budget)), None


def end_job(counters: BudgetCounters, job: str) -> BudgetCounters:
    """Forget a finished job's own counters; what it used stays in the session totals."""
    return replace(counters, jobs={k: v for k, v in counters.jobs.items() if k != job})


def charge_tool_call(counters: BudgetCounters, lane: str, limits: BudgetLimits) -> Charged:
    """One tool call by `lane`: the session's budget, and a core lane's job budget."""
    limit = _session_limit(counters, limits, "max_tool_calls_per_session")
    if counters.tool_calls >= limit:
        return counters, Exceeded("max_tool_calls_per_session", limit, counters.tool_calls)
    job = job_name_of(lane)
    charged = replace(counters, tool_calls=counters.tool_calls + 1)
    if job is None:
        return charged, None
    used = counters.job(job)
    limit = _job_limit(used, limits, "per_job_max_tool_calls")
    if used.tool_calls >= limit:
        return counters, Exceeded("per_job_max_tool_calls", limit, used.tool_calls, job)
    return charged.with_job(job, replace(used, tool_calls=used.tool_calls + 1)), None


def charge_step(counters: BudgetCounters, lane: str, limits: BudgetLimits) -> Charged:
    """One LLM step by `lane`; only core jobs have a step budget (edge's turns are unbounded)."""
    job = job_name_of(lane)
    if job is None:
        return counters, None
    used = counters.job(job)
    limit = _job_limit(used, limits, "per_job_max_steps")
    if used.steps >= limit:
        return counters, Exceeded("per_job_max_steps", limit, used.steps, job)
    return counters.with_job(job, replace(used, steps=used.steps + 1)), None


def charge_tokens(counters: BudgetCounters, tokens: int, limits: BudgetLimits) -> Charged:
    """Tokens an LLM call spent (charged after the call); Exceeded once the total passes."""
    if tokens < 0:
        raise ValueError(f"token count must not be negative, got {tokens}")
    charged = replace(counters, tokens=counters.tokens + tokens)
    limit = _session_limit(counters, limits, "total_session_tokens")
    if charged.tokens > limit:
        return charged, Exceeded("total_session_tokens", limit, charged.tokens)
    return charged, None


def charge_injection(counters: BudgetCounters, job: str, limits: BudgetLimits) -> Charged:
    """One injection into `job` (§12.8): counted, capped, and resetting nothing."""
    used = counters.job(job)
    if used.injections >= limits.max_injections_per_job:
        limit = limits.max_injections_per_job
        return counters, Exceeded("max_injections_per_job", limit, used.injections, job)
    return counters.with_job(job, replace(used, injections=used.injections + 1)), None


def check_wall_time(
    counters: BudgetCounters, job: str, now: float, limits: BudgetLimits
) -> Exceeded | None:
    """Exceeded once `job` has run longer than its wall-time budget."""
    used = counters.job(job)
    limit = _wall_time_limit(used, limits)
    elapsed = _elapsed_ms(used, now)
    return Exceeded("per_job_wall_time_ms", limit, elapsed, job) if elapsed > limit else None


def wall_time_spent(
    counters: BudgetCounters, job: str, now: float, limits: BudgetLimits
) -> Exceeded:
    """`job`'s wall time as used up: the watchdog fired at its deadline (elapsed may equal the
    limit to the millisecond, so `check_wall_time` could still say None)."""
    used = counters.job(job)
    limit = _wall_time_limit(used, limits)
    return Exceeded("per_job_wall_time_ms", limit, max(_elapsed_ms(used, now), limit), job)


def exceeded_as_of(
    counters: BudgetCounters, limits: BudgetLimits, budget: str, job: str | None, now: float
) -> Exceeded:
    """`budget` as used up by now: its limit (grants included) and what was used, for the
    question that asks to extend it (a refused call names only its budget)."""
    used = counters.job(job) if job is not None and budget in JOB_EXTENDABLE else None
    if used is not None:
        if budget == "per_job_wall_time_ms":
            return wall_time_spent(counters, job or "", now, limits)
        spent = used.steps if budget == "per_job_max_steps" else used.tool_calls
        return Exceeded(budget, _job_limit(used, limits, budget), spent, job)
    spent = counters.tokens if budget == "total_session_tokens" else counters.tool_calls
    return Exceeded(budget, _session_limit(counters, limits, budget), spent)


def remaining(
    counters: BudgetCounters, limits: BudgetLimits, lane: str, now: float
) -> dict[str, int]:
    """What `lane` has left of each budget that applies to it (REPORT_STATUS, the TUI)."""
    left = {
        "max_core_jobs": limits.max_core_jobs - counters.core_jobs,
        "total_session_tokens": _session_limit(counters, limits, "total_session_tokens")
        - counters.tokens,
        "max_tool_calls_per_session": _session_limit(counters, limits, "max_tool_calls_per_session")
        - counters.tool_calls,
    }
    job = job_name_of(lane)
    if job is not None:
        used = counters.job(job)
        left |= {
            "per_job_max_steps": _job_limit(used, limits, "per_job_max_steps") - used.steps,
            "per_job_max_tool_calls": _job_limit(used, limits, "per_job_max_tool_calls")
            - used.tool_calls,
            "per_job_wall_time_ms": _wall_time_limit(used, limits) - _elapsed_ms(used, now),
            "max_injections_per_job": limits.max_injections_per_job - used.injections,
        }
    return {name: max(value, 0) for name, value in left.items()}


def extend(
    counters: BudgetCounters, budget: str, amount: int, job: str | None = None
) -> BudgetCounters:
    """A human granted `amount` more of `budget` (a job's own, or the session's)."""
    if amount < 1:
        raise ValueError(f"an extension must be at least 1, got {amount}")
    if budget in JOB_EXTENDABLE:
        if job is None:
            raise ValueError(f"{budget} is a core job's budget: name the job")
        used = counters.job(job)
        granted = {**used.granted, budget: used.granted.get(budget, 0) + amount}
        return counters.with_job(job, replace(used, granted=granted))
    if budget in SESSION_EXTENDABLE:
        granted = {**counters.granted, budget: counters.granted.get(budget, 0) + amount}
        return replace(counters, granted=granted)
    extendable = ", ".join(sorted(JOB_EXTENDABLE | SESSION_EXTENDABLE))
    raise ValueError(f"budget {budget!r} cannot be extended (extendable: {extendable})")


def _session_limit(counters: BudgetCounters, limits: BudgetLimits, budget: str) -> int:
    limit: int = getattr(limits, budget)
    return limit + counters.granted.get(budget, 0)


def _job_limit(job: JobCounters, limits: BudgetLimits, budget: str) -> int:
    limit: int = getattr(limits, budget)
    return limit + job.granted.get(budget, 0)


def _wall_time_limit(job: JobCounters, limits: BudgetLimits) -> int:
    base = min(job.time_budget_ms or limits.per_job_wall_time_ms, limits.per_job_wall_time_ms)
    return base + job.granted.get("per_job_wall_time_ms", 0)


def _elapsed_ms(job: JobCounters, now: float) -> int:
    return max(round((now - job.started_at) * 1000), 0)


class _JobRecord(WireModel):
    elapsed_ms: int = Field(ge=0)
    """Time the job had run when the snapshot was taken."""
    steps: int = Field(default=0, ge=0)
    tool_calls: int = Field(default=0, ge=0)
    injections: int = Field(default=0, ge=0)
    time_budget_ms: int | None = Field(default=None, ge=1)
    granted: dict[str, int] = Field(default_factory=dict)


class _CountersRecord(WireModel):
    core_jobs: int = Field(default=0, ge=0)
    tool_calls: int = Field(default=0, ge=0)
    tokens: int = Field(default=0, ge=0)
    jobs: dict[str, _JobRecord] = Field(default_factory=dict)
    granted: dict[str, int] = Field(default_factory=dict)


def to_dict(counters: BudgetCounters, now: float) -> dict[str, Any]:
    """Plain JSON data for a snapshot (§13.4).

    Monotonic clocks do not survive a restart, so each job's start is stored as the time it had
    run by `now`; `from_dict` re-bases it on the new process's clock.
    """
    jobs = {
        name: _JobRecord(
            elapsed_ms=_elapsed_ms(job, now),
            steps=job.steps,
            tool_calls=job.tool_calls,
            injections=job.injections,
            time_budget_ms=job.time_budget_ms,
            granted=dict(job.granted),
        )
        for name, job in counters.jobs.items()
    }
    record = _CountersRecord(
        core_jobs=counters.core_jobs,
        tool_calls=counters.tool_calls,
        tokens=counters.tokens,
        jobs=jobs,
        granted=dict(counters.granted),
    )
    data = record.model_dump(mode="json")
    # no grant, no key: a snapshot of a session nobody extended reads as before
    for holder in (data, *data["jobs"].values()):
        if not holder["granted"]:
            del holder["granted"]
    return data


def from_dict(data: Mapping[str, Any], now: float) -> BudgetCounters:
    """Counters from `to_dict` data; the jobs' clocks resume at monotonic time `now`."""
    record = _CountersRecord.model_validate(data)
    jobs = {
        name: JobCounters(
            started_at=now - job.elapsed_ms / 1000,
            steps=job.steps,
            tool_calls=job.tool_calls,
            injections=job.injections,
            time_budget_ms=job.time_budget_ms,
            granted=job.granted,
        )
        for name, job in record.jobs.items()
    }
    return BudgetCounters(
        record.core_jobs, record.tool_calls, record.tokens, jobs, granted=record.granted
    )
