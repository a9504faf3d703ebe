"""`choir.core.report` arguments → `CoreEvent`s, and what the user's DM is told of them (§12.7)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from choir.agent.kernel.workspace import Workspace
from choir.agent.lanes.core.stream import DATA_CHARS, args_view, error_code, relay, report_event
from choir.protocol import ToolResult
from choir.protocol.log.core_jobs import (
    CoreNeedInfo,
    CorePartialResult,
    CorePlan,
    CoreProgress,
    PlanStep,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "draft.md").write_text("# draft\n")
    with Workspace(tmp_path) as workspace:
        yield workspace


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"kind": "plan", "steps": [{"description": "read"}, {"description": "write"}]},
            CorePlan(steps=[PlanStep(description="read"), PlanStep(description="write")]),
        ),
        (
            {"kind": "progress", "phase": "tests", "text": "auth module", "percent": 40},
            CoreProgress(phase="tests", focus="auth module", percent=40),
        ),
        ({"kind": "progress", "text": "reading"}, CoreProgress(phase="working", focus="reading")),
        (
            {"kind": "need_info", "text": "Which branch?", "missing": ["branch name"]},
            CoreNeedInfo(question="Which branch?", missing=["branch name"]),
        ),
        (
            {"kind": "partial_result", "text": "first half", "data": {"rows": 2}},
            CorePartialResult(description="first half", data={"rows": 2}),
        ),
        (
            {"kind": "partial_result", "text": "draft", "artifact": "./out/../out/draft.md"},
            CorePartialResult(description="draft", artifact_ref="out/draft.md"),
        ),
    ],
    ids=["plan", "progress", "progress-no-phase", "need_info", "partial-data", "partial-file"],
)
def test_a_report_becomes_its_event(
    workspace: Workspace, arguments: dict[str, Any], expected: object
) -> None:
    assert report_event(arguments, workspace) == expected


@pytest.mark.parametrize(
    ("arguments", "code", "says"),
    [
        ({"kind": "plan"}, "invalid_input", "a plan needs its steps"),
        ({"kind": "progress"}, "invalid_input", "progress needs text"),
        ({"kind": "need_info", "text": "  "}, "invalid_input", "need_info needs text"),
        ({"kind": "partial_result"}, "invalid_input", "partial_result needs text"),
        ({"kind": "verdict", "text": "x"}, "invalid_input", "unknown kind 'verdict'"),
        (
            {"kind": "progress", "text": "x", "percent": 140},
            "invalid_input",
            "less than or equal to 100",
        ),
        (
            {"kind": "partial_result", "text": "x", "data": {"blob": "y" * DATA_CHARS}},
            "invalid_input",
            "write it to a workspace file",
        ),
        (
            {"kind": "partial_result", "text": "x", "artifact": "../etc/passwd"},
            "path_outside_workspace",
            "path outside workspace: ../etc/passwd",
        ),
        (
            {"kind": "partial_result", "text": "x", "artifact": "out/none.md"},
            "invalid_input",
            "'out/none.md' is not a file in the workspace",
        ),
    ],
)
def test_a_bad_report_is_refused_saying_what_to_fix(
    workspace: Workspace, arguments: dict[str, Any], code: str, says: str
) -> None:
    refused = report_event(arguments, workspace)
    assert isinstance(refused, ToolResult)
    assert refused.error_code == code
    assert says in refused.summary


PLAN = CorePlan(steps=[PlanStep(description="read"), PlanStep(description="write")])
QUESTION = CoreNeedInfo(question="Which branch?", missing=["name", "base"])
PARTIAL = CorePartialResult(description="half done", artifact_ref="out/draft.md")
PROGRESS = CoreProgress(phase="tests", focus="auth", percent=50)


@pytest.mark.parametrize(
    ("event", "verbosity", "expected"),
    [
        (
            QUESTION,
            "brief",
            (
                "core_question",
                "core job fix needs information: Which branch? (missing: name; base)",
            ),
        ),
        (PLAN, "brief", None),
        (PLAN, "normal", ("core_update", "core job fix plan: 1. read; 2. write")),
        (
            PARTIAL,
            "normal",
            ("core_update", "core job fix partial result: half done (out/draft.md)"),
        ),
        (PARTIAL, "brief", None),
        (PROGRESS, "normal", None),
        (PROGRESS, "detailed", ("core_update", "core job fix tests 50%: auth")),
    ],
)
def test_the_user_hears_what_the_briefings_verbosity_asks_for(
    event: Any, verbosity: Any, expected: tuple[str, str] | None
) -> None:
    assert relay("fix", event, verbosity) == expected


def test_a_long_plan_is_clipped_for_the_dm() -> None:
    steps = [PlanStep(description="s" * 300) for _ in range(20)]
    told = relay("fix", CorePlan(steps=steps), "normal")
    assert told is not None
    assert len(told[1]) == 600
    assert told[1].endswith("\u2026")


def test_tool_proposal_arguments_are_clipped() -> None:
    view = args_view({"command": "x" * 500, "n": 3, "nested": {"k": "v" * 400}})
    assert len(view["command"]) == 200
    assert view["n"] == 3
    assert isinstance(view["nested"], str)
    assert len(view["nested"]) == 200


@pytest.mark.parametrize(
    ("outcome", "report", "code"),
    [
        ("cancelled", "cancelled by edge", "cancelled"),
        ("terminated", "the model call failed: 500", "llm_error"),
        ("terminated", "per_job_max_steps budget exceeded", "budget_exceeded"),
        ("terminated", "the job failed: boom", "job_failed"),
    ],
)
def test_a_job_that_did_not_complete_ends_with_a_stable_error_code(
    outcome: Any, report: str, code: str
) -> None:
    assert error_code(outcome, report) == code
