"""The idle roll-up (design 004): the summary tree's root, written by the agent's own model.

While edge waits for a message, `IdleRollup.while_idle` runs beside the wait: after config.json's
`rollup_idle_s` without a user message (0: never) it asks choird for the session summaries no
roll-up covers yet (`choir.memory.rollup`, a host tool never offered to the model), has the
model write one roll-up over them (`choir.core.memory.summaries.rollup`, bounded) and commits it in
edge's lane as a `MemoryRollup` event — the source of truth choird stores as `rollup/<ISO minute>`.

It never holds a user up: a message arriving cancels it wherever it is (the model call
included); nothing of a cancelled roll-up is kept, the next idle period starts over. A failure
(choird's memory away, the model failing or answering nothing) is logged and tried again after
the next idle period; the user never sees it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from choir.adapters.llm.client import LlmError
from choir.agent.kernel.dispatch import HostBridge
from choir.core.memory.summaries.rollup import (
    DEFAULT_IDLE_S,
    MAX_COVERED,
    PendingSummary,
    parse_rollup,
    rollup_messages,
    rollup_name,
)
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import EDGE_LANE, MemoryRollup

if TYPE_CHECKING:
    from choir.agent.lanes.support import LaneKit

log = get_logger("choir.agent.lanes.rollup")

TOOL: Final = "choir.memory.rollup"
OFF_RECHECK_S: Final = 60.0
"""With roll-ups off (`rollup_idle_s` 0), how often the config is read again (it may change)."""
SOURCES_TIMEOUT_S: Final = 30.0
"""The longest choird may take to list the summaries (its memory may be starting)."""


class IdleRollup:
    """Rolls up session summaries while edge is idle; `config` reads the dynamic config."""

    def __init__(
        self, kit: LaneKit, host: HostBridge, config: Callable[[], Mapping[str, Any]]
    ) -> None:
        self._kit = kit
        self._host = host
        self._config = config

    async def while_idle(self) -> None:
        """Run for as long as edge is idle (the caller cancels it when a message comes): after
        each `rollup_idle_s` of quiet, roll up what is pending."""
        while True:
            idle_s = self._idle_s()
            if idle_s <= 0:
                await asyncio.sleep(OFF_RECHECK_S)
                continue
            await asyncio.sleep(idle_s)
            try:
                await self.roll_up()
            except Exception as error:  # never the user's problem: logged, tried again
                log.warning(
                    "memory roll-up failed; retried when idle again",
                    fields={"error": f"{type(error).__name__}: {error}"},
                )

    async def roll_up(self) -> MemoryRollup | None:
        """One roll-up over the pending summaries, committed; None when there was nothing to
        roll up or it failed (logged). Cancellation leaves nothing behind."""
        pending = await self._pending()
        if not pending:
            return None
        covered = pending[:MAX_COVERED]
        name = rollup_name(datetime.now(UTC))
        if name in self._names():  # one a minute: the name is the minute
            log.info("memory roll-up deferred: one was written this minute", fields={"name": name})
            return None
        try:
            completion = await self._kit.complete(
                EDGE_LANE, rollup_messages(covered), [], purpose="rollup"
            )
        except (LlmError, ChoirError) as error:
            log.warning(
                "memory roll-up not written: the model call failed; retried when idle again",
                fields={"error": error.message},
            )
            return None
        text = parse_rollup(completion.text)
        if text is None:
            log.warning("memory roll-up not written: the model answered nothing; retried later")
            return None
        event = MemoryRollup(name=name, text=text, covers=[summary.name for summary in covered])
        self._kit.kernel.arbiter.commit(EDGE_LANE, event)
        log.info("memory roll-up committed", fields={"name": name, "covers": len(covered)})
        return event

    async def _pending(self) -> list[PendingSummary]:
        """The summaries choird lists as not rolled up, but those this log rolled up already
        (stored or not yet); empty when choird cannot say (logged)."""
        arguments = {"limit": MAX_COVERED, "besides": self._covered()}
        call_id = f"rollup-{uuid.uuid4().hex}"
        try:
            async with asyncio.timeout(SOURCES_TIMEOUT_S):
                result = await self._host.execute_host_tool(
                    TOOL, call_id, arguments, lane=EDGE_LANE
                )
        except Exception as error:  # a broken link, choird slow or away: later
            log.warning(
                "memory roll-up: the summaries could not be listed; retried when idle again",
                fields={"error": f"{type(error).__name__}: {error}"},
            )
            return []
        if result.status != "success":
            log.warning(
                "memory roll-up: choird did not list the summaries; retried when idle again",
                fields={"error": f"{result.error_code}: {result.summary}"},
            )
            return []
        listed = result.data.get("summaries")
        if not isinstance(listed, list):
            return []
        return [
            PendingSummary(str(item["name"]), str(item["text"]))
            for item in listed
            if isinstance(item, dict) and "name" in item and "text" in item
        ]

    def _covered(self) -> list[str]:
        """Summary names the session's own roll-up events cover."""
        return [name for event in self._rollups() for name in event.get("covers", ())]

    def _names(self) -> set[str]:
        return {str(event.get("name")) for event in self._rollups()}

    def _rollups(self) -> list[dict[str, Any]]:
        return [
            record.event
            for record in self._kit.kernel.log
            if record.event.get("kind") == "memory_rollup"
        ]

    def _idle_s(self) -> int:
        value = self._config().get("rollup_idle_s")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return DEFAULT_IDLE_S
