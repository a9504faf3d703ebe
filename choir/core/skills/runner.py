"""The skill runner of §10.2: one lane's active skill as a pure state machine.

Core computes, edge acts. Every function takes the lane's `SkillRun` (None before the lane's first
skill) and the skill registry, and returns data: a `Decision` holding the events the arbiter must
commit, in order, and the run those events lead to. Nothing here waits, blocks or does I/O.

The model drives skills with two control tools. `choir.skill.start {skill, input?}` starts one
when none is active; `choir.skill.transition {on}` proposes a transition of the active skill and
is always allowed while one runs. Everything else a skill allows is listed per state; any other
call, an invalid transition, or a second start (skills never nest, §10.2) is a violation that
uses one of the step's corrections (`retry_budget`, reset by every transition). The violation
after the last correction takes the error transition: to the spec's `error_transition` state, or
— without one — the skill fails where it stands.

The run is a fold of the lane's committed events (`fold`), so crash recovery (§13.2) rebuilds it:
- `SkillTransitionCommitted` starts (`from` null), moves or ends the skill. Its `on` is the
  model's event or one the runner reserves (`RESERVED_EVENTS`): `start`, `error`, and
  `max_steps` / `interrupted`, which end the skill in place (`to` is the current state).
- `ModelOutput`: one LLM step of the active skill.
- `ToolResultCommitted` carrying a violation code (`VIOLATION_CODES`): one correction used.
Each decision computes its run by folding its own effects, so live and replayed state agree.
The lane checks `begin_step` before every LLM call: a skill gets `max_steps` calls, no more.

A skill's input is checked against its `input_schema` at start and then stays where the model
put it: in the lane's history, as the arguments of its `choir.skill.start` call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Literal, TypeGuard

from choir.protocol.input_fix import invalid_input, schema_fix
from choir.protocol.json_schema import compile_schema, violation_errors, violation_line
from choir.protocol.log.events import (
    Event,
    ModelOutput,
    SkillTransitionCommitted,
    ToolCall,
    ToolResultCommitted,
)
from choir.protocol.log.snapshot import SkillProgress
from choir.protocol.tooling.manifest import LlmView
from choir.protocol.tooling.skills import SkillSpec
from choir.protocol.tooling.tools import ToolResult

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaViolation

START_TOOL: Final = "choir.skill.start"
TRANSITION_TOOL: Final = "choir.skill.transition"
CONTROL_TOOLS: Final = frozenset({START_TOOL, TRANSITION_TOOL})

START_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "skill": {"type": "string", "description": "Name of the skill to start."},
        "input": {"description": "The skill's input, matching its input schema, if it has one."},
    },
    "required": ["skill"],
    "additionalProperties": False,
}
"""JSON Schema of `choir.skill.start`'s arguments."""

TRANSITION_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "on": {"type": "string", "description": "A transition event of the current state."},
    },
    "required": ["on"],
    "additionalProperties": False,
}
"""JSON Schema of `choir.skill.transition`'s arguments."""

START: Final = "start"
ERROR: Final = "error"
MAX_STEPS: Final = "max_steps"
INTERRUPTED: Final = "interrupted"
RESERVED_EVENTS: Final = frozenset({START, ERROR, MAX_STEPS, INTERRUPTED})
"""Transition events the runner commits itself; a skill may not name its own transitions so."""

TOOL_NOT_ALLOWED: Final = "skill_tool_not_allowed"
INVALID_TRANSITION: Final = "skill_invalid_transition"
ALREADY_ACTIVE: Final = "skill_already_active"
VIOLATION_CODES: Final = frozenset({TOOL_NOT_ALLOWED, INVALID_TRANSITION, ALREADY_ACTIVE})
"""Error codes of results that use one correction of the current step."""
RETRIES_EXHAUSTED: Final = "skill_retries_exhausted"
NOT_ACTIVE: Final = "skill_not_active"
UNKNOWN_SKILL: Final = "skill_unknown"
INVALID_INPUT: Final = "invalid_input"
NOT_INTERRUPTIBLE: Final = "skill_not_interruptible"

Outcome = Literal["completed", "failed", "max_steps", "interrupted"]
"""How a skill ended: a terminal state, the error transition, max_steps, or an interrupt."""
_IN_PLACE_ENDINGS: Final[dict[str, Outcome]] = {MAX_STEPS: "max_steps", INTERRUPTED: "interrupted"}
Effect = SkillTransitionCommitted | ToolResultCommitted
"""An event the arbiter commits on the runner's behalf."""


@dataclass(frozen=True, slots=True)
class SkillRun:
    """Where a lane's latest skill stands; the skill is active while `outcome` is None."""

    skill: str
    """The skill's name."""
    state: str
    """The current state (the state it ended in, once finished)."""
    steps_taken: int = 0
    """LLM steps taken since the skill started, against `max_steps`."""
    retries_used: int = 0
    """Corrections used in the current state, against `retry_budget`."""
    outcome: Outcome | None = None
    """None while the skill runs; how it ended otherwise."""

    @property
    def active(self) -> bool:
        return self.outcome is None


@dataclass(frozen=True, slots=True)
class Allowed:
    """The tool call may go on through the arbiter's usual pipeline (locks, execution)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What the runner decided: events to commit, in order, and the run they lead to."""

    run: SkillRun | None
    """The lane's skill state once `effects` are committed."""
    effects: tuple[Effect, ...] = ()
    """Events for the arbiter to commit, in this order."""

    @property
    def result(self) -> ToolResult | None:
        """The answer to the proposed tool call, if the decision answers one."""
        answers = (e.result for e in self.effects if isinstance(e, ToolResultCommitted))
        return next(answers, None)


@dataclass(frozen=True, slots=True)
class Refused:
    """The active skill cannot be interrupted (`interruptible: false`)."""

    error_code: str
    """Stable reason: `skill_not_interruptible`."""
    summary: str
    """One line for the log and the operator."""
    skill: str
    """The skill that refused."""
    state: str
    """Its current state."""


@dataclass(frozen=True, slots=True)
class SkillView:
    """What a lane's prompt shows of its active skill: the current phase only (§10.2)."""

    skill: str
    state: str
    objective: str
    allowed_tools: tuple[str, ...]
    """The state's tools plus `choir.skill.transition`."""
    transitions: tuple[tuple[str, str], ...]
    """(on, to) pairs the model may propose."""
    steps_left: int
    retries_left: int

    def render(self) -> str:
        """The prompt block, a few lines of plain text."""
        moves = ", ".join(f"{on} -> {to}" for on, to in self.transitions)
        return "\n".join(
            [
                f"Active skill: {self.skill}, state {self.state!r} ({self.steps_left} steps left)",
                f"Objective: {self.objective}",
                f"Allowed tools: {', '.join(self.allowed_tools)}",
                f'Transitions (call {TRANSITION_TOOL} with {{"on": ...}}): {moves}',
                f"Corrections left in this state: {self.retries_left}",
            ]
        )


@cache
def control_tool_views() -> tuple[LlmView, LlmView]:
    """LLM-facing manifests of the two control tools, for the tool registry.

    Built once: they are constants, and building one checks its schema against Draft 2020-12 —
    ~11 % of choir-agent's CPU per step when every step rebuilt them. `LlmView` is frozen.
    """
    start = LlmView(
        name=START_TOOL,
        description="Start one of your skills (listed in the system prompt). Only one skill "
        "runs at a time; while it runs, only its current state's tools are allowed.",
        parameters=START_PARAMETERS,
    )
    transition = LlmView(
        name=TRANSITION_TOOL,
        description="Move the active skill to its next state with one of the current state's "
        "transition events (e.g. complete, revise).",
        parameters=TRANSITION_PARAMETERS,
    )
    return start, transition


def is_active(run: SkillRun | None) -> TypeGuard[SkillRun]:
    """Whether the lane has a running skill."""
    return run is not None and run.active


def propose(
    run: SkillRun | None, call: ToolCall, skills: Mapping[str, SkillSpec]
) -> Allowed | Decision:
    """The runner's answer to one proposed tool call: let it through, or decide it here."""
    verdict = check_tool(run, call, skills)
    if isinstance(verdict, Decision):
        return verdict
    if call.name == START_TOOL:
        return _start(run, call, skills)
    if is_active(run) and call.name == TRANSITION_TOOL:
        return _transition(run, call, skills)
    return verdict


def check_tool(
    run: SkillRun | None, call: ToolCall, skills: Mapping[str, SkillSpec]
) -> Allowed | Decision:
    """Allowed, or the rejection (a violation while a skill runs) with its effects."""
    if not is_active(run):
        if call.name != TRANSITION_TOOL:
            return Allowed()
        return _refuse(run, call, NOT_ACTIVE, f"no skill is active; start one with {START_TOOL}")
    spec = skills[run.skill]
    if call.name == TRANSITION_TOOL or call.name in spec.states[run.state].allowed_tools:
        return Allowed()
    if call.name == START_TOOL:
        why = f"skill {run.skill!r} is still active and skills do not nest"
        return _violation(run, call, skills, ALREADY_ACTIVE, why)
    why = f"tool {call.name!r} is not allowed in state {run.state!r} of skill {run.skill!r}"
    return _violation(run, call, skills, TOOL_NOT_ALLOWED, why)


def begin_step(run: SkillRun | None, skills: Mapping[str, SkillSpec]) -> Decision:
    """Before a lane's LLM call: ends the skill once it has taken `max_steps` steps."""
    if not is_active(run) or run.steps_taken < skills[run.skill].max_steps:
        return Decision(run)
    return _decide(run, (_commit(run, run.state, MAX_STEPS),), skills)


def interrupt(run: SkillRun | None, skills: Mapping[str, SkillSpec]) -> Decision | Refused:
    """Cancel or injection reached the lane: ends an interruptible skill, or refuses."""
    if not is_active(run):
        return Decision(run)
    if not skills[run.skill].interruptible:
        summary = f"skill {run.skill!r} is not interruptible; wait until it ends"
        return Refused(NOT_INTERRUPTIBLE, summary, run.skill, run.state)
    return _decide(run, (_commit(run, run.state, INTERRUPTED),), skills)


def prompt_view(run: SkillRun | None, skills: Mapping[str, SkillSpec]) -> SkillView | None:
    """The current phase of the active skill, or None when the lane runs no skill."""
    if not is_active(run):
        return None
    spec = skills[run.skill]
    state = spec.states[run.state]
    return SkillView(
        skill=run.skill,
        state=run.state,
        objective=state.objective,
        allowed_tools=(*state.allowed_tools, TRANSITION_TOOL),
        transitions=tuple((t.on, t.to) for t in state.transitions),
        steps_left=max(spec.max_steps - run.steps_taken, 0),
        retries_left=spec.retry_budget - run.retries_used,
    )


def apply(run: SkillRun | None, event: Event, skills: Mapping[str, SkillSpec]) -> SkillRun | None:
    """The run after one committed event of the lane (events of other kinds change nothing)."""
    if isinstance(event, SkillTransitionCommitted):
        return _moved(run, event, skills)
    if not is_active(run):
        return run
    if isinstance(event, ModelOutput):
        return replace(run, steps_taken=run.steps_taken + 1)
    if isinstance(event, ToolResultCommitted) and event.result.error_code in VIOLATION_CODES:
        return replace(run, retries_used=run.retries_used + 1)
    return run


def fold(
    events: Iterable[Event], skills: Mapping[str, SkillSpec], run: SkillRun | None = None
) -> SkillRun | None:
    """Replay one lane's committed events, in order, from `run` (a snapshot's, or none)."""
    for event in events:
        run = apply(run, event, skills)
    return run


def to_progress(run: SkillRun | None, skills: Mapping[str, SkillSpec]) -> SkillProgress | None:
    """The snapshot form of an active run (§13.4); None when no skill is active."""
    if not is_active(run):
        return None
    left = skills[run.skill].retry_budget - run.retries_used
    return SkillProgress(
        skill=run.skill, state=run.state, steps_taken=run.steps_taken, retries_left=left
    )


def from_progress(progress: SkillProgress, skills: Mapping[str, SkillSpec]) -> SkillRun:
    """The run a snapshot recorded; failed if the skill or state no longer exists."""
    spec = skills.get(progress.skill)
    run = SkillRun(progress.skill, progress.state, steps_taken=progress.steps_taken)
    if spec is None or progress.state not in spec.states:
        return replace(run, outcome="failed")
    return replace(run, retries_used=max(spec.retry_budget - progress.retries_left, 0))


def _start(run: SkillRun | None, call: ToolCall, skills: Mapping[str, SkillSpec]) -> Decision:
    errors = violation_errors(compile_schema(START_PARAMETERS), call.arguments)
    if errors:
        return _invalid(run, call, errors, "arguments")
    spec = skills.get(call.arguments["skill"])
    if spec is None:
        known = sorted(skills)
        summary = f"unknown skill {call.arguments['skill']!r} (known: {', '.join(known)})"
        return _refuse(run, call, UNKNOWN_SKILL, summary, known_skills=known)
    if spec.input_schema is not None and "input" not in call.arguments:
        problem = f"skill {spec.name!r} needs an input matching its input schema"
        answer = invalid_input(START_TOOL, [problem], "add the argument input")
        return Decision(run, (_answer(call, answer),))
    if spec.input_schema is not None:
        errors = violation_errors(compile_schema(spec.input_schema), call.arguments["input"])
        if errors:
            return _invalid(run, call, errors, "input")
    entry = SkillTransitionCommitted(skill=spec.name, from_=None, to=spec.initial_state, on=START)
    started = apply(run, entry, skills)
    result = ToolResult.ok(f"started skill {spec.name!r}", **_state_data(started, skills))
    return _decide(run, (entry, _answer(call, result)), skills)


def _refuse(run: SkillRun | None, call: ToolCall, code: str, summary: str, **data: Any) -> Decision:
    """Answer `call` with an error that changes nothing (not a violation of an active skill)."""
    return Decision(run, (_answer(call, ToolResult.fail(code, summary, **data)),))


def _invalid(
    run: SkillRun | None, call: ToolCall, errors: list[SchemaViolation], root: str
) -> Decision:
    """Refuse a start whose `root` (its arguments, or the skill's input) breaks its schema,
    naming the fix."""
    problems = [_under(root, violation_line(error)) for error in errors]
    fix = schema_fix(errors[0], "" if root == "arguments" else root)
    return Decision(run, (_answer(call, invalid_input(START_TOOL, problems, fix)),))


def _under(root: str, problem: str) -> str:
    """Root a `violations` line at `root`: `(input): x` -> `input: x`, `a: x` -> `input.a: x`."""
    if problem.startswith("(input)"):
        return root + problem.removeprefix("(input)")
    return f"{root}{'' if problem.startswith('[') else '.'}{problem}"


def _transition(run: SkillRun, call: ToolCall, skills: Mapping[str, SkillSpec]) -> Decision:
    on = call.arguments.get("on")
    state = skills[run.skill].states[run.state]
    target = next((t.to for t in state.transitions if t.on == on), None)
    if target is None or not isinstance(on, str) or on in RESERVED_EVENTS:
        why = f"{on!r} is not a transition of state {run.state!r} of skill {run.skill!r}"
        return _violation(run, call, skills, INVALID_TRANSITION, why)
    move = _commit(run, target, on)
    moved = apply(run, move, skills)
    summary = f"skill {run.skill!r} moved from {run.state!r} to {target!r}"
    if moved is not None and moved.outcome is not None:
        summary += f"; the skill is {moved.outcome}"
    return _decide(
        run, (move, _answer(call, ToolResult.ok(summary, **_state_data(moved, skills)))), skills
    )


def _violation(
    run: SkillRun, call: ToolCall, skills: Mapping[str, SkillSpec], code: str, why: str
) -> Decision:
    spec = skills[run.skill]
    left = spec.retry_budget - run.retries_used
    if left > 0:
        data = _options(run, skills) | {"retries_left": left - 1}
        tools = ", ".join(data["allowed_tools"])
        events = ", ".join(t["on"] for t in data["valid_transitions"])
        hint = f"allowed tools: {tools}; transitions: {events}; {left - 1} correction(s) left"
        result = ToolResult.fail(code, f"{why} ({hint})", **data)
        return _decide(run, (_answer(call, result),), skills)
    target = spec.error_transition or run.state
    error = _commit(run, target, ERROR)
    ended = apply(run, error, skills)
    after = f"moved to {target!r}" if is_active(ended) else "failed"
    summary = f"{why}; no corrections left, so the skill {after}"
    data = {"violation": code} | _state_data(ended, skills)
    result = ToolResult.fail(RETRIES_EXHAUSTED, summary, **data)
    return _decide(run, (_answer(call, result), error), skills)


def _moved(
    run: SkillRun | None, event: SkillTransitionCommitted, skills: Mapping[str, SkillSpec]
) -> SkillRun:
    """Follow the log: the event says where the skill is now, and how it ended, if it did."""
    steps = 0
    if is_active(run) and run.skill == event.skill and event.from_ is not None:
        steps = run.steps_taken
    moved = SkillRun(event.skill, event.to, steps_taken=steps)
    spec = skills.get(event.skill)
    if spec is None or event.to not in spec.states:
        return replace(moved, outcome="failed")
    if event.from_ is not None and event.on in _IN_PLACE_ENDINGS:
        return replace(moved, outcome=_IN_PLACE_ENDINGS[event.on])
    terminal = spec.states[event.to].terminal
    if event.from_ is not None and event.on == ERROR:
        return replace(moved, outcome="failed") if terminal or not spec.error_transition else moved
    return replace(moved, outcome="completed") if terminal else moved


def _decide(
    run: SkillRun | None, effects: tuple[Effect, ...], skills: Mapping[str, SkillSpec]
) -> Decision:
    return Decision(fold(effects, skills, run), effects)


def _commit(run: SkillRun, to: str, on: str) -> SkillTransitionCommitted:
    return SkillTransitionCommitted(skill=run.skill, from_=run.state, to=to, on=on)


def _answer(call: ToolCall, result: ToolResult) -> ToolResultCommitted:
    """The committed answer to `call`: how the model learns what the runner decided."""
    return ToolResultCommitted(call_id=call.id, tool=call.name, result=result)


def _options(run: SkillRun, skills: Mapping[str, SkillSpec]) -> dict[str, Any]:
    """What the model may do next in the run's state: the body of every rejection."""
    state = skills[run.skill].states[run.state]
    return {
        "skill": run.skill,
        "state": run.state,
        "allowed_tools": [*state.allowed_tools, TRANSITION_TOOL],
        "valid_transitions": [{"on": t.on, "to": t.to} for t in state.transitions],
    }


def _state_data(run: SkillRun | None, skills: Mapping[str, SkillSpec]) -> dict[str, Any]:
    """The run's new phase (or how it ended) for a successful start or transition."""
    if run is None:
        return {}
    if not run.active:
        return {"skill": run.skill, "state": run.state, "outcome": run.outcome}
    objective = skills[run.skill].states[run.state].objective
    return _options(run, skills) | {"objective": objective}
