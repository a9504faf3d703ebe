"""What the arbiter commits for a tool call, built as plain dicts (DESIGN decision "hot events").

`ToolCallRequested`, `ToolCallCommitted` and `ToolResultCommitted` are appended on every call; a
pydantic round trip per commit would miss the arbiter's throughput goal, so they are built here
directly in their JSON form (a test pins them to the models' form). Also the `cancelled` result a
call gets when its lane is cancelled.
"""

from __future__ import annotations

import time
from typing import Any

from choir.agent.kernel.dispatch import PreparedCall
from choir.agent.kernel.proposal import ToolProposal
from choir.protocol import ToolResult


def requested(proposal: ToolProposal) -> dict[str, Any]:
    """`ToolCallRequested` in its JSON form."""
    return {
        "kind": "tool_call_requested",
        "call_id": proposal.call_id,
        "tool": proposal.tool,
        "arguments": proposal.arguments,
    }


def intent(proposal: ToolProposal, call: PreparedCall, lock_wait_ms: int) -> dict[str, Any]:
    """`ToolCallCommitted` (the intent, committed under the call's locks) in its JSON form;
    `lock_wait_ms` is how long the call waited for those locks."""
    runtime = call.tool.manifest.runtime
    return {
        "kind": "tool_call_committed",
        "call_id": proposal.call_id,
        "tool": proposal.tool,
        "locks": [{"resource": r.resource, "mode": r.mode} for r in call.lockset],
        "side_effect": runtime.side_effect,
        "idempotent": call.idempotent,
        "lock_wait_ms": lock_wait_ms,
    }


def result_committed(
    proposal: ToolProposal, result: ToolResult, duration_ms: int
) -> dict[str, Any]:
    """`ToolResultCommitted` in its JSON form."""
    return {
        "kind": "tool_result_committed",
        "call_id": proposal.call_id,
        "tool": proposal.tool,
        "result": result.model_dump(mode="json"),
        "duration_ms": duration_ms,
    }


def cancelled(proposal: ToolProposal) -> ToolResult:
    """The result of a call whose lane was cancelled: the transcript stays valid."""
    return ToolResult(
        status="cancelled", summary=f"{proposal.tool} was cancelled before it finished"
    )


def finished_anyway(result: ToolResult) -> ToolResult:
    """The real result of a call whose work was past its point of no return when it was stopped:
    what the work did is what the log must say (a stopped write that happened is no `cancelled`)."""
    summary = f"{result.summary} (it finished as it was being stopped)"
    return result.model_copy(update={"summary": summary})


def ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


__all__ = [
    "cancelled",
    "finished_anyway",
    "intent",
    "ms_since",
    "requested",
    "result_committed",
]
