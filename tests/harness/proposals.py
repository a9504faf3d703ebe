"""A tool proposal an agent's scripted model makes (`choir.propose.tool`), for approval tests."""

from __future__ import annotations

from typing import Any

TOOL_PROPOSAL: dict[str, Any] = {
    "manifest": {
        "llm": {
            "name": "weather.lookup",
            "description": "Look up today's weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        "runtime": {"implementation": "external", "timeout_ms": 5000, "side_effect": "none"},
    },
    "intended_behavior": "Fetch the forecast for `city` and return temperature and sky.",
    "rationale": "Operators keep asking about the weather.",
}
