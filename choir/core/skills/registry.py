"""Loading the skill registry at start-up (§8.8, skill loading): every problem, then fail fast.

The one module of `choir.core` that reads files: it scans a directory of `<name>.json` SkillSpecs
and hands the runner an immutable registry. A broken skill stops the agent at start-up rather than
in the middle of a session, so every file is checked and every problem reported at once, each
naming its file and JSON path:

    skills/build_feature.json: states.modify.allowed_tools[1]: unknown tool 'choir.fs.wrte'
        (did you mean 'choir.fs.write'?)

Beyond SkillSpec's own checks, a skill here must be named like its file, use only registered
tools, never allow `choir.skill.start` (skills do not nest, §10.2), and leave the transition
events the runner commits itself (`start`, `error`, `max_steps`, `interrupted`) to the runner.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from choir.core.skills.runner import RESERVED_EVENTS, START_TOOL, TRANSITION_TOOL
from choir.errors import ConfigError
from choir.protocol.problems import validation_problems
from choir.protocol.tooling.skills import SkillSpec


class SkillRegistry(Mapping[str, SkillSpec]):
    """The agent's skills by name; immutable at runtime (§8.8)."""

    __slots__ = ("_skills",)

    def __init__(self, skills: Mapping[str, SkillSpec] | None = None) -> None:
        self._skills = dict(sorted((skills or {}).items()))

    def __getitem__(self, name: str) -> SkillSpec:
        return self._skills[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._skills)

    def __len__(self) -> int:
        return len(self._skills)

    def __repr__(self) -> str:
        return f"SkillRegistry({', '.join(self._skills)})"

    def names(self) -> list[str]:
        """Skill names, sorted."""
        return list(self._skills)

    def summaries(self) -> list[tuple[str, str]]:
        """(name, description) per skill, sorted: the skill list of a lane's system prompt."""
        return [(name, spec.description) for name, spec in self._skills.items()]


def load_skills(skills_dir: Path, known_tools: Collection[str]) -> SkillRegistry:
    """Every `*.json` skill in `skills_dir`, checked against the tool registry's names.

    A missing directory means no skills. Raises ConfigError listing every problem found.
    """
    if not skills_dir.exists():
        return SkillRegistry()
    if not skills_dir.is_dir():
        raise ConfigError([f"{skills_dir}: not a directory; skills live in <dir>/<name>.json"])
    problems: list[str] = []
    skills: dict[str, SkillSpec] = {}
    sources: dict[str, str] = {}
    for path in sorted(skills_dir.glob("*.json")):
        source = f"{skills_dir.name}/{path.name}"
        spec, found = read_skill(path, known_tools)
        problems.extend(f"{source}: {problem}" for problem in found)
        if spec is not None and spec.name in sources:
            problems.append(
                f"{source}: name: skill {spec.name!r} is also defined in {sources[spec.name]}"
            )
        elif spec is not None:
            skills[spec.name], sources[spec.name] = spec, source
    if problems:
        header = (
            f"invalid skills in {skills_dir}; fix every problem below (the agent cannot start):"
        )
        raise ConfigError(problems, header=header)
    return SkillRegistry(skills)


def read_skill(path: Path, known_tools: Collection[str]) -> tuple[SkillSpec | None, list[str]]:
    """One skill file: the spec if it parsed, and every problem (`<json.path>: <problem>`).

    The spec is returned even with problems (a name or tool mismatch), so duplicates are found too.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return None, [f"cannot read the file: {err}"]
    data, problems = _parse(text)
    if data is None:
        return None, problems
    spec, found = check_skill(data, path.stem, known_tools)
    return spec, problems + found


def check_skill(
    data: Any, stem: str, known_tools: Collection[str]
) -> tuple[SkillSpec | None, list[str]]:
    """A skill's JSON value checked as the loader checks `skills/<stem>.json`: the spec if it
    parsed, and every problem. choird checks a proposed skill with it before offering it."""
    try:
        spec = SkillSpec.model_validate(data)
    except ValidationError as err:
        return None, [p.replace(".[key]", "") for p in validation_problems(err)]
    problems = _name_problems(spec, stem)
    problems.extend(_tool_problems(spec, known_tools))
    problems.extend(_event_problems(spec))
    return spec, problems


def _parse(text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The JSON object in `text`, or None; duplicate keys are problems, not silent overwrites."""
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in items:
            if key in obj:
                duplicates.append(f"duplicate key {key!r}; the second one would replace the first")
            obj[key] = value
        return obj

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as err:
        return None, [f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"]
    except (RecursionError, ValueError):  # 100k levels deep, a 5,000-digit number
        return None, ["invalid JSON: nested too deeply or a number too long to read"]
    if not isinstance(data, dict):
        return None, ["must be a JSON object {...} (a SkillSpec)"]
    return data, duplicates


def _name_problems(spec: SkillSpec, stem: str) -> list[str]:
    if spec.name == stem:
        return []
    return [
        f"name: {spec.name!r} does not match the file name; "
        f'rename the file to {spec.name}.json or set "name": {json.dumps(stem)}'
    ]


def _tool_problems(spec: SkillSpec, known_tools: Collection[str]) -> Iterator[str]:
    for name, state in spec.states.items():
        for index, tool in enumerate(state.allowed_tools):
            where = f"states.{name}.allowed_tools[{index}]"
            if tool == START_TOOL:
                yield f"{where}: a skill cannot start another skill (§10.2); remove {tool!r}"
            elif tool != TRANSITION_TOOL and tool not in known_tools:
                yield f"{where}: unknown tool {tool!r} ({_hint(tool, known_tools)})"


def _hint(tool: str, known_tools: Collection[str]) -> str:
    import difflib  # only a skill naming an unknown tool needs it, not every agent's start

    close = difflib.get_close_matches(tool, list(known_tools), n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"known: {', '.join(sorted(known_tools)) or 'none'}"


def _event_problems(spec: SkillSpec) -> Iterator[str]:
    reserved = ", ".join(sorted(RESERVED_EVENTS))
    for name, state in spec.states.items():
        for index, transition in enumerate(state.transitions):
            if transition.on in RESERVED_EVENTS:
                yield (
                    f"states.{name}.transitions[{index}].on: {transition.on!r} is reserved for "
                    f"the skill runner ({reserved}); use another event name"
                )
