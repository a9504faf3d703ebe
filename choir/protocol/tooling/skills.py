"""Skill specs (§10.1): deterministic state machines whose states allow a set of tools.

A spec is checked as a whole when it is parsed (§8.8 skill loading, step 3): every problem is
reported with its location, e.g. `states.plan.transitions[1].to: unknown state 'modfy' (known:
done, modify, plan, understand)`. Checking allowed tools against a tool registry needs the
registry, so it is a separate call: `SkillSpec.unknown_tools`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any, Self

from pydantic import Field, field_validator, model_validator

from choir.protocol.base import WireModel
from choir.protocol.json_schema import ensure_json_schema
from choir.protocol.names import EventName, SkillName, StateName, ToolName
from choir.protocol.problems import invalid


class Transition(WireModel):
    """An edge of the skill graph: the model proposes `on`, the arbiter moves to `to`."""

    on: EventName
    """The event the model proposes, e.g. `complete`, `revise`, `fail`."""
    to: StateName
    """The state entered on that event."""


class SkillState(WireModel):
    """One phase of a skill: what to achieve, with which tools, and where to go next."""

    objective: str = ""
    """What the model must achieve in this state; it sees only this phase (§10.2)."""
    allowed_tools: list[ToolName] = Field(default_factory=list)
    """The only tools the model may call in this state."""
    transitions: list[Transition] = Field(default_factory=list)
    """Where the model may go next; empty only for terminal states."""
    terminal: bool = False
    """The skill ends when it enters a terminal state."""


class SkillSpec(WireModel):
    """One skill: `skills/<name>.json` in a repo, `/choir/skills/<name>.json` in an image."""

    name: SkillName
    """Unique skill name; the file is `skills/<name>.json`."""
    description: str = Field(min_length=1)
    """One line shown to the model in the skill summary of its system prompt."""
    initial_state: StateName
    """The state the skill starts in."""
    input_schema: dict[str, Any] | None = None
    """JSON Schema of the skill's input, if it takes one."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema of the skill's result, if it produces one."""
    states: dict[StateName, SkillState]
    """State name -> state; must form a well-formed machine."""
    max_steps: int = Field(default=20, ge=1)
    """Most LLM steps the skill may take before it is stopped."""
    interruptible: bool = True
    """Whether cancel and injection may interrupt the skill between safe points."""
    retry_budget: int = Field(default=2, ge=0)
    """Corrections allowed per step after an invalid tool call or transition (§10.2)."""
    error_transition: StateName | None = None
    """State entered when a step exhausts its retry budget; None ends the skill with an error."""

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _is_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if schema is None else ensure_json_schema(schema)

    @model_validator(mode="after")
    def _well_formed(self) -> Self:
        problems = skill_problems(self)
        if problems:
            raise invalid("; ".join(problems))
        return self

    def unknown_tools(self, known: Collection[str]) -> list[str]:
        """One problem per allowed tool that is not in `known` (§8.8 skill loading, step 4)."""
        return [
            f"states.{name}.allowed_tools[{index}]: unknown tool {tool!r}"
            for name, state in self.states.items()
            for index, tool in enumerate(state.allowed_tools)
            if tool not in known
        ]


def skill_problems(spec: SkillSpec) -> list[str]:
    """Every way the state machine is ill-formed; empty when it is sound."""
    if not spec.states:
        return ["states: a skill needs at least one state"]
    known = ", ".join(sorted(spec.states))
    problems = [*_reference_problems(spec, known)]
    for name, state in spec.states.items():
        problems.extend(_state_problems(name, state, spec.states.keys(), known))
    if not any(state.terminal for state in spec.states.values()):
        problems.append('states: no terminal state; mark at least one state "terminal": true')
    if not problems:
        problems.extend(_graph_problems(spec))
    return problems


def _reference_problems(spec: SkillSpec, known: str) -> Iterator[str]:
    if spec.initial_state not in spec.states:
        yield f"initial_state: unknown state {spec.initial_state!r} (known: {known})"
    if spec.error_transition is not None and spec.error_transition not in spec.states:
        yield f"error_transition: unknown state {spec.error_transition!r} (known: {known})"


def _state_problems(
    name: str, state: SkillState, names: Collection[str], known: str
) -> Iterator[str]:
    where = f"states.{name}"
    if state.terminal and state.transitions:
        yield f"{where}.transitions: a terminal state has no transitions; remove them"
    if not state.terminal and not state.transitions:
        yield f'{where}: a non-terminal state needs a transition (or "terminal": true)'
    if not state.terminal and not state.objective.strip():
        yield f"{where}.objective: a non-terminal state needs an objective"
    first_index: dict[str, int] = {}
    for index, transition in enumerate(state.transitions):
        at = f"{where}.transitions[{index}]"
        if transition.to not in names:
            yield f"{at}.to: unknown state {transition.to!r} (known: {known})"
        if transition.on in first_index:
            first = first_index[transition.on]
            yield f"{at}.on: duplicate event {transition.on!r} (first at transitions[{first}])"
        first_index.setdefault(transition.on, index)


def _graph_problems(spec: SkillSpec) -> Iterator[str]:
    forward = {name: {t.to for t in state.transitions} for name, state in spec.states.items()}
    if spec.error_transition is not None:
        for name, state in spec.states.items():
            if not state.terminal:
                forward[name].add(spec.error_transition)
    reachable = _closure({spec.initial_state}, forward)
    backward: dict[str, set[str]] = {name: set() for name in spec.states}
    for name, state in spec.states.items():
        for transition in state.transitions:
            backward[transition.to].add(name)
    finishing = _closure({n for n, s in spec.states.items() if s.terminal}, backward)
    for name in spec.states:
        if name not in reachable:
            yield f"states.{name}: unreachable from initial state {spec.initial_state!r}"
        elif name not in finishing:
            yield f"states.{name}: no path from here to a terminal state"


def _closure(start: set[str], edges: dict[str, set[str]]) -> set[str]:
    seen = set(start)
    frontier = list(start)
    while frontier:
        for successor in edges[frontier.pop()]:
            if successor not in seen:
                seen.add(successor)
                frontier.append(successor)
    return seen
