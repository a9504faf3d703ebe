"""`invalid_input` names the fix, as `invalid_arguments` and `unknown_tool` do (issue 12).

Before, a model that sent a wrong argument heard only what was wrong ("token: 5 is not of type
'string'"); now every `invalid_input` summary also says what to send instead and to call the
tool again: for manifest tools (their JSON Schema), built-in tools (their pydantic input),
`choir.core.spawn` and `choir.skill.start`.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field, ValidationError

from choir.protocol.base import WireModel
from choir.protocol.input_fix import pydantic_fix
from choir.protocol.tooling.manifest import ToolManifest

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "token": {"type": "string", "minLength": 2},
        "count": {"type": "integer", "minimum": 1, "maximum": 5},
        "mode": {"enum": ["fast", "slow"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "when": {"type": ["string", "null"], "pattern": "^[0-9]{4}$"},
        "nested": {
            "type": "object",
            "properties": {"depth": {"type": "integer"}},
            "required": ["depth"],
            "additionalProperties": False,
        },
    },
    "required": ["token"],
    "additionalProperties": False,
}
TOOL = ToolManifest.model_validate(
    {
        "llm": {"name": "test.fix", "description": "A test tool.", "parameters": PARAMETERS},
        "runtime": {
            "implementation": "external",
            "exec_path": "/choir/tools/agent/test.fix",
            "side_effect": "none",
        },
    }
)


@pytest.mark.parametrize(
    ("arguments", "fix"),
    [
        ({"token": 5}, "give token as a string"),
        ({}, "add the required argument token"),
        (
            {"token": "ab", "colour": "red"},
            "remove colour (its parameters are: count, mode, nested, tags, token, when)",
        ),
        ({"token": "ab", "count": 9}, "give count a value at most 5"),
        ({"token": "ab", "count": 0}, "give count a value at least 1"),
        ({"token": "ab", "mode": "medium"}, 'give mode one of "fast", "slow"'),
        ({"token": "a"}, "give token at least 2 characters"),
        ({"token": "ab", "tags": ["a", "b", "c"]}, "give tags at most 2 items"),
        ({"token": "ab", "tags": ["a", 3]}, "give tags[1] as a string"),
        ({"token": "ab", "when": 12}, "give when as a string or null"),
        ({"token": "ab", "when": "noon"}, "give when a value matching ^[0-9]{4}$"),
        ({"token": "ab", "nested": {}}, "add the required argument nested.depth"),
        (
            {"token": "ab", "nested": {"depth": 1, "x": 2}},
            "remove nested.x (its parameters are: depth)",
        ),
    ],
)
def test_a_manifest_tools_invalid_input_names_the_fix(arguments: dict[str, Any], fix: str) -> None:
    result = TOOL.check_input(arguments)
    assert result is not None
    assert result.error_code == "invalid_input"
    problem = result.data["problems"][0]
    assert (
        result.summary == f"invalid input for test.fix: {problem}; {fix}, then call test.fix again"
    )
    assert result.data["fix"] == fix


def test_valid_input_is_not_refused() -> None:
    assert TOOL.check_input({"token": "ab", "count": 3, "nested": {"depth": 0}}) is None


class Builtin(WireModel):
    path: str
    start_line: int = Field(default=1, ge=1)
    mode: str = Field(default="full", pattern="^(full|range)$")


@pytest.mark.parametrize(
    ("arguments", "fix"),
    [
        ({}, "add the required argument path"),
        ({"path": 3}, "give path as a string"),
        ({"path": "a", "start_line": "x"}, "give start_line as an integer"),
        ({"path": "a", "start_line": 0}, "give start_line a value at least 1"),
        ({"path": "a", "other": 1}, "remove other (it is not a parameter of this tool)"),
        ({"path": "a", "mode": "odd"}, "correct mode to match the tool's parameters"),
    ],
)
def test_a_builtin_tools_invalid_input_names_the_fix(arguments: dict[str, Any], fix: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Builtin.model_validate(arguments)
    assert pydantic_fix(caught.value) == fix
