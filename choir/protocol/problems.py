"""Turning pydantic validation errors into one-line problems an operator can act on."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError
from pydantic_core import PydanticCustomError


def invalid(message: str) -> PydanticCustomError:
    """A model-level validation error whose message is exactly `message` (no "Value error, ")."""
    return PydanticCustomError("invalid", "{problem}", {"problem": message})


def validation_problems(err: ValidationError) -> list[str]:
    """One `location: message` line per error, e.g. `runtime.locks[0].mode: ...`."""
    problems = []
    for error in err.errors(include_url=False):
        message = error["msg"].removeprefix("Value error, ")
        where = location(error["loc"])
        problems.append(f"{where}: {message}" if where else message)
    return problems


def location(parts: Sequence[int | str]) -> str:
    """`("states", "plan", "transitions", 1)` -> `states.plan.transitions[1]`."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text
