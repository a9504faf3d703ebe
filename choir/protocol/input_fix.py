"""How to fix a tool call's invalid input: the model hears the problem *and* what to send instead.

Pure. `unknown_tool` ("call one of the offered tools by its exact name") and `invalid_arguments`
("call it again with a JSON object of arguments") name their fix; an `invalid_input` result does
too. From the best-ranked JSON Schema violation (manifest tools, skill inputs) or the first
pydantic error (built-in tools, `choir.core.spawn`) comes one instruction — which argument to
add, remove, or give which kind of value — and the summary ends "then call <tool> again".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from choir.protocol.problems import location
from choir.protocol.tooling.tools import ToolResult

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaViolation
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails

INVALID_INPUT: Final = "invalid_input"

_TYPES: Final = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_PYDANTIC_TYPES: Final = {
    "string": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "list": "a list",
    "dict": "an object",
    "model": "an object",
}
_BOUNDS: Final = {
    "minimum": "at least",
    "exclusiveMinimum": "more than",
    "maximum": "at most",
    "exclusiveMaximum": "less than",
    "ge": "at least",
    "gt": "more than",
    "le": "at most",
    "lt": "less than",
}


def invalid_input(tool: str, problems: Sequence[str], fix: str, **data: Any) -> ToolResult:
    """`invalid_input`: the first problem, its fix, and the call to make again."""
    summary = f"invalid input for {tool}: {problems[0]}; {fix}, then call {tool} again"
    return ToolResult.fail(INVALID_INPUT, summary, problems=list(problems), fix=fix, **data)


def schema_fix(error: SchemaViolation, root: str = "") -> str:
    """The fix of one JSON Schema violation; `root` prefixes where it is (e.g. `input`)."""
    where = _joined(root, location(list(error.absolute_path)))
    value: Any = error.validator_value
    instance: Any = error.instance
    match error.validator:
        case "required" if isinstance(instance, Mapping):
            missing = [name for name in value if name not in instance]
            return f"add the required argument {_names(root, where, missing)}"
        case "additionalProperties" if isinstance(instance, Mapping):
            known = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
            extra = sorted(name for name in instance if name not in known)
            allowed = ", ".join(sorted(known)) or "none"
            return f"remove {_names(root, where, extra)} (its parameters are: {allowed})"
        case "type":
            kinds = [value] if isinstance(value, str) else list(value)
            return f"give {_it(where)} as {' or '.join(_TYPES.get(k, k) for k in kinds)}"
        case "enum":
            return f"give {_it(where)} one of {', '.join(_json(v) for v in value)}"
        case "const":
            return f"give {_it(where)} the value {_json(value)}"
        case bound if bound in _BOUNDS:
            return f"give {_it(where)} a value {_BOUNDS[bound]} {value}"
        case "minLength" | "minItems" | "minProperties":
            return f"give {_it(where)} at least {value} {_unit(error.validator)}"
        case "maxLength" | "maxItems" | "maxProperties":
            return f"give {_it(where)} at most {value} {_unit(error.validator)}"
        case "pattern":
            return f"give {_it(where)} a value matching {value}"
        case "format":
            return f"give {_it(where)} a valid {value}"
    return f"correct {_it(where)} to match the tool's parameters"


def pydantic_fix(error: ValidationError) -> str:
    """The fix of the first error of a pydantic validation (built-in tools' inputs)."""
    return details_fix(error.errors(include_url=False)[0])


def details_fix(detail: ErrorDetails) -> str:
    loc = [part for part in detail["loc"] if not (isinstance(part, str) and "[" in part)]
    where = location(loc)
    kind, context = detail["type"], detail.get("ctx") or {}
    if kind == "missing":
        return f"add the required argument {where}"
    if kind == "extra_forbidden":
        return f"remove {where} (it is not a parameter of this tool)"
    if kind == "literal_error" and "expected" in context:
        return f"give {_it(where)} one of {context['expected']}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = next(key for key in ("ge", "gt", "le", "lt") if key in context)
        return f"give {_it(where)} a value {_BOUNDS[bound]} {context[bound]}"
    if kind in ("string_too_short", "too_short"):
        return f"give {_it(where)} at least {context.get('min_length')} {_short_unit(kind)}"
    if kind in ("string_too_long", "too_long"):
        return f"give {_it(where)} at most {context.get('max_length')} {_short_unit(kind)}"
    base = kind.split("_", 1)[0]
    if kind.endswith(("_type", "_parsing")) and base in _PYDANTIC_TYPES:
        return f"give {_it(where)} as {_PYDANTIC_TYPES[base]}"
    return f"correct {_it(where)} to match the tool's parameters"


def _joined(root: str, where: str) -> str:
    if not root:
        return where
    if not where:
        return root
    return f"{root}{'' if where.startswith('[') else '.'}{where}"


def _names(root: str, where: str, names: Sequence[str]) -> str:
    parent = f"{where}." if where else ""
    return ", ".join(f"{parent}{name}" for name in names) or (where or root or "it")


def _it(where: str) -> str:
    return where or "the arguments"


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def _unit(keyword: str) -> str:
    return {"Length": "characters", "Items": "items", "Properties": "keys"}[keyword[3:]]


def _short_unit(kind: str) -> str:
    return "characters" if kind.startswith("string") else "items"


__all__ = ["INVALID_INPUT", "details_fix", "invalid_input", "pydantic_fix", "schema_fix"]
