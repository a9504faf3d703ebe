"""SkillSpec state-machine validation: every ill-formed shape gets one precise, located problem."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from choir.protocol import SkillSpec, validation_problems

KNOWN = "(known: done, modify, plan, understand)"
GOLDEN = json.loads((Path(__file__).parent / "golden" / "v1" / "skills.json").read_text())


def _spec() -> dict[str, Any]:
    """The §10.1 example: understand -> plan -> modify -> validate -> done."""
    return {
        "name": "build_feature",
        "description": "Implement a feature end-to-end.",
        "initial_state": "understand",
        "states": {
            "understand": {
                "objective": "Clarify.",
                "transitions": [{"on": "complete", "to": "plan"}],
            },
            "plan": {
                "objective": "Plan.",
                "allowed_tools": ["choir.memory.query"],
                "transitions": [
                    {"on": "complete", "to": "modify"},
                    {"on": "revise", "to": "understand"},
                ],
            },
            "modify": {"objective": "Edit.", "transitions": [{"on": "complete", "to": "done"}]},
            "done": {"terminal": True},
        },
    }


def _problems(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        SkillSpec.model_validate(spec)
    return validation_problems(caught.value)


def test_the_spec_example_is_valid_and_gets_defaults():
    spec = SkillSpec.model_validate(_spec())

    assert (spec.max_steps, spec.interruptible, spec.retry_budget) == (20, True, 2)
    assert spec.error_transition is None


def _typo_in_transition(spec: dict[str, Any]) -> None:
    spec["states"]["plan"]["transitions"][1]["to"] = "modfy"


def _unknown_initial(spec: dict[str, Any]) -> None:
    spec["initial_state"] = "start"


def _no_terminal(spec: dict[str, Any]) -> None:
    spec["states"]["done"] = {"objective": "Loop.", "transitions": [{"on": "again", "to": "plan"}]}


def _terminal_with_transitions(spec: dict[str, Any]) -> None:
    spec["states"]["done"]["transitions"] = [{"on": "reopen", "to": "plan"}]


def _unreachable(spec: dict[str, Any]) -> None:
    spec["states"]["orphan"] = {
        "objective": "Never.",
        "transitions": [{"on": "complete", "to": "done"}],
    }


def _duplicate_on(spec: dict[str, Any]) -> None:
    spec["states"]["plan"]["transitions"][1]["on"] = "complete"


def _dead_end(spec: dict[str, Any]) -> None:
    spec["states"]["modify"]["transitions"] = []


def _trap(spec: dict[str, Any]) -> None:
    spec["states"]["plan"]["transitions"].append({"on": "stuck", "to": "loop"})
    spec["states"]["loop"] = {"objective": "Spin.", "transitions": [{"on": "again", "to": "loop"}]}


def _missing_objective(spec: dict[str, Any]) -> None:
    del spec["states"]["modify"]["objective"]


def _unknown_error_transition(spec: dict[str, Any]) -> None:
    spec["error_transition"] = "failed"


def _no_states(spec: dict[str, Any]) -> None:
    spec["states"] = {}


@pytest.mark.parametrize(
    ("break_it", "problem"),
    [
        (
            _typo_in_transition,
            f"states.plan.transitions[1].to: unknown state 'modfy' {KNOWN}",
        ),
        (
            _unknown_initial,
            "initial_state: unknown state 'start' (known: done, modify, plan, understand)",
        ),
        (_no_terminal, 'states: no terminal state; mark at least one state "terminal": true'),
        (
            _terminal_with_transitions,
            "states.done.transitions: a terminal state has no transitions; remove them",
        ),
        (_unreachable, "states.orphan: unreachable from initial state 'understand'"),
        (
            _duplicate_on,
            "states.plan.transitions[1].on: duplicate event 'complete' (first at transitions[0])",
        ),
        (_dead_end, 'states.modify: a non-terminal state needs a transition (or "terminal": true)'),
        (_trap, "states.loop: no path from here to a terminal state"),
        (_missing_objective, "states.modify.objective: a non-terminal state needs an objective"),
        (
            _unknown_error_transition,
            "error_transition: unknown state 'failed' (known: done, modify, plan, understand)",
        ),
        (_no_states, "states: a skill needs at least one state"),
    ],
    ids=lambda value: getattr(value, "__name__", "")[1:] or None,
)
def test_ill_formed_state_machine_gets_one_precise_problem(break_it, problem: str):
    spec = _spec()
    break_it(spec)

    assert _problems(spec) == [problem]


def test_all_problems_are_reported_together():
    spec = _spec()
    _typo_in_transition(spec)
    _unknown_initial(spec)

    assert _problems(spec) == [
        f"initial_state: unknown state 'start' {KNOWN}; "
        f"states.plan.transitions[1].to: unknown state 'modfy' {KNOWN}"
    ]


def test_error_transition_makes_its_target_reachable():
    spec = _spec()
    spec["states"]["failed"] = {"terminal": True}
    spec["error_transition"] = "failed"

    assert SkillSpec.model_validate(spec).error_transition == "failed"


def test_allowed_tools_must_be_tool_names():
    spec = _spec()
    spec["states"]["plan"]["allowed_tools"] = ["memory query"]

    [problem] = _problems(spec)
    assert problem.startswith("states.plan.allowed_tools[0]: invalid tool name 'memory query'")


def test_input_schema_must_be_a_json_schema():
    spec = _spec()
    spec["input_schema"] = {"type": "objekt"}

    [problem] = _problems(spec)
    assert problem.startswith("input_schema: not a valid JSON Schema (Draft 2020-12) at type:")


def test_unknown_tools_are_listed_against_a_registry():
    spec = SkillSpec.model_validate(GOLDEN["skill_spec"])

    problems = spec.unknown_tools({"choir.memory.query", "choir.fs.read"})

    assert problems == ["states.modify.allowed_tools[1]: unknown tool 'choir.fs.write'"]


def test_spec_is_frozen_and_rejects_unknown_keys():
    spec = copy.deepcopy(_spec())
    spec["states"]["plan"]["alowed_tools"] = []

    [problem] = _problems(spec)
    assert problem == "states.plan.alowed_tools: Extra inputs are not permitted"
