"""Relevant context each turn (design 004): edge asks choird for the memories relevant to a
user message and gets back the `MemoryRecalled` event it commits before its first LLM call.

choird answers `choir.memory.recall` (`choir.daemon.memory.tools.recall`) within config.json's
`recall_deadline_ms`. Nothing here can fail or hold up a turn: an error answer, a broken link
to choird or no answer in time becomes an event with `skipped` saying why, and the turn goes on
without memories. A recall that found nothing relevant commits nothing either (nothing was
put into the prompt: an event per message saying so would only bury the log), and
`recall_budget_tokens` 0 asks nothing.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from choir.agent.kernel.dispatch import HostBridge
from choir.core.memory.recall import DEFAULT_BUDGET_TOKENS
from choir.logs import get_logger
from choir.protocol import EDGE_LANE, MemoryRecalled, RecalledItem

log = get_logger("choir.agent.lanes.recall")

TOOL: Final = "choir.memory.recall"
DEFAULT_DEADLINE_MS: Final = 150
WARM_DEADLINE_MS: Final = 60_000
"""How long choird may take to load memory for this agent (its start, the embedder, BM25)."""


class Recall:
    """Asks choird for a message's memories; `config` reads the current dynamic config."""

    def __init__(self, host: HostBridge, config: Callable[[], Mapping[str, Any]]) -> None:
        self._host = host
        self._config = config

    async def warm(self) -> None:
        """Have choird load what this agent's recalls need (memory, embedder, BM25 index) while
        no message waits: a cold first recall would miss its deadline. Never raises."""
        if _setting(self._config(), "recall_budget_tokens", DEFAULT_BUDGET_TOKENS) <= 0:
            return
        arguments = {"text": "", "budget_tokens": 0, "deadline_ms": WARM_DEADLINE_MS, "warm": True}
        started = time.monotonic()
        try:
            result = await self._host.execute_host_tool(
                TOOL, f"recall-warm-{uuid.uuid4().hex}", arguments, lane=EDGE_LANE
            )
        except Exception as error:  # the first recall will say what is wrong
            log.info("recall warm-up failed", fields={"error": f"{type(error).__name__}: {error}"})
            return
        took = round((time.monotonic() - started) * 1000)
        log.info("recall warm-up", fields={"status": result.status, "took_ms": took})

    async def __call__(self, text: str, message_id: str | None) -> MemoryRecalled | None:
        """The event to commit for the message; None when recall is off (budget 0) or found
        nothing relevant."""
        config = self._config()
        budget = _setting(config, "recall_budget_tokens", DEFAULT_BUDGET_TOKENS)
        deadline_ms = _setting(config, "recall_deadline_ms", DEFAULT_DEADLINE_MS)
        if budget <= 0:
            return None
        started = time.monotonic()
        arguments = {"text": text, "budget_tokens": budget, "deadline_ms": deadline_ms}
        call_id = f"recall-{uuid.uuid4().hex}"
        skipped: str | None = None
        data: dict[str, Any] = {}
        try:
            async with asyncio.timeout(deadline_ms / 1000):
                result = await self._host.execute_host_tool(
                    TOOL, call_id, arguments, lane=EDGE_LANE
                )
            if result.status == "success":
                data = result.data
            else:
                skipped = f"{result.error_code or result.status}: {result.summary}"
        except TimeoutError:
            skipped = f"choird did not answer within the {deadline_ms} ms deadline"
        except Exception as error:  # any failure of the call: the turn goes on without it
            skipped = f"the recall failed: {type(error).__name__}: {error}"
        took = round((time.monotonic() - started) * 1000)
        try:
            items = [RecalledItem.model_validate(item) for item in data.get("items") or []]
        except ValidationError:
            items, skipped = [], "choird sent a malformed recall answer"
        if skipped is not None:
            log.warning("memories not recalled", fields={"why": skipped, "took_ms": took})
        elif not items:
            return None
        note = data.get("note")
        return MemoryRecalled(
            message_id=message_id,
            items=items,
            tokens=sum(item.tokens for item in items),
            budget_tokens=budget,
            took_ms=took,
            skipped=skipped,
            note=note if isinstance(note, str) else None,
        )


def _setting(config: Mapping[str, Any], key: str, default: int) -> int:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default
