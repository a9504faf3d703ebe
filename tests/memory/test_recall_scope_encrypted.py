"""A per-turn recall never covers an encrypted memory: its items would go into the event log."""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any

from choir.config.model import AgentConfig
from choir.config.validation.validate import validate_config_data
from choir.daemon.memory.tools.host import MemoryTools


def _agents(memories: list[dict[str, Any]]) -> dict[str, AgentConfig]:
    data: dict[str, Any] = json.loads(
        resources.files("choir._seeds").joinpath("config.example.json").read_text()
    )
    data["agents"]["agent-2"] = copy.deepcopy(data["agents"]["agent-1"])
    data["agents"]["agent-1"]["memories"] = memories
    report = validate_config_data(data, None)
    assert report.config is not None, report.errors
    return dict(report.config.agents)


async def _never() -> Any:
    raise AssertionError("a scope needs no store")


def _tools(memories: list[dict[str, Any]]) -> MemoryTools:
    agents = _agents(memories)

    async def embed(*_: Any, **__: Any) -> None:
        return None

    return MemoryTools(_never, embed, lambda: agents)


def test_recall_leaves_out_the_encrypted_memories() -> None:
    tools = _tools([{"class": "personal", "role": "read-write", "encrypted": True}])
    scope = tools.recall_scope("agent-1", "console")
    assert scope.classes == ("system", "knowledge", "app")
    assert tools.gate.scope("agent-1", "agent-1", user="console").classes == (
        "system",
        "knowledge",
        "app",
        "personal",
    )


def test_recall_covers_every_readable_memory_when_none_is_encrypted() -> None:
    tools = _tools([{"class": "personal", "role": "read-write"}])
    assert tools.recall_scope("agent-1", "console").classes == (
        "system",
        "knowledge",
        "app",
        "personal",
    )
