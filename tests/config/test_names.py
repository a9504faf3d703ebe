"""Agent ids and names: the safe patterns, with the pattern named in every refusal."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from choir.config import AGENT_ID_PATTERN, validate_agent_id, validate_secret_name
from choir.errors import UsageError


@pytest.mark.parametrize("agent_id", ["a", "agent-1", "ops_bot", "a" + "b" * 30])
def test_valid_agent_ids(agent_id: str) -> None:
    validate_agent_id(agent_id)


@pytest.mark.parametrize(
    "agent_id", ["", "1agent", "Agent", "agent.1", "agent 1", "a" * 32, "-a", "agent/../x", "é"]
)
def test_invalid_agent_ids_name_the_pattern(agent_id: str) -> None:
    with pytest.raises(UsageError) as caught:
        validate_agent_id(agent_id)
    assert str(caught.value) == f"invalid agent id {agent_id!r}: must match {AGENT_ID_PATTERN}"


@given(st.from_regex(AGENT_ID_PATTERN, fullmatch=True))
def test_every_id_matching_the_pattern_is_accepted(agent_id: str) -> None:
    validate_agent_id(agent_id)


@given(st.text(max_size=40))
def test_accepted_ids_are_safe_identifiers(agent_id: str) -> None:
    try:
        validate_agent_id(agent_id)
    except UsageError:
        return
    assert re.fullmatch(r"[a-z][a-z0-9_-]*", agent_id)
    assert len(agent_id) <= 31


@pytest.mark.parametrize("name", ["bad name", ".hidden", "", "x" * 129, "a/b"])
def test_invalid_secret_names(name: str) -> None:
    with pytest.raises(UsageError, match="invalid secret name"):
        validate_secret_name(name)
