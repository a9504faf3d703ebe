"""The fixed texts of a lane's prompt: lane instructions, identity files, summary and briefing.

§21.4: OpenRouter gives no reliable prefix caching, so every call pays for the whole prompt. The
system prompt is therefore short and never changes within a session (lane instructions plus the
skill list); behaviour is enforced by the state machines, gates and skill runner, not by prose.
Everything that changes comes after it. Tool schemas never appear here: they travel in the
request's `tools` parameter (§11.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from choir.core.memory.working import HASH_REF_CHARS
from choir.core.prompt.window import json_text
from choir.core.skills.runner import START_TOOL
from choir.protocol.log.core_jobs import CoreJobStart
from choir.protocol.tooling.memory import ReferenceSummary

__all__ = [
    "CORE_INSTRUCTIONS",
    "EDGE_INSTRUCTIONS",
    "briefing_text",
    "identity_text",
    "summary_text",
    "system_text",
]

EDGE_INSTRUCTIONS: Final = """\
You are the edge lane of a choir agent: the one who talks with the user.
- Reply briefly and directly. Handle quick requests yourself with your tools.
- Hand deep, multi-step or long work to a core job with choir.core.spawn: a short job name and \
a clean briefing (the actionable task, and only the facts, excerpts and constraints it needs; \
never the user's raw words).
- Relay the user's new instructions for a running job with choir.core.inject; use \
choir.core.list and choir.core.cancel to track and stop jobs.
- While any core job runs you are read-only: no file writes, no commands.
- When a core job stops ([CORE ...] notes), always report its outcome to the user.
- When a core job needs information ([CORE EVENT] ... needs information), the user was shown \
its question: pass their answer to the job with choir.core.inject.
- [INJECTED] messages are instructions from the user; follow them.
- Never reveal raw chain-of-thought."""
"""The edge lane's behaviour (§7.1, §7.2, §12.8)."""

CORE_INSTRUCTIONS: Final = """\
You are a core job of a choir agent: the deep worker. Edge briefs you; you never talk to the user.
- Execute the briefing precisely, within its constraints and tool limits.
- Work through your tools and check each result before relying on it.
- With each tool call, state your progress in one short sentence.
- Report to edge with choir.core.report: your plan, partial results worth showing, and \
need_info when only the user can supply something (the call waits for the answer).
- [INJECTED] messages are new instructions from edge; follow them.
- A reply without tool calls ends the job: make it the final result (what you did, the outcome, \
files changed, anything left open), or say exactly why you could not finish.
- Never reveal raw chain-of-thought; summarize your reasoning in a sentence at most."""
"""A core job's behaviour (§7.1, §7.3, §12.7)."""


def system_text(instructions: str, skills: Sequence[tuple[str, str]]) -> str:
    """The system prompt: lane instructions, then one line per skill (name: description)."""
    if not skills:
        return instructions
    lines = [f"- {name}: {description}" for name, description in skills]
    header = f"Skills (start one with {START_TOOL}; one at a time):"
    return "\n\n".join([instructions, "\n".join([header, *lines])])


def identity_text(file_name: str, about: str, text: str) -> str | None:
    """An identity file as a system message body; None when the file is empty."""
    body = text.strip()
    return f"[{file_name}: {about}]\n{body}" if body else None


def summary_text(summary: ReferenceSummary) -> str | None:
    """The reference summary, compactly; None while nothing has been folded into it."""
    if summary == ReferenceSummary():
        return None
    parts = [
        "[Reference summary: earlier context, folded out of the window. "
        "Find details with choir.memory.query store=working.]"
    ]
    if summary.summary:
        parts.append(summary.summary)
    if summary.facts:
        parts.append("Facts:")
        parts.extend(
            f"- {fact.key}: {fact.value} (ev {fact.source_event[:HASH_REF_CHARS]})"
            for fact in summary.facts
        )
    if summary.referenced_events:
        refs = ", ".join(ref[:HASH_REF_CHARS] for ref in summary.referenced_events)
        parts.append(f"Events: {refs}")
    if summary.referenced_sessions:
        parts.append(f"Sessions: {', '.join(summary.referenced_sessions)}")
    return "\n".join(parts)


def briefing_text(job: CoreJobStart) -> str:
    """A core job's `CoreJobStart`, as the task it reads at the end of every prompt."""
    lines = [f"[CoreJobStart: job {job.job_name}, id {job.job_id}]", f"Task: {job.task_spec}"]
    bundle = job.context_bundle
    for title, items in (
        ("Facts", bundle.facts),
        ("Excerpts", bundle.excerpts),
        ("Constraints", bundle.constraints),
    ):
        if items:
            lines.append(f"{title}:")
            lines.extend(f"- {item}" for item in items)
    limits = job.tool_constraints
    if limits.allowed_tools:
        lines.append(f"Allowed tools: {', '.join(limits.allowed_tools)}")
    if limits.time_budget_ms:
        lines.append(f"Time budget: {limits.time_budget_ms / 1000:g} s")
    if job.skill is not None:
        lines.append(f"Skill: {job.skill}")
    if job.output_schema is not None:
        lines.append(f"Final result must match this JSON Schema: {json_text(job.output_schema)}")
    if job.verbosity != "normal":
        lines.append(f"Verbosity: {job.verbosity}")
    return "\n".join(lines)
