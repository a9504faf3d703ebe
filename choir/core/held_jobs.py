"""A core job held after a crash (§13.3, DESIGN-NOTES "Durability"): what people are told.

Pure. A resumed session holds a core job whose non-idempotent call has an unknown outcome — it
may or may not have happened — until the operator decides. The agent says so in the user's DM,
choird in every status it shows; both name the same command, so they live here once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

CHOICES: Final = "resume|read-only|abort"
"""The decisions `choirctl session recover --choice` takes."""


def recover_command(session_id: str, job_name: str | None = None) -> str:
    """The command that decides for one held job (or, without a name, for all of them)."""
    job = f" --job {job_name}" if job_name else ""
    return f"choirctl session recover {session_id}{job} --choice {CHOICES}"


def held_state(tools: Sequence[str]) -> str:
    """How a held job's state reads: `held: unknown outcome of choir.exec`."""
    return f"held: unknown outcome of {', '.join(tools) or 'a call'}"


def held_notice(session_id: str, job_name: str, tools: Sequence[str]) -> str:
    """The user's DM when a session resumes with a held job."""
    calls = ", ".join(tools)
    return (
        f"Core job {job_name} is on hold: the agent restarted while {calls} ran, and it may or "
        "may not have taken effect. It waits for an operator to check and decide: "
        f"{recover_command(session_id, job_name)} (the calls are listed by choirctl session "
        f"recover {session_id})."
    )


__all__ = ["CHOICES", "held_notice", "held_state", "recover_command"]
