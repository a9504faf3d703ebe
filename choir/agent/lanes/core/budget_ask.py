"""Budgets that ask instead of failing (issue 19): a paused lane's question to a human.

When a core job's budget runs out (steps, tool calls, wall time, or the session's tokens or tool
calls as the job meets them), when edge meets the session's tokens or tool calls, or when the
agent's spend cap refuses a lane's next model call, the lane pauses at its safe point and asks,
through the approval machinery that already reaches choirctl, the console and the DMs: a
`budget_extension` approval whose payload says which budget, its limit and what was used, and
the amount a plain "approve" grants (`suggested`: as much again). `choirctl approval extend
<id> <amount>` grants another amount; "reject" stops the job (edge: ends its reply with an
error). A spend cap's extension is whole dollars allowed beyond the cap until its day (month)
ends, and only an admin DM, choirctl or the console may grant it: a user's DM does not raise
the operator's cap. Approvals are rows in Postgres, so the question survives a choird restart;
choird times it out after `approval_timeout_ms` — then the lane stops and says why. An agent
that cannot ask (no choird bridge) stops as before.

The answer comes back as the `approval_resolved` push, which the agent's push pump offers here
first (`answered`): a question's id is known only to this module, never to the arbiter.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from choir.agent.kernel.dispatch import HostBridge
from choir.agent.kernel.lane_policy import LanePolicy
from choir.agent.lanes.spend import SpendCapReached, SpendMeter
from choir.agent.stopping import Drain
from choir.core.budgets import JOB_EXTENDABLE, UNITS, Exceeded
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import EDGE_LANE, ApprovalResolvedPush, CoreJobStart
from choir.protocol.log.lanes import core_lane
from choir.protocol.wire.pushes import TIMED_OUT_REASON
from choir.transport import RpcError, TransportError

log = get_logger("choir.agent.budgets")

REQUEST_TYPE: Final = "budget_extension"
SPEND_UNIT: Final = "USD"
"""What an extension of a spend cap counts: whole dollars (the answers' amounts are integers)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """How a budget question ended: `granted` more of the budget, or stopped for `why`."""

    granted: int | None
    why: str = ""
    approval_id: str | None = None


@dataclass(frozen=True, slots=True)
class Shortfall:
    """What ran out, as its question shows it: a budget of §7.6 or a spend cap."""

    budget: str
    """`per_job_max_steps`, `total_session_tokens`, `spend_cap_day_usd`…"""
    limit: int | float
    used: int | float
    message: str
    """One line: what ran out and for whom."""
    job: CoreJobStart | None = None
    """The paused core job; None when edge (the session's conversation) is paused."""

    @property
    def unit(self) -> str:
        return SPEND_UNIT if self.spend else UNITS.get(self.budget, "")

    @property
    def spend(self) -> bool:
        return self.budget.startswith("spend_cap_")

    @property
    def who(self) -> str:
        return f"core job {self.job.job_name}" if self.job is not None else "edge"


def of_budget(exceeded: Exceeded, job: CoreJobStart | None) -> Shortfall:
    return Shortfall(exceeded.budget, exceeded.limit, exceeded.used, exceeded.message, job)


def of_spend(refused: SpendCapReached, job: CoreJobStart | None) -> Shortfall:
    reached = refused.reached
    return Shortfall(
        reached.budget,
        round(reached.limit_usd, 4),
        round(reached.spent_usd, 4),
        refused.message,
        job,
    )


def suggested(short: Shortfall | Exceeded) -> int:
    """What a plain "approve" grants: as much again as the limit (at least 1; whole dollars
    for a spend cap)."""
    return max(math.ceil(short.limit), 1)


def question(short: Shortfall) -> dict[str, object]:
    """The approval's payload: what ran out, and what the answers do."""
    unit, more = short.unit, suggested(short)
    paused = "is paused" if short.job is not None else "is paused (its reply waits)"
    answers = (
        f"approve to allow {more} {unit} more, extend by another amount, or reject to stop"
        if short.spend
        else f"approve to extend it by {more} {unit}, extend by another amount, or reject to stop"
    )
    summary = (
        f"{short.who} ran out of {short.budget} ({short.used} of {short.limit} {unit} used) "
        f"and {paused}: {answers} it"
    )
    payload: dict[str, object] = {
        "summary": summary,
        "budget": short.budget,
        "limit": short.limit,
        "used": short.used,
        "unit": unit,
        "suggested": more,
        "lane": core_lane(short.job.job_name) if short.job is not None else EDGE_LANE,
    }
    if short.job is not None:
        payload |= {"job_name": short.job.job_name, "job_id": short.job.job_id}
    return payload


def asked_notice(approval_id: str, short: Shortfall) -> str:
    """What the user is told while `short`'s question waits: how each answer is given."""
    unit, more = short.unit or "amount", suggested(short)
    if short.spend:
        return (
            f"{short.who} is paused: {short.message}. An admin can allow more with `choirctl "
            f"approval extend {approval_id} <{unit}>` (or /extend {approval_id} <{unit}> in an "
            f"admin DM), /approve {approval_id} for {more} {unit} more, or /reject "
            f"{approval_id} to stop"
        )
    return (
        f"{short.who} is paused: {short.message}. Extend it with /extend {approval_id} "
        f"<{unit}> (or `choirctl approval extend {approval_id} <{unit}>`), /approve "
        f"{approval_id} for {more} more, or /reject {approval_id} to stop it"
    )


def resumed_notice(short: Shortfall, granted: int) -> str:
    what = "allowed" if short.spend else "extended by"
    return f"{short.who} resumes: {short.budget} {what} {granted} {short.unit}".rstrip()


def grant(short: Shortfall, amount: int, policy: LanePolicy, meter: SpendMeter) -> None:
    """Give the paused lane what a human granted: more of a budget, or spend beyond a cap."""
    if short.spend:
        meter.grant("day" if short.budget == "spend_cap_day_usd" else "month", float(amount))
        return
    job = short.job.job_name if short.job is not None and short.budget in JOB_EXTENDABLE else None
    policy.extend(short.budget, amount, job)


class BudgetAsk:
    """The questions of the session's paused jobs, each waiting for its `approval_resolved`."""

    def __init__(self, host: HostBridge | None) -> None:
        self._host = host
        self._waiting: dict[str, asyncio.Future[ApprovalResolvedPush]] = {}

    @property
    def can_ask(self) -> bool:
        return self._host is not None

    async def ask(
        self, short: Shortfall, drain: Drain, asked: Callable[[str, Shortfall], None]
    ) -> Answer:
        """Ask to extend `short` (`asked` tells the user the question's id), then wait for
        the answer (or a graceful stop)."""
        if self._host is None:
            return Answer(None, "no one can be asked (choird is not connected)")
        try:
            lane = core_lane(short.job.job_name) if short.job is not None else EDGE_LANE
            approval_id = await self._host.request_approval(
                REQUEST_TYPE, question(short), lane=lane
            )
        except (ChoirError, TransportError, RpcError) as error:
            log.warning("budget question not asked", fields={"error": str(error)})
            return Answer(None, f"the question to extend it could not be asked: {error}")
        answer = asyncio.get_running_loop().create_future()
        self._waiting[approval_id] = answer
        asked(approval_id, short)
        stopping = asyncio.ensure_future(drain.wait())
        try:
            await asyncio.wait({answer, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            self._waiting.pop(approval_id, None)
        if not answer.done():
            return Answer(None, "the agent stopped before anyone answered", approval_id)
        return _ended(answer.result(), short, approval_id)

    def answered(self, push: ApprovalResolvedPush) -> bool:
        """Deliver `push` if it answers one of our questions; False when it is not ours."""
        waiting = self._waiting.get(push.approval_id)
        if waiting is None:
            return False
        if not waiting.done():
            waiting.set_result(push)
        return True


def _ended(push: ApprovalResolvedPush, short: Shortfall, approval_id: str) -> Answer:
    if push.status == "approved":
        return Answer(push.extend_by or suggested(short), "", approval_id)
    if push.status == "timed_out" or push.reason == TIMED_OUT_REASON:
        why = f"nobody answered the question to extend it ({approval_id}) in time"
        return Answer(None, why, approval_id)
    return Answer(None, f"the extension was refused ({approval_id})", approval_id)


__all__ = [
    "REQUEST_TYPE",
    "Answer",
    "BudgetAsk",
    "Shortfall",
    "asked_notice",
    "grant",
    "of_budget",
    "of_spend",
    "question",
    "resumed_notice",
    "suggested",
]
