"""Working-memory compaction of the live lanes (§11.3): when to fold, and the fold itself.

The lanes call `measure` with the size of each prompt they build (so after every model response
and tool result). When `should_compact` says yes the fold runs as a task of its own: the lane
keeps working with its current window while the compaction LLM call is out. A valid
`MemoryDelta` swaps the lane's `WorkingMemory` first and then commits `MemoryWriteCommitted`
through the arbiter — in that order, so the commit's own observation sees a boundary it already
has and is not applied twice. A failed call or an invalid reply only clears the pending mark:
the window stays and the next trigger retries.

Manual triggers (the `choir.memory.compact` tool, the `compact` push) set `forced` on the lane's
memory; the fold starts at the lane's next measurement, or at once when the lane is idle.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from choir.adapters.llm.client import Completion, LlmError
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.lanes.memories import Memories
from choir.agent.replication.live_config import DynamicState
from choir.agent.wiring import Kernel
from choir.core.memory.compaction import (
    CompactionApplied,
    CompactionPolicy,
    CompactionRequest,
    apply_compaction,
    compaction_request,
    should_compact,
)
from choir.core.memory.summaries.archives import archive_name, iso_minute
from choir.core.prompt.build import DEFAULT_WINDOW_SIZE, PromptSize
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import ToolResult
from choir.protocol.log.events import CompactionArchive

log = get_logger("choir.agent.compaction")

DEFAULT_CONTEXT_TOKENS: Final = 128_000
"""Context window assumed for a model whose config does not give one."""

Complete = Callable[[str, list[dict[str, Any]], list[dict[str, Any]]], Awaitable[Completion]]
"""One LLM call of a lane with the current config's model: (lane, messages, tools)."""


class CompactionDriver:
    """Starts, finishes and abandons the compactions of one session's lanes."""

    def __init__(
        self,
        kernel: Kernel,
        state: DynamicState,
        memories: Memories,
        complete: Complete,
        *,
        session_id: str = "",
    ) -> None:
        self._kernel, self._state, self._memories = kernel, state, memories
        self._complete = complete
        self._session_id = session_id
        """Names the archives the folds leave (`choir.core.memory.summaries.archives`)."""
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._sizes: dict[str, PromptSize] = {}
        self.applied = 0
        """Compactions committed in this process (telemetry and tests)."""

    def policy(self) -> CompactionPolicy:
        """The triggers of the current config: its window size, the bound model's context."""
        config = self._state.current()
        size = config.data.get("event_window_size")
        bindings = config.bindings
        context = _context_window(config.data, bindings.llm if bindings is not None else None)
        return CompactionPolicy(
            context_window_tokens=context,
            event_window_size=size if isinstance(size, int) else DEFAULT_WINDOW_SIZE,
        )

    def measure(self, lane: str, size: PromptSize) -> bool:
        """After a model response or tool result: start a fold when it is due; True if started."""
        self._sizes[lane] = size
        memory = self._memories.lanes.get(lane)
        if memory is None or lane in self._tasks:
            return False
        policy = self.policy()
        if not should_compact(memory, size, policy):
            return False
        request = compaction_request(
            memory, size, policy, result_view=self._kernel.registry.result_for_prompt
        )
        if request is None:
            return False
        self._memories.lanes[lane] = memory.begin(request.upto_rev)
        task = asyncio.get_running_loop().create_task(
            self._fold(lane, request, policy),
            name=f"compact:{lane}",
        )
        self._tasks[lane] = task
        task.add_done_callback(lambda _: self._tasks.pop(lane, None))
        return True

    def request(self, lane: str | None = None) -> list[str]:
        """A manual trigger for `lane` (every live lane when None); the lanes it reached."""
        lanes = [lane] if lane is not None else list(self._memories.lanes)
        reached = []
        for name in lanes:
            memory = self._memories.lanes.get(name)
            if memory is None:
                continue
            self._memories.lanes[name] = memory.request_compaction()
            reached.append(name)
            size = self._sizes.get(name)
            if size is not None:
                self.measure(name, size)
        return reached

    async def hook(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        """`choir.memory.compact`: fold the calling lane's oldest events soon."""
        if not self.request(proposal.lane):
            return ToolResult.fail("not_available", f"lane {proposal.lane} has no working memory")
        return ToolResult.ok(
            "compaction requested: the oldest events are folded into your reference summary "
            "while you keep working"
        )

    async def settle(self) -> None:
        """Wait for the folds in flight (tests and graceful stop)."""
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        """Cancel the folds in flight; their lanes keep their windows."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _fold(self, lane: str, request: CompactionRequest, policy: CompactionPolicy) -> None:
        upto_rev = request.upto_rev
        try:
            completion = await self._complete(lane, list(request.messages), [])
        except (LlmError, ChoirError) as error:
            log.warning("compaction call failed", fields={"lane": lane, "error": error.message})
            self._abandon(lane)
            return
        except BaseException:
            self._abandon(lane)
            raise
        memory = self._memories.lanes.get(lane)
        if memory is None:
            return  # the lane ended while the call was out
        archive = CompactionArchive(
            name=archive_name(self._session_id, upto_rev),
            folded_from_rev=request.folded[0].rev,
            archived_at=iso_minute(datetime.now(UTC)),
        )
        outcome = apply_compaction(
            memory,
            completion.text,
            upto_rev,
            max_summary_chars=policy.max_summary_chars,
            archive=archive,
        )
        self._memories.lanes[lane] = outcome.memory
        if not isinstance(outcome, CompactionApplied):
            why = {"lane": lane, "code": outcome.code, "why": outcome.message}
            log.warning("compaction refused", fields=why)
            return
        self._kernel.arbiter.commit(lane, outcome.event)
        self.applied += 1
        fields = {"lane": lane, "upto_rev": upto_rev, "archive": archive.name}
        log.info("working memory compacted", fields=fields)

    def _abandon(self, lane: str) -> None:
        memory = self._memories.lanes.get(lane)
        if memory is not None:
            self._memories.lanes[lane] = memory.abandon()


def _context_window(data: Mapping[str, Any], model_name: str | None) -> int:
    """The bound model's `context_window_tokens`, or the policy default."""
    model = (data.get("models") or {}).get(model_name) if model_name else None
    tokens = model.get("context_window_tokens") if isinstance(model, Mapping) else None
    return tokens if isinstance(tokens, int) else DEFAULT_CONTEXT_TOKENS
