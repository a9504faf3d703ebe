"""Tool manifests (§8.3 dual view, §8.5 output tagging) and tool results."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from choir.protocol.base import WireModel

ToolStatus = Literal["success", "error", "cancelled", "timeout"]


class ToolResult(WireModel):
    """The structured JSON a tool returns (§8.5) — never raw logs.

    `error_code` is a stable machine-readable reason (e.g. `path_outside_workspace`,
    `invalid_input`, `timeout`) so the model can act on a failure.
    """

    status: ToolStatus
    """How the call ended: success, error, cancelled or timeout."""
    summary: str
    """One line a human or model can read."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Tool-specific structured output."""
    error_code: str | None = None
    """Stable reason when the call failed; None on success."""
    truncated: bool = False
    """True when output was capped; `data` says how much was dropped."""
    artifact_ref: str | None = None
    """Workspace path or content hash of a larger output kept outside the result."""

    @classmethod
    def ok(cls, summary: str, **data: Any) -> ToolResult:
        return cls(status="success", summary=summary, data=data)

    @classmethod
    def fail(cls, error_code: str, summary: str, **data: Any) -> ToolResult:
        return cls(status="error", summary=summary, error_code=error_code, data=data)
