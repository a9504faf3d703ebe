"""A core job's event stream (§12.7): the structured, bounded things a job tells edge.

The job loop emits `progress`, `thought_summary`, `tool_proposal`, `final_result` and `error`
itself; the model reports `plan`, `progress`, `partial_result` and `need_info` through the
core-only tool `choir.core.report`, whose arguments `report_event` turns into a `CoreEvent`.
Everything is clipped or refused beyond fixed sizes, so a chatty model cannot flood edge's
window, the log or the user's DM — and nothing here ever carries raw chain-of-thought, only
what the model chose to state.

`relay` decides what the user hears of a job through edge's DM: a `need_info` question always
(the job waits for the answer), a plan or a partial result unless the briefing asked for
`brief`, a reported progress only for `detailed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, NamedTuple

from pydantic import ValidationError

from choir.agent.kernel.workspace import PathOutsideWorkspace, Workspace
from choir.core.prompt.window import json_text
from choir.protocol import CoreEvent, CoreJobStart, ToolResult, validation_problems
from choir.protocol.input_fix import pydantic_fix
from choir.protocol.log.core_jobs import (
    CoreNeedInfo,
    CorePartialResult,
    CorePlan,
    CoreProgress,
    PlanStep,
)

REPORT_TOOL: Final = "choir.core.report"
"""The core-only tool through which the model reports on its job."""
FOCUS_CHARS: Final = 120
"""Longest `focus` a progress event carries."""
SUMMARY_CHARS: Final = 500
"""Longest `thought_summary` an event carries: the visible text of a tool-calling step."""
ARG_CHARS: Final = 200
"""Longest string argument a `tool_proposal` event carries; longer ones are clipped."""
DATA_CHARS: Final = 4_000
"""Largest `partial_result` data, written out as JSON; bigger results belong in a file."""
RELAY_CHARS: Final = 600
"""Longest text the user's DM gets for one plan or partial result."""

BUDGET_EXCEEDED: Final = "budget_exceeded"
"""error_code of a call refused for a budget, and code of the `error` event of a job that ran
out of one (§7.6)."""

Outcome = Literal["completed", "terminated", "cancelled"]


class Ended(NamedTuple):
    """How a job ended: its outcome, its report, and the `error` event's code when known."""

    outcome: Outcome
    report: str
    code: str | None = None
    """None derives it from the outcome and report (`error_code`)."""


Verbosity = Literal["brief", "normal", "detailed"]
RelayCategory = Literal["core_question", "core_update"]


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def focus(start: CoreJobStart) -> str:
    """What the job is on, for its progress event: the first line of its task, clipped."""
    task = start.task_spec.strip()
    return task.splitlines()[0][:FOCUS_CHARS] if task else ""


def args_view(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments for its `tool_proposal` event: long strings clipped, and a
    nested value longer than ARG_CHARS once written out replaced by its clipped text."""
    view: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str):
            view[key] = clip(value, ARG_CHARS)
        elif isinstance(value, (dict, list)) and len(text := json_text(value)) > ARG_CHARS:
            view[key] = clip(text, ARG_CHARS)
        else:
            view[key] = value
    return view


def error_code(outcome: Outcome, report: str) -> str:
    """The `code` of the `error` event a job that did not complete ends with."""
    if outcome == "cancelled":
        return "cancelled"
    if report.startswith("the model call failed"):
        return "llm_error"
    return BUDGET_EXCEEDED if "budget" in report else "job_failed"


def report_event(arguments: Mapping[str, Any], workspace: Workspace) -> CoreEvent | ToolResult:
    """The `CoreEvent` a `choir.core.report` call states, or the refusal saying what to fix.

    The manifest's schema has already bounded every field; this adds what a schema cannot say
    per kind (which fields each needs) and checks an artifact is a workspace file.
    """
    kind, text = str(arguments.get("kind", "")), str(arguments.get("text", "")).strip()
    try:
        match kind:
            case "plan":
                steps = arguments.get("steps") or []
                if not steps:
                    return _invalid("a plan needs its steps: pass steps=[{description: ...}]")
                return CorePlan(steps=[PlanStep.model_validate(step) for step in steps])
            case "progress":
                phase = str(arguments.get("phase") or "").strip()
                if not (text or phase):
                    return _invalid("progress needs text (your focus) or a phase")
                percent = arguments.get("percent")
                return CoreProgress(phase=phase or "working", focus=text, percent=percent)
            case "need_info":
                if not text:
                    return _invalid("need_info needs text: the question for the user")
                return CoreNeedInfo(question=text, missing=list(arguments.get("missing") or []))
            case "partial_result":
                return _partial(text, arguments, workspace)
    except ValidationError as exc:
        return _invalid(f"{validation_problems(exc)[0]}; {pydantic_fix(exc)}")
    return _invalid(f"unknown kind {kind!r}: use plan, progress, partial_result or need_info")


def _partial(
    text: str, arguments: Mapping[str, Any], workspace: Workspace
) -> CorePartialResult | ToolResult:
    if not text:
        return _invalid("partial_result needs text: what the intermediate result is")
    data = dict(arguments.get("data") or {})
    if len(json_text(data)) > DATA_CHARS:
        return _invalid(
            f"data is larger than {DATA_CHARS} characters: write it to a workspace file and "
            "pass its path as artifact"
        )
    artifact = arguments.get("artifact")
    if artifact is not None:
        try:
            artifact = workspace.resolve(str(artifact))
            workspace.stat(artifact)
        except PathOutsideWorkspace as exc:
            return ToolResult.fail(exc.error_code, exc.message)
        except OSError:
            return _invalid(f"artifact {arguments['artifact']!r} is not a file in the workspace")
    return CorePartialResult(description=text, data=data, artifact_ref=artifact)


def relay(
    job_name: str, event: CoreEvent, verbosity: Verbosity
) -> tuple[RelayCategory, str] | None:
    """What the user's DM gets for a reported event, by the briefing's verbosity; None: nothing."""
    match event:
        case CoreNeedInfo(question=question, missing=missing):
            extra = f" (missing: {'; '.join(missing)})" if missing else ""
            return "core_question", f"core job {job_name} needs information: {question}{extra}"
        case CorePlan(steps=steps) if verbosity != "brief":
            lines = "; ".join(f"{n}. {step.description}" for n, step in enumerate(steps, 1))
            return "core_update", clip(f"core job {job_name} plan: {lines}", RELAY_CHARS)
        case CorePartialResult(description=description, artifact_ref=artifact) if (
            verbosity != "brief"
        ):
            where = f" ({artifact})" if artifact else ""
            text = f"core job {job_name} partial result: {description}{where}"
            return "core_update", clip(text, RELAY_CHARS)
        case CoreProgress(phase=phase, focus=on, percent=percent) if verbosity == "detailed":
            done = f" {percent:g}%" if percent is not None else ""
            return "core_update", clip(f"core job {job_name} {phase}{done}: {on}", RELAY_CHARS)
    return None


def _invalid(message: str) -> ToolResult:
    return ToolResult.fail("invalid_input", f"invalid report: {message}")


__all__ = [
    "ARG_CHARS",
    "BUDGET_EXCEEDED",
    "FOCUS_CHARS",
    "REPORT_TOOL",
    "SUMMARY_CHARS",
    "Ended",
    "Outcome",
    "args_view",
    "clip",
    "error_code",
    "focus",
    "relay",
    "report_event",
]
