"""config.json `agents.<id>.memories`: attached memories and roles, checked on load."""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any

import pytest

from choir.config.validation.validate import validate_config_data
from choir.core.memory.access import Grant, MemoryClass, Role


def _config(memories: object) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        resources.files("choir._seeds").joinpath("config.example.json").read_text()
    )
    agent = data["agents"]["agent-1"]
    data["agents"]["agent-2"] = copy.deepcopy(agent)
    agent["memories"] = memories
    return data


def test_entries_load_as_grants() -> None:
    report = validate_config_data(
        _config(
            [
                {"class": "personal", "role": "read-write"},
                {"agent": "agent-2", "class": "app", "role": "read-write"},
                {"agent": "agent-2", "class": "knowledge"},
            ]
        ),
        None,
    )
    assert report.errors == []
    assert report.config is not None
    entries = report.config.agents["agent-1"].memories
    assert entries is not None
    assert [entry.grant("agent-1") for entry in entries] == [
        Grant("agent-1", MemoryClass.PERSONAL, Role.READ_WRITE),
        Grant("agent-2", MemoryClass.APP, Role.READ_WRITE),
        Grant("agent-2", MemoryClass.KNOWLEDGE, Role.READ),
    ]
    assert report.config.agents["agent-2"].memories is None


@pytest.mark.parametrize(
    ("memories", "problem"),
    [
        (
            [{"class": "secret"}],
            "agents.agent-1.memories[0].class: Input should be 'system', 'knowledge', 'app' "
            "or 'personal'",
        ),
        (
            [{"class": "app", "role": "write"}],
            "agents.agent-1.memories[0].role: Input should be 'read' or 'read-write'",
        ),
        ([{"role": "read"}], "agents.agent-1.memories[0].class: required key missing"),
        (
            [{"agent": "nobody", "class": "app"}],
            "agents.agent-1.memories[0].agent: unknown agent 'nobody' (known: agent-1, agent-2)",
        ),
        (
            [{"agent": "agent-2", "class": "personal"}],
            "agents.agent-1.memories[0]: personal memory belongs to agent-2's users; no other "
            "agent can be granted it",
        ),
        (
            [{"class": "knowledge", "encrypted": True}],
            "agents.agent-1.memories[0].encrypted: knowledge memory cannot be encrypted (choird "
            "or the operator writes it without the key); encrypt personal or app memory",
        ),
        (
            [{"class": "system", "role": "read-write"}],
            "agents.agent-1.memories[0]: system memory is read-only to its own agent; use role "
            "read (the operator writes it (choirctl knowledge put|write … --memory system))",
        ),
    ],
)
def test_bad_entries_are_refused_with_the_fix(memories: object, problem: str) -> None:
    report = validate_config_data(_config(memories), None)
    assert report.config is None
    assert problem in report.errors, report.errors


def test_own_personal_and_app_memory_may_be_encrypted() -> None:
    report = validate_config_data(
        _config(
            [
                {"class": "personal", "role": "read-write", "encrypted": True},
                {"class": "app", "role": "read-write", "encrypted": True},
            ]
        ),
        None,
    )
    assert report.errors == []
    assert report.config is not None
    entries = report.config.agents["agent-1"].memories
    assert entries is not None
    assert [entry.grant("agent-1").encrypted for entry in entries] == [True, True]
