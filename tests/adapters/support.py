"""Helpers for tests of the LLM client against the real scripted server."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from choir.adapters.llm.client import CompletionRequest, ModelSettings
from choir.protocol.tooling.manifest import ToolManifest
from choir.scripted import ScriptedModelServer
from tests.harness.log_lines import log_lines

SEED_TOOLS = Path(__file__).parents[2] / "choir" / "_seeds" / "global" / "tools"


def tool_view(name: str) -> dict[str, Any]:
    """The LLM view of a seeded tool manifest, as a lane offers it."""
    manifest = ToolManifest.model_validate_json((SEED_TOOLS / f"{name}.json").read_text())
    return manifest.llm_view()


def settings_for(server: ScriptedModelServer, model: str = "m", **fields: Any) -> ModelSettings:
    return ModelSettings(name="test-model", model=model, endpoint=server.url, **fields)


def ask(
    settings: ModelSettings,
    text: str = "hello",
    *,
    tools: Sequence[dict[str, Any]] = (),
    lane: str = "edge",
    **fields: Any,
) -> CompletionRequest:
    messages = [{"role": "system", "content": "You are a test."}, {"role": "user", "content": text}]
    return CompletionRequest(settings, messages, lane=lane, tools=tools, **fields)


@contextmanager
def llm_log_lines() -> Iterator[list[dict[str, Any]]]:
    """The JSON lines the client logs while the block runs, as the agent log would hold them."""
    with log_lines("choir.llm", "agent-1") as lines:
        yield lines
