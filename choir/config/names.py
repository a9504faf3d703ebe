"""Name rules for everything config.json names.

Agent ids become Postgres schema and role names, socket names and log file names, so they are the
strictest. Resource names (the keys of `models`, `workspaces`, …) appear in JSON paths, CLI flags
and gateway commands, so they exclude dots and spaces. Secret names may contain dots because
they are only ever looked up, never used as paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from choir.errors import UsageError

AGENT_ID_PATTERN = r"^[a-z][a-z0-9_-]{0,30}$"
"""A lowercase letter, then up to 30 lowercase letters, digits, `-` or `_`."""
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
"""Keys of the named-resource maps: letters, digits, `-`, `_`; no dots, so JSON paths stay exact."""
SECRET_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

RESERVED_AGENT_IDS = frozenset({"choird", "control"})
"""Ids that would collide with choird's own log file (`logs/choird.log`) or the control schema."""

_AGENT_ID = re.compile(AGENT_ID_PATTERN)
_NAME = re.compile(NAME_PATTERN)
_SECRET_NAME = re.compile(SECRET_NAME_PATTERN)


def agent_id_problem(agent_id: str) -> str | None:
    """Why `agent_id` is not a valid agent id, or None when it is."""
    if agent_id in RESERVED_AGENT_IDS:
        reserved = ", ".join(sorted(RESERVED_AGENT_IDS))
        return f"invalid agent id {agent_id!r}: reserved for choir itself ({reserved})"
    if _AGENT_ID.fullmatch(agent_id):
        return None
    return f"invalid agent id {agent_id!r}: must match {AGENT_ID_PATTERN}"


def name_problem(name: str) -> str | None:
    if _NAME.fullmatch(name):
        return None
    return f"invalid name {name!r}: must match {NAME_PATTERN}"


def secret_name_problem(name: str) -> str | None:
    if _SECRET_NAME.fullmatch(name):
        return None
    return f"invalid secret name {name!r}: must match {SECRET_NAME_PATTERN}"


def validate_agent_id(agent_id: str) -> None:
    """Raise `UsageError` naming the pattern when `agent_id` is not a valid agent id."""
    problem = agent_id_problem(agent_id)
    if problem:
        raise UsageError(problem)


def validate_secret_name(name: str) -> None:
    problem = secret_name_problem(name)
    if problem:
        raise UsageError(problem)


def _checker(problem_of: Callable[[str], str | None], error_type: str) -> AfterValidator:
    def check(value: str) -> str:
        problem = problem_of(value)
        if problem:
            raise PydanticCustomError(error_type, "{problem}", {"problem": problem})
        return value

    return AfterValidator(check)


AgentId = Annotated[str, _checker(agent_id_problem, "invalid_agent_id")]
ResourceName = Annotated[str, _checker(name_problem, "invalid_name")]
SecretName = Annotated[str, _checker(secret_name_problem, "invalid_secret_name")]
