"""Authoritative events, core events and pushes: tagged unions that round-trip exactly."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from choir.protocol import (
    CoreEvent,
    CoreJobStart,
    Event,
    PushEnvelope,
    ServerPush,
    SkillTransitionCommitted,
    ToolResult,
    ToolResultCommitted,
    validation_problems,
)

events: TypeAdapter[Any] = TypeAdapter(Event)
core_events: TypeAdapter[Any] = TypeAdapter(CoreEvent)
pushes: TypeAdapter[Any] = TypeAdapter(ServerPush)


def test_event_union_dispatches_on_kind():
    event = events.validate_python(
        {
            "kind": "tool_result_committed",
            "call_id": "c1",
            "tool": "choir.fs.read",
            "result": {"status": "success", "summary": "read 3 lines"},
        }
    )

    assert isinstance(event, ToolResultCommitted)
    assert event.result == ToolResult(status="success", summary="read 3 lines")


def test_unknown_event_kind_is_refused_with_the_known_kinds():
    with pytest.raises(ValidationError) as caught:
        events.validate_python({"kind": "tool_exploded"})

    [problem] = validation_problems(caught.value)
    assert "tool_exploded" in problem
    assert "'user_msg'" in problem


def test_skill_transition_serializes_from_under_its_wire_name():
    transition = SkillTransitionCommitted.model_validate(
        {"skill": "build_feature", "from": "plan", "to": "modify", "on": "complete"}
    )

    dumped = transition.model_dump(mode="json")

    assert transition.from_ == "plan"
    assert dumped["from"] == "plan"
    assert "from_" not in dumped
    assert SkillTransitionCommitted.model_validate_json(transition.model_dump_json()) == transition


def test_model_output_lane_is_validated():
    with pytest.raises(ValidationError, match="use 'edge' or 'core:<job-name>'"):
        events.validate_python({"kind": "model_output", "lane": "core", "model": "sonnet"})


def test_events_are_frozen():
    event = events.validate_python({"kind": "user_msg", "text": "hi"})

    with pytest.raises(ValidationError, match="frozen"):
        event.text = "changed"


@pytest.mark.parametrize(
    "document",
    [
        {"kind": "progress", "phase": "tests", "percent": 50.0},
        {"kind": "plan", "steps": [{"description": "read"}]},
        {"kind": "thought_summary", "summary": "tokens first"},
        {"kind": "tool_proposal", "tool": "choir.exec", "why": "run tests"},
        {"kind": "need_info", "question": "which branch?"},
        {"kind": "partial_result", "description": "half done"},
        {"kind": "final_result", "summary": "done"},
        {"kind": "error", "code": "llm_error", "message": "rate limited"},
    ],
)
def test_every_core_event_kind_round_trips(document: dict[str, Any]):
    event = core_events.validate_python(document)

    assert core_events.validate_python(core_events.dump_python(event, mode="json")) == event


def test_core_progress_percent_is_bounded():
    with pytest.raises(ValidationError, match="less than or equal to 100"):
        core_events.validate_python({"kind": "progress", "phase": "x", "percent": 120})


def test_core_job_start_needs_a_safe_job_name_and_valid_output_schema():
    with pytest.raises(ValidationError) as caught:
        CoreJobStart.model_validate(
            {
                "job_id": "j1",
                "job_name": "Refactor Auth",
                "task_spec": "split",
                "output_schema": {"type": 5},
            }
        )

    problems = validation_problems(caught.value)
    assert problems[0].startswith("job_name: invalid job name 'Refactor Auth'")
    assert problems[1].startswith("output_schema: not a valid JSON Schema")


def test_push_envelope_round_trips_every_kind():
    for document in [
        {"kind": "user_message", "message_id": "m", "text": "hi"},
        {"kind": "inject", "text": "also"},
        {"kind": "core_cancel", "job_name": "a"},
        {"kind": "compact"},
        {"kind": "config_changed", "config_version": 3},
        {"kind": "secrets_refreshed"},
        {"kind": "shutdown", "reason": "stop"},
        {"kind": "approval_resolved", "approval_id": "a1", "status": "rejected"},
    ]:
        envelope = PushEnvelope(session_id="s", seq=1, push=pushes.validate_python(document))
        assert PushEnvelope.model_validate_json(envelope.model_dump_json()) == envelope
