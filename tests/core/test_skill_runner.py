"""The skill runner's rules as tables: (run, action) -> (run, effects), and replay equivalence."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from choir.core.skills.runner import (
    START_TOOL,
    TRANSITION_TOOL,
    Allowed,
    Decision,
    Refused,
    SkillRun,
    apply,
    begin_step,
    control_tool_views,
    fold,
    from_progress,
    interrupt,
    prompt_view,
    propose,
    to_progress,
)
from choir.protocol import SkillSpec
from choir.protocol.log.events import (
    Event,
    ModelOutput,
    SkillTransitionCommitted,
    ToolCall,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.log.snapshot import SkillProgress
from choir.protocol.tooling.tools import ToolResult


def _build(**overrides: Any) -> dict[str, Any]:
    """§10.1's build_feature: understand -> plan -> modify -> validate -> done."""
    spec: dict[str, Any] = {
        "name": "build",
        "description": "Implement a feature end-to-end.",
        "initial_state": "understand",
        "states": {
            "understand": {
                "objective": "Clarify the requirement.",
                "allowed_tools": ["choir.memory.query"],
                "transitions": [{"on": "complete", "to": "plan"}],
            },
            "plan": {
                "objective": "Plan the change.",
                "allowed_tools": ["choir.memory.query"],
                "transitions": [
                    {"on": "complete", "to": "modify"},
                    {"on": "revise", "to": "understand"},
                ],
            },
            "modify": {
                "objective": "Edit the files.",
                "allowed_tools": ["choir.fs.read", "choir.fs.write"],
                "transitions": [{"on": "complete", "to": "validate"}],
            },
            "validate": {
                "objective": "Verify correctness.",
                "allowed_tools": ["choir.fs.read"],
                "transitions": [
                    {"on": "complete", "to": "done"},
                    {"on": "fail", "to": "modify"},
                ],
            },
            "done": {"terminal": True},
        },
        "max_steps": 3,
    }
    return spec | overrides


def _recovering() -> dict[str, Any]:
    """Exhausted corrections move to a `recover` state that leads back to `understand`."""
    spec = _build(name="recovering", error_transition="recover")
    spec["states"] = spec["states"] | {
        "recover": {
            "objective": "Explain what went wrong.",
            "transitions": [{"on": "resume", "to": "understand"}],
        }
    }
    return spec


def _giving_up() -> dict[str, Any]:
    """Exhausted corrections end in the terminal `gave_up` state."""
    spec = _build(name="giving_up", error_transition="gave_up")
    spec["states"] = spec["states"] | {"gave_up": {"terminal": True}}
    return spec


SKILLS = {
    spec.name: spec
    for spec in map(
        SkillSpec.model_validate,
        [
            _build(),
            _recovering(),
            _giving_up(),
            _build(name="strict", retry_budget=0, interruptible=False),
            _build(
                name="typed",
                input_schema={
                    "type": "object",
                    "properties": {"feature": {"type": "string"}},
                    "required": ["feature"],
                },
            ),
            {
                "name": "instant",
                "description": "Starts done.",
                "initial_state": "done",
                "states": {"done": {"terminal": True}},
            },
        ],
    )
}


def run_(skill: str = "build", state: str = "understand", **fields: Any) -> SkillRun:
    return SkillRun(skill, state, **fields)


class Call(NamedTuple):
    name: str
    arguments: dict[str, Any] = {}


class Step(NamedTuple):
    """The lane is about to make an LLM call."""


class Output(NamedTuple):
    """The lane's LLM call was committed."""


class Interrupt(NamedTuple):
    pass


class Advance(NamedTuple):
    """A well-behaved model: the first transition of the current state (property tests only)."""


Action = Call | Step | Output | Interrupt | Advance


def _describe(effect: SkillTransitionCommitted | ToolResultCommitted) -> str:
    if isinstance(effect, SkillTransitionCommitted):
        return f"{effect.skill}: {effect.from_} -> {effect.to} on {effect.on}"
    return f"{effect.result.status} {effect.result.error_code or ''}".strip()


def act(run: SkillRun | None, action: Action) -> tuple[SkillRun | None, list[str]]:
    """Run one action and describe its outcome: the new run and its effects as short strings."""
    verdict: Allowed | Decision | Refused
    match action:
        case Call(name, arguments):
            verdict = propose(run, ToolCall(id="c1", name=name, arguments=arguments), SKILLS)
        case Step():
            verdict = begin_step(run, SKILLS)
        case Output():
            return apply(run, _output(), SKILLS), []
        case Interrupt():
            verdict = interrupt(run, SKILLS)
    if isinstance(verdict, Allowed):
        return run, ["allowed"]
    if isinstance(verdict, Refused):
        return run, [f"refused {verdict.error_code}"]
    return verdict.run, [_describe(effect) for effect in verdict.effects]


def _output() -> ModelOutput:
    return ModelOutput(lane="edge", model="scripted")


def start(skill: object = "build", **arguments: Any) -> Call:
    return Call(START_TOOL, {"skill": skill, **arguments})


def move(on: object) -> Call:
    return Call(TRANSITION_TOOL, {"on": on})


class Case(NamedTuple):
    run: SkillRun | None
    action: Action
    after: SkillRun | None
    effects: list[str]


CASES = {
    # no active skill: any tool goes through; a transition has nothing to move
    "no skill: tools allowed": Case(None, Call("choir.exec"), None, ["allowed"]),
    "no skill: transition rejected": Case(None, move("complete"), None, ["error skill_not_active"]),
    "finished: tools allowed": Case(
        run_(state="done", outcome="completed"),
        Call("choir.exec"),
        run_(state="done", outcome="completed"),
        ["allowed"],
    ),
    # starting
    "start": Case(None, start(), run_(), ["build: None -> understand on start", "success"]),
    "start after a finished skill": Case(
        run_(state="done", steps_taken=2, outcome="completed"),
        start("recovering"),
        run_("recovering"),
        ["recovering: None -> understand on start", "success"],
    ),
    "start into a terminal state completes": Case(
        None,
        start("instant"),
        run_("instant", "done", outcome="completed"),
        ["instant: None -> done on start", "success"],
    ),
    "start unknown skill": Case(None, start("nope"), None, ["error skill_unknown"]),
    "start without a skill name": Case(None, Call(START_TOOL, {}), None, ["error invalid_input"]),
    "start with a non-string name": Case(None, start(3), None, ["error invalid_input"]),
    "start with unknown arguments": Case(None, start(x=1), None, ["error invalid_input"]),
    "start typed without input": Case(None, start("typed"), None, ["error invalid_input"]),
    "start typed with bad input": Case(
        None, start("typed", input={"feature": 1}), None, ["error invalid_input"]
    ),
    "start typed with input": Case(
        None,
        start("typed", input={"feature": "login"}),
        run_("typed"),
        ["typed: None -> understand on start", "success"],
    ),
    # one active skill: only the state's tools and the transition tool
    "allowed tool": Case(run_(), Call("choir.memory.query"), run_(), ["allowed"]),
    "tool of another state": Case(
        run_(),
        Call("choir.fs.write"),
        run_(retries_used=1),
        ["error skill_tool_not_allowed"],
    ),
    "no nested skills": Case(
        run_(), start("recovering"), run_(retries_used=1), ["error skill_already_active"]
    ),
    "valid transition": Case(
        run_(state="plan", steps_taken=2),
        move("complete"),
        run_(state="modify", steps_taken=2),
        ["build: plan -> modify on complete", "success"],
    ),
    "transition resets corrections": Case(
        run_(state="plan", retries_used=2),
        move("revise"),
        run_(),
        ["build: plan -> understand on revise", "success"],
    ),
    "transition to terminal completes": Case(
        run_(state="validate", steps_taken=1),
        move("complete"),
        run_(state="done", steps_taken=1, outcome="completed"),
        ["build: validate -> done on complete", "success"],
    ),
    "transition of another state": Case(
        run_(), move("revise"), run_(retries_used=1), ["error skill_invalid_transition"]
    ),
    "unknown transition": Case(
        run_(), move("finish"), run_(retries_used=1), ["error skill_invalid_transition"]
    ),
    "reserved event": Case(
        run_(), move("error"), run_(retries_used=1), ["error skill_invalid_transition"]
    ),
    "transition without an event": Case(
        run_(), Call(TRANSITION_TOOL), run_(retries_used=1), ["error skill_invalid_transition"]
    ),
    "transition with a non-string event": Case(
        run_(), move(["complete"]), run_(retries_used=1), ["error skill_invalid_transition"]
    ),
    "second correction": Case(
        run_(retries_used=1),
        Call("choir.exec"),
        run_(retries_used=2),
        ["error skill_tool_not_allowed"],
    ),
    # corrections exhausted: the error transition
    "exhausted without error state fails": Case(
        run_(steps_taken=1, retries_used=2),
        Call("choir.exec"),
        run_(steps_taken=1, outcome="failed"),
        ["error skill_retries_exhausted", "build: understand -> understand on error"],
    ),
    "exhausted moves to error state": Case(
        run_("recovering", "plan", steps_taken=2, retries_used=2),
        move("nope"),
        run_("recovering", "recover", steps_taken=2),
        ["error skill_retries_exhausted", "recovering: plan -> recover on error"],
    ),
    "exhausted into terminal error state fails": Case(
        run_("giving_up", "modify", retries_used=2),
        Call("choir.exec"),
        run_("giving_up", "gave_up", outcome="failed"),
        ["error skill_retries_exhausted", "giving_up: modify -> gave_up on error"],
    ),
    "no corrections at all": Case(
        run_("strict"),
        Call("choir.exec"),
        run_("strict", outcome="failed"),
        ["error skill_retries_exhausted", "strict: understand -> understand on error"],
    ),
    # max_steps: each LLM step counts, across states
    "output counts a step": Case(run_(steps_taken=1), Output(), run_(steps_taken=2), []),
    "output without a skill": Case(None, Output(), None, []),
    "output after the skill ended": Case(
        run_(outcome="failed"), Output(), run_(outcome="failed"), []
    ),
    "step within max_steps": Case(run_(steps_taken=2), Step(), run_(steps_taken=2), []),
    "step past max_steps ends the skill": Case(
        run_(state="modify", steps_taken=3),
        Step(),
        run_(state="modify", steps_taken=3, outcome="max_steps"),
        ["build: modify -> modify on max_steps"],
    ),
    "step without a skill": Case(None, Step(), None, []),
    # interrupts
    "interrupt": Case(
        run_(state="plan", steps_taken=1),
        Interrupt(),
        run_(state="plan", steps_taken=1, outcome="interrupted"),
        ["build: plan -> plan on interrupted"],
    ),
    "not interruptible": Case(
        run_("strict"), Interrupt(), run_("strict"), ["refused skill_not_interruptible"]
    ),
    "interrupt without a skill": Case(None, Interrupt(), None, []),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_rules(case: Case):
    after, effects = act(case.run, case.action)

    assert (after, effects) == (case.after, case.effects)


def test_rejection_lists_what_is_allowed():
    verdict = propose(run_(state="plan"), ToolCall(id="c7", name="choir.exec"), SKILLS)

    assert isinstance(verdict, Decision)
    assert verdict.effects[0].call_id == "c7"  # type: ignore[union-attr]
    assert verdict.result is not None
    assert verdict.result.data == {
        "skill": "build",
        "state": "plan",
        "allowed_tools": ["choir.memory.query", TRANSITION_TOOL],
        "valid_transitions": [
            {"on": "complete", "to": "modify"},
            {"on": "revise", "to": "understand"},
        ],
        "retries_left": 1,
    }
    assert "choir.exec" in verdict.result.summary
    assert "complete, revise" in verdict.result.summary


def test_exhausted_correction_says_where_the_skill_went():
    run = run_("recovering", retries_used=2)

    verdict = propose(run, ToolCall(id="c1", name="choir.exec"), SKILLS)

    assert isinstance(verdict, Decision)
    assert verdict.result is not None
    assert verdict.result.data["violation"] == "skill_tool_not_allowed"
    assert verdict.result.data["state"] == "recover"
    assert "moved to 'recover'" in verdict.result.summary


def test_successful_transition_shows_the_next_phase():
    verdict = propose(
        run_(), ToolCall(id="c1", name=TRANSITION_TOOL, arguments={"on": "complete"}), SKILLS
    )

    assert isinstance(verdict, Decision)
    assert verdict.result is not None
    assert verdict.result.data["objective"] == "Plan the change."
    assert verdict.result.data["valid_transitions"][1] == {"on": "revise", "to": "understand"}


def test_unknown_skill_names_the_known_ones():
    verdict = propose(None, ToolCall(id="c1", name=START_TOOL, arguments={"skill": "x"}), SKILLS)

    assert isinstance(verdict, Decision)
    assert verdict.result is not None
    assert verdict.result.data["known_skills"] == sorted(SKILLS)


def test_prompt_view_shows_only_the_current_phase():
    view = prompt_view(run_(state="plan", steps_taken=1, retries_used=1), SKILLS)

    assert view is not None
    text = view.render()
    assert view.allowed_tools == ("choir.memory.query", TRANSITION_TOOL)
    assert view.transitions == (("complete", "modify"), ("revise", "understand"))
    assert (view.steps_left, view.retries_left) == (2, 1)
    assert "Plan the change." in text
    assert "Edit the files." not in text
    assert "Clarify the requirement." not in text


@pytest.mark.parametrize("run", [None, run_(outcome="completed")])
def test_no_prompt_view_without_an_active_skill(run: SkillRun | None):
    assert prompt_view(run, SKILLS) is None


def test_control_tools_have_valid_llm_views():
    start_view, transition_view = control_tool_views()

    assert (start_view.name, transition_view.name) == (START_TOOL, TRANSITION_TOOL)
    assert transition_view.parameters["required"] == ["on"]


def test_control_tool_views_are_built_once_not_per_step(monkeypatch: pytest.MonkeyPatch):
    """Every LLM step asks for them; building them checks each schema (slow) — once is enough."""
    from jsonschema import Draft202012Validator

    first = control_tool_views()
    checked: list[object] = []
    check = Draft202012Validator.check_schema
    monkeypatch.setattr(
        Draft202012Validator,
        "check_schema",
        staticmethod(lambda schema, **kw: (checked.append(schema), check(schema, **kw))),
    )

    assert control_tool_views() is first
    assert checked == []


def test_fold_replays_a_lane_log():
    events: list[Event] = [
        UserMsg(text="build the login page"),
        ModelOutput(lane="edge", model="m"),
        SkillTransitionCommitted(skill="build", from_=None, to="understand", on="start"),
        ModelOutput(lane="edge", model="m"),
        SkillTransitionCommitted(skill="build", from_="understand", to="plan", on="complete"),
        ModelOutput(lane="edge", model="m"),
        _rejection("skill_tool_not_allowed"),
        _rejection("path_outside_workspace"),
    ]

    assert fold(events, SKILLS) == run_(state="plan", steps_taken=2, retries_used=1)


def _rejection(code: str) -> ToolResultCommitted:
    return ToolResultCommitted(call_id="c", tool="choir.exec", result=ToolResult.fail(code, "no"))


@pytest.mark.parametrize(
    ("skill", "state"), [("removed", "understand"), ("build", "renamed")], ids=["skill", "state"]
)
def test_replay_fails_a_skill_that_no_longer_exists(skill: str, state: str):
    events = [SkillTransitionCommitted(skill=skill, from_=None, to=state, on="start")]

    assert fold(events, SKILLS) == SkillRun(skill, state, outcome="failed")


def test_snapshot_round_trip():
    run = run_(state="modify", steps_taken=2, retries_used=1)

    progress = to_progress(run, SKILLS)

    assert progress == SkillProgress(skill="build", state="modify", steps_taken=2, retries_left=1)
    assert from_progress(progress, SKILLS) == run
    assert to_progress(run_(outcome="completed"), SKILLS) is None
    stale = SkillProgress(skill="removed", state="x", retries_left=0)
    assert from_progress(stale, SKILLS).outcome == "failed"


def test_seeded_skills_run_to_completion():
    seeds = Path(__file__).parents[2] / "seeds" / "global" / "skills"
    spec = SkillSpec.model_validate(json.loads((seeds / "tool-builder.json").read_text()))
    skills = {spec.name: spec}
    run: SkillRun | None = None
    for call in [
        ToolCall(id="1", name=START_TOOL, arguments={"skill": "tool-builder"}),
        *(
            ToolCall(id=str(n), name=TRANSITION_TOOL, arguments={"on": "complete"})
            for n in range(2, 6)
        ),
    ]:
        verdict = propose(run, call, skills)
        assert isinstance(verdict, Decision)
        run = verdict.run

    assert run == SkillRun("tool-builder", "done", outcome="completed")


# Live state equals the replayed log, whatever the model does.

_TOOLS = ["choir.memory.query", "choir.fs.read", "choir.fs.write", "choir.exec"]
_EVENTS = ["complete", "complete", "complete", "revise", "fail", "resume", "error", "nope"]
"""Weighted towards `complete` so that runs reach their terminal states."""
_ACTIONS = st.one_of(
    st.sampled_from([*SKILLS, "nope"]).map(start),
    st.just(start("typed", input={"feature": "login"})),
    st.sampled_from(_EVENTS).map(move),
    st.sampled_from(_EVENTS).map(move),
    st.sampled_from(_TOOLS).map(Call),
    st.sampled_from([Step(), Interrupt()]),
    st.just(Output()),
    st.just(Output()),
    st.just(Output()),
    st.just(Advance()),
    st.just(Advance()),
)


@dataclass
class Lane:
    """A lane as the arbiter drives it: live run plus the log it commits."""

    run: SkillRun | None = None

    def __post_init__(self) -> None:
        self.log: list[Event] = []

    def do(self, action: Action) -> None:
        verdict: Allowed | Decision | Refused
        match action:
            case Call(name, arguments):
                verdict = propose(
                    self.run, ToolCall(id="c", name=name, arguments=arguments), SKILLS
                )
            case Step():
                verdict = begin_step(self.run, SKILLS)
            case Output():  # the arbiter checks max_steps before every LLM call
                self.do(Step())
                self.log.append(_output())
                self.run = apply(self.run, _output(), SKILLS)
                return
            case Interrupt():
                verdict = interrupt(self.run, SKILLS)
            case Advance():
                view = prompt_view(self.run, SKILLS)
                self.do(move(view.transitions[0][0]) if view else start())
                return
        if isinstance(verdict, Decision):
            self.log.extend(verdict.effects)
            self.run = verdict.run


@settings(max_examples=300)
@given(st.lists(_ACTIONS, max_size=40))
def test_live_run_equals_replayed_log(actions: list[Action]):
    lane = Lane()
    for action in actions:
        lane.do(action)
        assert fold(lane.log, SKILLS) == lane.run


@given(st.lists(_ACTIONS, max_size=40))
def test_invariants_hold(actions: list[Action]):
    lane = Lane()
    for action in actions:
        lane.do(action)
        run = lane.run
        if run is not None and run.active:
            spec = SKILLS[run.skill]
            assert not spec.states[run.state].terminal
            assert run.retries_used <= spec.retry_budget
            assert run.steps_taken <= spec.max_steps
            assert from_progress(to_progress(run, SKILLS), SKILLS) == run  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "summary"),
    [
        (
            {"skill": 3},
            "invalid input for choir.skill.start: arguments.skill: 3 is not of type 'string'; "
            "give skill as a string, then call choir.skill.start again",
        ),
        (
            {"skill": "typed"},
            "invalid input for choir.skill.start: skill 'typed' needs an input matching its "
            "input schema; add the argument input, then call choir.skill.start again",
        ),
        (
            {"skill": "typed", "input": {}},
            "invalid input for choir.skill.start: input: 'feature' is a required property; "
            "add the required argument input.feature, then call choir.skill.start again",
        ),
    ],
)
def test_an_invalid_start_names_the_fix(arguments: dict[str, Any], summary: str) -> None:
    verdict = propose(None, ToolCall(id="c1", name=START_TOOL, arguments=arguments), SKILLS)
    assert isinstance(verdict, Decision)
    [answer] = verdict.effects
    assert isinstance(answer, ToolResultCommitted)
    assert (answer.result.error_code, answer.result.summary) == ("invalid_input", summary)
