"""The arbiter's budget and skill bookkeeping (§7.6, §10.2): what a lane may still do.

The arbiter holds one (`Arbiter.policy`), so the commit path reads on its own. `LanePolicy`
holds the §7.6 counters and each lane's skill run, and answers the questions lanes ask between
tool calls: may I take another step, may edge inject once more, may this job start, may this call
run. The arbiter asks it at admission (`check_job`, `charge_call`) and tells it what was committed
(`observe`); only the arbiter charges the counters and nothing ever resets them. The skill
effects it decides (transitions, endings) are committed to the log it shares with the arbiter.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.kernel.locks import LockManager
from choir.core import budgets
from choir.core.budgets import BudgetCounters, BudgetLimits, Exceeded
from choir.core.skills import runner as skill_runner
from choir.core.skills.runner import Decision, Refused, SkillRun
from choir.protocol import Event, SkillSpec, ToolResult, core_lane, job_name_of


class LanePolicy:
    """Budgets and skill runs of one session; the `Arbiter` holds one (`Arbiter.policy`)."""

    def __init__(
        self,
        *,
        log: CommitLog,
        locks: LockManager,
        limits: BudgetLimits,
        skills: Mapping[str, SkillSpec] | None,
    ) -> None:
        self.log = log
        self.locks = locks
        self.limits = limits
        self.budgets = BudgetCounters()
        """Counters of §7.6; only the arbiter charges them, and nothing ever resets them."""
        self.tokens_exceeded: Exceeded | None = None
        """Set once the session's LLM tokens pass `total_session_tokens`."""
        self.skills: Mapping[str, SkillSpec] = skills or {}
        self.skill_runs: dict[str, SkillRun | None] = {}
        """Each lane's active (or last) skill run."""

    def set_limits(self, limits: BudgetLimits) -> None:
        """A hot-reloaded budget (§16.3): every check from now on uses `limits`.

        Counters stay as they are, so a lane already past a lowered limit is refused at its
        next check; the token budget is re-checked at once (it is only charged after calls).
        """
        self.limits = limits
        _, self.tokens_exceeded = budgets.charge_tokens(self.budgets, 0, limits)

    def begin_step(self, lane: str) -> str | None:
        """Before a lane's LLM call: None to go ahead, else why the step must not happen."""
        exceeded = self.begin_step_or_exceeded(lane)
        return exceeded.message if exceeded is not None else None

    def begin_step_or_exceeded(self, lane: str) -> Exceeded | None:
        """`begin_step`, saying which budget refused (a core job asks to extend it).

        Charges the core job's step budget and checks its wall time and the session's tokens;
        a skill that used its `max_steps` ends here with a committed transition (§10.2).
        """
        if self.tokens_exceeded is not None:
            return self.tokens_exceeded
        job = job_name_of(lane)
        if job is not None:
            late = budgets.check_wall_time(self.budgets, job, time.monotonic(), self.limits)
            if late is not None:
                return late
        self.budgets, exceeded = budgets.charge_step(self.budgets, lane, self.limits)
        if exceeded is not None:
            return exceeded
        if self.skills:
            decision = skill_runner.begin_step(self.skill_runs.get(lane), self.skills)
            self.apply(lane, decision)
        return None

    def extend(self, budget: str, amount: int, job: str | None) -> None:
        """A human granted `amount` more of `budget` (issue 19): the next check allows it."""
        self.budgets = budgets.extend(self.budgets, budget, amount, job)
        _, self.tokens_exceeded = budgets.charge_tokens(self.budgets, 0, self.limits)

    def exceeded(self, budget: str, job: str | None) -> Exceeded:
        """`budget` as used up now (a refused call names only the budget)."""
        now = time.monotonic()
        return budgets.exceeded_as_of(self.budgets, self.limits, budget, job, now)

    def charge_injection(self, job_name: str) -> str | None:
        """Count one instruction injected into `job_name` (§12.8); why not when over budget."""
        self.budgets, exceeded = budgets.charge_injection(self.budgets, job_name, self.limits)
        return exceeded.message if exceeded else None

    def interrupt_skill(self, lane: str) -> str | None:
        """Cancel or injection reached `lane`: end its interruptible skill (committed).

        Returns why not, for a skill that is not interruptible.
        """
        if not self.skills:
            return None
        verdict = skill_runner.interrupt(self.skill_runs.get(lane), self.skills)
        if isinstance(verdict, Refused):
            return verdict.summary
        self.apply(lane, verdict)
        return None

    def start_job(self, job_name: str, *, time_budget_ms: int | None = None) -> str | None:
        """Open a core job's budgets; the reason when it cannot (name taken, max_core_jobs)."""
        if job_name in self.budgets.jobs:
            return f"core job {job_name} is already running; pick another name"
        self.budgets, exceeded = budgets.start_job(
            self.budgets, job_name, time.monotonic(), self.limits, time_budget_ms=time_budget_ms
        )
        return exceeded.message if exceeded else None

    def end_job(self, job_name: str) -> None:
        self.budgets = budgets.end_job(self.budgets, job_name)
        self.locks.release_all(core_lane(job_name))

    def remaining(self, lane: str) -> dict[str, int]:
        """What `lane` has left of each budget that applies to it (status reports, waits)."""
        return budgets.remaining(self.budgets, self.limits, lane, time.monotonic())

    def observe(self, lane: str, event: Event) -> None:
        """A lane's event was committed: advance its skill, charge a model output's tokens."""
        if self.skills:
            self.skill_runs[lane] = skill_runner.apply(
                self.skill_runs.get(lane), event, self.skills
            )
        if event.kind == "model_output":
            self.budgets, self.tokens_exceeded = budgets.charge_tokens(
                self.budgets, event.usage.total_tokens, self.limits
            )

    def apply(self, lane: str, decision: Decision) -> None:
        for effect in decision.effects:
            self.log.commit(lane, effect)
        self.skill_runs[lane] = decision.run

    def check_job(self, lane: str) -> ToolResult | None:
        """A core job's call is refused once the job stopped or ran out of wall time."""
        job = job_name_of(lane)
        if job is None:
            return None
        if job not in self.budgets.jobs:
            return ToolResult.fail("job_not_running", f"core job {job} is not running")
        late = budgets.check_wall_time(self.budgets, job, time.monotonic(), self.limits)
        if late is not None:
            return ToolResult.fail("budget_exceeded", late.message, budget=late.budget)
        return None

    def charge_call(self, lane: str) -> ToolResult | None:
        """Charge an admitted call to the tool-call budgets; the refusal when over one."""
        self.budgets, exceeded = budgets.charge_tool_call(self.budgets, lane, self.limits)
        if exceeded is not None:
            return ToolResult.fail("budget_exceeded", exceeded.message, budget=exceeded.budget)
        return None


__all__ = ["LanePolicy"]
