"""Loading skills at start-up: a good directory loads; every broken file is named precisely."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from choir.core.skills.registry import SkillRegistry, load_skills
from choir.core.skills.runner import START_TOOL, TRANSITION_TOOL
from choir.errors import ConfigError, ExitCode

SEEDS = Path(__file__).parents[2] / "seeds" / "global"
SEED_TOOLS = frozenset(path.stem for path in (SEEDS / "tools").glob("*.json"))
TOOLS = frozenset({"choir.memory.query", "choir.fs.read", "choir.fs.write"})


def _spec(name: str = "build_feature", **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "description": "Implement a feature end-to-end.",
        "initial_state": "plan",
        "states": {
            "plan": {
                "objective": "Plan.",
                "allowed_tools": ["choir.memory.query"],
                "transitions": [{"on": "complete", "to": "modify"}],
            },
            "modify": {
                "objective": "Edit.",
                "allowed_tools": ["choir.fs.read", "choir.fs.write"],
                "transitions": [{"on": "complete", "to": "done"}],
            },
            "done": {"terminal": True},
        },
    }
    return spec | overrides


def _write(skills: Path, file_name: str, content: dict[str, Any] | str) -> None:
    skills.mkdir(exist_ok=True)
    text = content if isinstance(content, str) else json.dumps(content, indent=2)
    (skills / file_name).write_text(text)


def _problems(skills: Path, tools: frozenset[str] = TOOLS) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_skills(skills, tools)
    return caught.value.problems


def test_seeded_skills_load_against_the_seeded_tools(tmp_path: Path):
    skills = tmp_path / "skills"
    shutil.copytree(SEEDS / "skills", skills)

    registry = load_skills(skills, SEED_TOOLS)

    assert registry.names() == ["skill-builder", "tool-builder"]
    assert registry.summaries() == [
        ("skill-builder", "Design and propose a new skill state machine."),
        ("tool-builder", "Design and propose a new tool for the agent."),
    ]
    assert registry["tool-builder"].max_steps == 15
    assert registry.get("nope") is None


def test_missing_directory_means_no_skills(tmp_path: Path):
    registry = load_skills(tmp_path / "skills", TOOLS)

    assert (len(registry), registry.summaries()) == (0, [])


def test_registry_is_a_read_only_mapping():
    registry = SkillRegistry({})

    assert dict(registry) == {}
    assert not hasattr(registry, "__setitem__")


def test_only_json_files_are_skills(tmp_path: Path):
    skills = tmp_path / "skills"
    _write(skills, "build_feature.json", _spec())
    _write(skills, "README.md", "# notes")

    assert load_skills(skills, TOOLS).names() == ["build_feature"]


def test_the_transition_tool_may_be_listed(tmp_path: Path):
    spec = _spec()
    spec["states"]["plan"]["allowed_tools"].append(TRANSITION_TOOL)
    _write(tmp_path / "skills", "build_feature.json", spec)

    assert load_skills(tmp_path / "skills", TOOLS).names() == ["build_feature"]


def test_not_a_directory(tmp_path: Path):
    (tmp_path / "skills").write_text("")

    assert _problems(tmp_path / "skills") == [
        f"{tmp_path / 'skills'}: not a directory; skills live in <dir>/<name>.json"
    ]


def _unknown_tool(spec: dict[str, Any]) -> None:
    spec["states"]["modify"]["allowed_tools"][1] = "choir.fs.wrte"


def _unrelated_tool(spec: dict[str, Any]) -> None:
    spec["states"]["plan"]["allowed_tools"] = ["acme.deploy"]


def _nested_skill(spec: dict[str, Any]) -> None:
    spec["states"]["plan"]["allowed_tools"] = [START_TOOL]


def _reserved_event(spec: dict[str, Any]) -> None:
    spec["states"]["plan"]["transitions"].append({"on": "error", "to": "done"})


def _typo_in_state(spec: dict[str, Any]) -> None:
    spec["states"]["plan"]["transitions"][0]["to"] = "modfy"


def _bad_state_name(spec: dict[str, Any]) -> None:
    spec["states"]["Bad State"] = {"terminal": True}


def _unknown_key(spec: dict[str, Any]) -> None:
    spec["max_step"] = 3


def _wrong_name(spec: dict[str, Any]) -> None:
    spec["name"] = "build"


PROBLEMS = {
    "unknown tool, with a suggestion": (
        _unknown_tool,
        "skills/build_feature.json: states.modify.allowed_tools[1]: unknown tool "
        "'choir.fs.wrte' (did you mean 'choir.fs.write'?)",
    ),
    "unknown tool, listing the known": (
        _unrelated_tool,
        "skills/build_feature.json: states.plan.allowed_tools[0]: unknown tool 'acme.deploy' "
        "(known: choir.fs.read, choir.fs.write, choir.memory.query)",
    ),
    "nested skill": (
        _nested_skill,
        "skills/build_feature.json: states.plan.allowed_tools[0]: a skill cannot start another "
        "skill (§10.2); remove 'choir.skill.start'",
    ),
    "reserved event": (
        _reserved_event,
        "skills/build_feature.json: states.plan.transitions[1].on: 'error' is reserved for the "
        "skill runner (error, interrupted, max_steps, start); use another event name",
    ),
    "ill-formed machine": (
        _typo_in_state,
        "skills/build_feature.json: states.plan.transitions[0].to: unknown state 'modfy' "
        "(known: done, modify, plan)",
    ),
    "invalid state name": (
        _bad_state_name,
        "skills/build_feature.json: states.Bad State: invalid state name 'Bad State': use up to "
        "64 lowercase letters, digits, '_' or '-', starting with a letter",
    ),
    "unknown key": (
        _unknown_key,
        "skills/build_feature.json: max_step: Extra inputs are not permitted",
    ),
    "name mismatch": (
        _wrong_name,
        "skills/build_feature.json: name: 'build' does not match the file name; rename the file "
        'to build.json or set "name": "build_feature"',
    ),
}


@pytest.mark.parametrize(("break_it", "problem"), PROBLEMS.values(), ids=PROBLEMS.keys())
def test_problem(tmp_path: Path, break_it: Any, problem: str):
    spec = _spec()
    break_it(spec)
    _write(tmp_path / "skills", "build_feature.json", spec)

    assert _problems(tmp_path / "skills") == [problem]


TEXTS = {
    "bad JSON": (
        '{\n  "name": "build_feature",\n  "states": {,}\n}',
        "skills/build_feature.json: invalid JSON at line 3, column 14: "
        "Expecting property name enclosed in double quotes",
    ),
    "not an object": ("[]", "skills/build_feature.json: must be a JSON object {...} (a SkillSpec)"),
    "duplicate key": (
        json.dumps(_spec())[:-1] + ', "name": "build_feature"}',
        "skills/build_feature.json: duplicate key 'name'; the second one would replace the first",
    ),
}


@pytest.mark.parametrize(("text", "problem"), TEXTS.values(), ids=TEXTS.keys())
def test_unreadable_file(tmp_path: Path, text: str, problem: str):
    _write(tmp_path / "skills", "build_feature.json", text)

    assert _problems(tmp_path / "skills") == [problem]


def test_not_utf8(tmp_path: Path):
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "build_feature.json").write_bytes(b'{"name": "\xff"}')

    (problem,) = _problems(tmp_path / "skills")
    assert problem.startswith("skills/build_feature.json: cannot read the file: 'utf-8' codec")


def test_duplicate_names(tmp_path: Path):
    skills = tmp_path / "skills"
    _write(skills, "a.json", _spec("b"))
    _write(skills, "b.json", _spec("b"))

    assert _problems(skills) == [
        "skills/a.json: name: 'b' does not match the file name; rename the file to b.json or "
        'set "name": "a"',
        "skills/b.json: name: skill 'b' is also defined in skills/a.json",
    ]


def test_every_problem_of_every_file_at_once(tmp_path: Path):
    skills = tmp_path / "skills"
    spec = _spec()
    _unknown_tool(spec)
    _wrong_name(spec)
    _write(skills, "build_feature.json", spec)
    _write(skills, "broken.json", "{")
    _write(skills, "fine.json", _spec("fine"))

    with pytest.raises(ConfigError) as caught:
        load_skills(skills, TOOLS)

    assert caught.value.exit_code == ExitCode.CONFIG
    assert [problem.split(": ")[0:2] for problem in caught.value.problems] == [
        ["skills/broken.json", "invalid JSON at line 1, column 2"],
        ["skills/build_feature.json", "name"],
        ["skills/build_feature.json", "states.modify.allowed_tools[1]"],
    ]
    header = str(caught.value).splitlines()[0]
    assert (
        header == f"invalid skills in {skills}; fix every problem below (the agent cannot start):"
    )
