"""Cells the views share: ages, agent states, runtimes, images, bindings, budgets. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from rich.text import Text

if TYPE_CHECKING:
    from choir.protocol.operator.views import AgentSummary


AGENT_STATE_STYLES: Final = {
    "running": "bold #7ec16e",
    "crashed": "bold #e06c75",
    "stopped": "#8a8f98",
}


def age(since: datetime, now: datetime) -> str:
    """`42s`, `3m05s`, `2h14m`, `3d04h`."""
    return seconds_text(max((now - since).total_seconds(), 0.0))


def seconds_text(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def state_text(state: str | None) -> Text:
    name = state or "unknown"
    return Text(name, style=AGENT_STATE_STYLES.get(name, "italic"))


def runtime_text(agent: AgentSummary) -> Text:
    """`docker`, `process (bwrap)`, or `process (unsandboxed)` in warning colours; `—` while
    not running."""
    runtime = agent.runtime
    if not runtime:
        return Text("—", style="dim")
    if agent.sandboxed is False:
        return Text(f"{runtime} (unsandboxed)", style="bold #e5c07b")
    if runtime == "process":
        return Text("process (bwrap)")
    return Text(str(runtime))


def image_text(image: Any) -> str:
    """The image an agent was started from: its tag, or version, or `—`."""
    if not image:
        return "—"
    if isinstance(image, dict):
        for key in ("tag", "image", "image_version", "version", "choir_version", "digest"):
            if image.get(key):
                return str(image[key])
        return ", ".join(f"{key}={value}" for key, value in sorted(image.items()))[:40]
    return str(image)


def bindings_text(bindings: dict[str, Any]) -> str:
    """`dm=console llm=demo workspace=default` (roles without a binding left out)."""
    return " ".join(f"{role}={name}" for role, name in sorted(bindings.items()) if name)


BUDGET_NAMES: Final = {
    "per_job_max_steps": "steps",
    "total_session_tokens": "tokens",
    "max_tool_calls_per_session": "calls",
    "per_job_max_tool_calls": "job calls",
    "per_job_wall_time_ms": "wall",
    "max_core_jobs": "jobs",
    "max_injections_per_job": "injections",
}
"""Short names of the §7.6 budget counters, in the order they are shown."""


def budgets_text(remaining: dict[str, int]) -> str:
    """`steps 40 · tokens 1.9M · calls 488 · wall 30m00s`; `—` when none are reported."""
    if not remaining:
        return "—"
    known = [name for name in BUDGET_NAMES if name in remaining]
    others = sorted(name for name in remaining if name not in BUDGET_NAMES)
    return " · ".join(_budget(name, remaining[name]) for name in [*known, *others])


def _budget(name: str, value: int) -> str:
    if name.endswith("_ms"):
        return f"{BUDGET_NAMES.get(name, name)} {seconds_text(value / 1000)}"
    return f"{BUDGET_NAMES.get(name, name)} {_count(value)}"


def _count(value: int) -> str:
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if abs(value) >= 10_000:
        return f"{value / 1000:.1f}k"
    return str(value)
