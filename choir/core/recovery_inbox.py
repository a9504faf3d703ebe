"""The recovery inbox's rules (issue 19): item ids, each kind's choices, and how items read.

Pure. After a restart of choird or an agent, what waits for a human is of five kinds, each
decided by the verb that already owns it — the inbox lists and dispatches, it never decides on
its own:

- `held_job`: a core job holding a call of unknown outcome, its agent running again —
  resume / read_only / abort, by `session.recover`.
- `unknown_outcome`: a crashed session with calls of unknown outcome, its agent down —
  resume, by `agent.start` (the session resumes; its held jobs then wait here as `held_job`).
- `approval`: a proposal still pending — approve / reject, by `approval.approve|reject`.
- `approval_timed_out`: a proposal whose deadline passed while choird was down (the agent is
  told: rejected) — dismiss.
- `failed_apply`: an `agent update` that failed, or that a dying choird never finished —
  retry, by `agent.update`; or dismiss.

Item ids name what they are about, so an id stays valid across restarts and two front ends
name the same item the same way: `held:<session>:<job>`, `outcome:<session>`,
`approval:<approval-id>`, `timeout:<approval-id>`, `apply-<hex>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

Kind = Literal["held_job", "unknown_outcome", "approval", "approval_timed_out", "failed_apply"]

CHOICES: Final[Mapping[Kind, tuple[str, ...]]] = {
    "held_job": ("resume", "read_only", "abort"),
    "unknown_outcome": ("resume",),
    "approval": ("approve", "reject"),
    "approval_timed_out": ("dismiss",),
    "failed_apply": ("retry", "dismiss"),
}
"""Each kind's choices, the usual one first."""

ARGUMENTS_WIDTH: Final = 100
"""Characters of a call's arguments shown in an item's context."""


@dataclass(frozen=True, slots=True)
class ItemRef:
    """What an item id names."""

    kind: Kind
    session_id: str | None = None
    job_name: str | None = None
    approval_id: str | None = None
    apply_id: str | None = None


def held_id(session_id: str, job_name: str) -> str:
    return f"held:{session_id}:{job_name}"


def outcome_id(session_id: str) -> str:
    return f"outcome:{session_id}"


def approval_id_of(approval_id: str) -> str:
    return f"approval:{approval_id}"


def parse_item_id(item_id: str) -> ItemRef | None:
    """The item `item_id` names; None when it is no item id at all."""
    prefix, _, rest = item_id.partition(":")
    if prefix == "held":
        session_id, _, job_name = rest.partition(":")
        return ItemRef("held_job", session_id, job_name) if session_id and job_name else None
    if not rest:
        return ItemRef("failed_apply", apply_id=item_id) if item_id.startswith("apply-") else None
    if prefix == "outcome":
        return ItemRef("unknown_outcome", session_id=rest)
    if prefix == "approval":
        return ItemRef("approval", approval_id=rest)
    if prefix == "timeout":
        return ItemRef("approval_timed_out", approval_id=rest)
    return None


def resolve_command(item_id: str, kind: Kind) -> str:
    """The command that decides the item (choices spelled as on the command line)."""
    return f"choirctl inbox resolve {item_id} {'|'.join(map(spelled, CHOICES[kind]))}"


def spelled(choice: str) -> str:
    """A choice as the command line spells it: `read-only` (the wire says `read_only`)."""
    return choice.replace("_", "-")


def call_line(tool: str, arguments: Mapping[str, Any] | None) -> str:
    """`choir.exec {"command": "echo x >> a.txt"}`: a call as the operator checks it."""
    if arguments is None:
        return f"{tool} (arguments not in the log's preview)"
    return f"{tool} {_compact(arguments)}"


PROPOSAL_TEXTS: Final = (
    ("summary", "summary"), ("description", "description"),
    ("intended_behavior", "does"), ("rationale", "why"),
)  # fmt: skip
"""Fields of a proposal that say what it is, and how an item's context names them."""


def proposal_lines(request_type: str, payload: Mapping[str, Any]) -> list[str]:
    """What a pending proposal is, to decide with: its name, what it does and why."""
    lines = []
    for key in ("manifest", "spec"):
        named = payload.get(key)
        if isinstance(named, Mapping):
            name = named.get("name") or (named.get("llm") or {}).get("name")
            if name:
                lines.append(f"{request_type} {name}")
    for key, label in PROPOSAL_TEXTS:
        text = payload.get(key)
        if isinstance(text, str) and text.strip():
            lines.append(f"{label}: {' '.join(text.split())[:200]}")
    return lines or [f"{request_type} {_compact(payload)}"]


def _compact(value: Mapping[str, Any]) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= ARGUMENTS_WIDTH else text[: ARGUMENTS_WIDTH - 1] + "…"


def notice_text(titles: list[str], more: int) -> str:
    """The one DM message after a restart: what waits, and where to decide."""
    lines = [f"choird restarted: {len(titles) + more} item(s) wait for a decision."]
    lines += [f"- {title}" for title in titles]
    if more:
        lines.append(f"- … and {more} more")
    lines.append("See them with choirctl inbox (or the console's Inbox tab).")
    return "\n".join(lines)


__all__ = [
    "CHOICES",
    "ItemRef",
    "Kind",
    "approval_id_of",
    "call_line",
    "held_id",
    "notice_text",
    "outcome_id",
    "parse_item_id",
    "proposal_lines",
    "resolve_command",
    "spelled",
]
