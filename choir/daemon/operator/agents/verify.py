"""`agent.verify`: check a running agent against the declared security profile (§15.3).

The runtime reads the agent's container back (`docker inspect`, and the kernel's view of its main
process) and compares every item of `choir.core.security.profile`; the process runtime answers
that nothing applies to an unsandboxed host process. The result is kept with the running agent,
so `agent.status` shows the last one (the docker runtime also checks at every start).
"""

from __future__ import annotations

from choir.daemon.operator.agents.lifecycle import lifecycle_of
from choir.daemon.operator.context import OperatorContext
from choir.protocol.operator.requests import AgentRef
from choir.protocol.operator.views import VerifyReport


async def agent_verify(ctx: OperatorContext, request: AgentRef) -> VerifyReport:
    """Each profile item with what it must be, what the agent has, and whether it passes."""
    ctx.require_agent(request.agent_id)
    await ctx.running_session(request.agent_id, hint="start it, then verify it")
    report = await lifecycle_of(ctx).runtime.verify(request.agent_id)
    return VerifyReport.model_validate(report.as_dict())
