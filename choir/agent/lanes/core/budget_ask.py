"""Budgets that ask instead of failing (issue 19): a paused job's question to a human.

When a core job's budget runs out (steps, tool calls, wall time, or the session's tokens or tool
calls as the job meets them) the job pauses at its safe point and asks, through the approval
machinery that already reaches choirctl, the console and the DMs: a `budget_extension`
approval whose payload says which budget, its limit and what was used, and the amount a plain
"approve" grants (`suggested`: as much again). `choirctl approval extend <id> <amount>` grants
another amount; "reject" stops the job. Approvals are rows in Postgres, so the question
survives a choird restart; choird times it out after `approval_timeout_ms` — then the job
stops and says why. An agent that cannot ask (no choird bridge) stops as before.

The answer comes back as the `approval_resolved` push, which the agent's push pump offers here
first (`answered`): a question's id is known only to this module, never to the arbiter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from choir.agent.kernel.dispatch import HostBridge
from choir.agent.stopping import Drain
from choir.core.budgets import UNITS, Exceeded
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import ApprovalResolvedPush, CoreJobStart
from choir.protocol.wire.pushes import TIMED_OUT_REASON
from choir.transport import RpcError, TransportError

log = get_logger("choir.agent.budgets")

REQUEST_TYPE: Final = "budget_extension"


@dataclass(frozen=True, slots=True)
class Answer:
    """How a budget question ended: `granted` more of the budget, or stopped for `why`."""

    granted: int | None
    why: str = ""
    approval_id: str | None = None


def suggested(exceeded: Exceeded) -> int:
    """What a plain "approve" grants: as much again as the limit (at least 1)."""
    return max(exceeded.limit, 1)


def question(exceeded: Exceeded, job: CoreJobStart) -> dict[str, object]:
    """The approval's payload: what ran out, and what the answers do."""
    unit = UNITS.get(exceeded.budget, "")
    more = suggested(exceeded)
    summary = (
        f"core job {job.job_name} ran out of {exceeded.budget} ({exceeded.used} of "
        f"{exceeded.limit} {unit} used) and is paused: approve to extend it by {more} {unit}, "
        "extend by another amount, or reject to stop it"
    )
    return {
        "summary": summary,
        "job_name": job.job_name,
        "job_id": job.job_id,
        "budget": exceeded.budget,
        "limit": exceeded.limit,
        "used": exceeded.used,
        "unit": unit,
        "suggested": more,
    }


class BudgetAsk:
    """The questions of the session's paused jobs, each waiting for its `approval_resolved`."""

    def __init__(self, host: HostBridge | None) -> None:
        self._host = host
        self._waiting: dict[str, asyncio.Future[ApprovalResolvedPush]] = {}

    @property
    def can_ask(self) -> bool:
        return self._host is not None

    async def ask(
        self,
        exceeded: Exceeded,
        job: CoreJobStart,
        drain: Drain,
        asked: Callable[[str, Exceeded], None],
    ) -> Answer:
        """Ask to extend `exceeded` (`asked` tells the user the question's id), then wait for
        the answer (or a graceful stop)."""
        if self._host is None:
            return Answer(None, "no one can be asked (choird is not connected)")
        try:
            approval_id = await self._host.request_approval(REQUEST_TYPE, question(exceeded, job))
        except (ChoirError, TransportError, RpcError) as error:
            log.warning("budget question not asked", fields={"error": str(error)})
            return Answer(None, f"the question to extend it could not be asked: {error}")
        answer = asyncio.get_running_loop().create_future()
        self._waiting[approval_id] = answer
        asked(approval_id, exceeded)
        stopping = asyncio.ensure_future(drain.wait())
        try:
            await asyncio.wait({answer, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            self._waiting.pop(approval_id, None)
        if not answer.done():
            return Answer(None, "the agent stopped before anyone answered", approval_id)
        return _ended(answer.result(), exceeded, approval_id)

    def answered(self, push: ApprovalResolvedPush) -> bool:
        """Deliver `push` if it answers one of our questions; False when it is not ours."""
        waiting = self._waiting.get(push.approval_id)
        if waiting is None:
            return False
        if not waiting.done():
            waiting.set_result(push)
        return True


def _ended(push: ApprovalResolvedPush, exceeded: Exceeded, approval_id: str) -> Answer:
    if push.status == "approved":
        return Answer(push.extend_by or suggested(exceeded), "", approval_id)
    if push.status == "timed_out" or push.reason == TIMED_OUT_REASON:
        why = f"nobody answered the question to extend it ({approval_id}) in time"
        return Answer(None, why, approval_id)
    return Answer(None, f"the extension was refused ({approval_id})", approval_id)


__all__ = ["REQUEST_TYPE", "Answer", "BudgetAsk", "question", "suggested"]
