"""When and how a lane folds the oldest part of its event window into its summary (§11.3).

The runtime measures the prompt after every model response and tool result. `should_compact`
says yes when the compactable part outgrows its threshold (by default 80% of the model's context
window minus what is never compacted), when the window holds more than `event_window_size`
events, or after a manual trigger (the `choir.memory.compact` tool, `choirctl session compact`,
`/compact`), which only sets `WorkingMemory.forced`.

`compaction_request` picks what to fold (the oldest half of the window at least, more if that
is not enough to get back under half the threshold) and builds the LLM call. The fold never ends
inside a tool-call group, so no tool result outlives the call it answers. The lane marks the
call with `WorkingMemory.begin` and keeps working while it runs; `apply_compaction` then swaps in
the new summary and window boundary in one step and returns the `MemoryWriteCommitted` to commit.
A reply that is not a valid `MemoryDelta` is a `CompactionFailed` and changes nothing but the
pending mark, so the next trigger tries again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from choir.core.memory.fold_prompt import compaction_messages, parse_delta
from choir.core.memory.summaries.archives import marked
from choir.core.memory.working import WindowEvent, WorkingMemory
from choir.core.prompt.build import DEFAULT_WINDOW_SIZE, PromptSize
from choir.core.prompt.window import (
    Message,
    ResultView,
    estimate_tokens,
    event_messages,
    full_result,
)
from choir.protocol.log.events import (
    CompactionArchive,
    MemoryWriteCommitted,
    ModelOutput,
    ToolResultCommitted,
)

__all__ = [
    "RESPONSE_FORMAT",
    "CompactionApplied",
    "CompactionFailed",
    "CompactionPolicy",
    "CompactionRequest",
    "apply_compaction",
    "compaction_request",
    "should_compact",
]

RESPONSE_FORMAT: Final = {"type": "json_object"}
"""`response_format` for the compaction call, where the provider supports it."""

DEFAULT_MAX_SUMMARY_CHARS: Final = 12_000
"""Default cap on the summary text (about 3,000 tokens)."""

MIN_THRESHOLD_FRACTION: Final = 0.1
"""The threshold never drops below this share of the context window: when the fixed content
alone nearly fills the context, compacting on every step would only burn calls."""


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """The configured triggers (config.json: `event_window_size`, the model's context window)."""

    context_window_tokens: int = 128_000
    """The lane model's context window."""
    threshold_fraction: float = 0.8
    """Share of the context window the whole prompt may fill before compaction."""
    threshold_tokens: int | None = None
    """A fixed threshold for the compactable part, instead of the fraction rule."""
    event_window_size: int = DEFAULT_WINDOW_SIZE
    """Compactable events the window holds before the oldest are folded."""
    max_summary_chars: int = DEFAULT_MAX_SUMMARY_CHARS
    """A delta that would grow the summary text beyond this is refused (the model is told to
    rewrite it with mode `overwrite` well before)."""

    def threshold(self, fixed_tokens: int) -> int:
        """Tokens the compactable part may take next to `fixed_tokens` of fixed content."""
        if self.threshold_tokens is not None:
            return self.threshold_tokens
        budget = int(self.context_window_tokens * self.threshold_fraction) - fixed_tokens
        return max(budget, int(self.context_window_tokens * MIN_THRESHOLD_FRACTION))


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """The LLM call that folds the window's events up to `upto_rev` into the summary."""

    upto_rev: int
    """Pass it back to `apply_compaction` with the reply."""
    folded: tuple[WindowEvent, ...]
    """The events being folded, oldest first."""
    messages: tuple[Message, ...]
    """The chat messages to send (ask for JSON; see `RESPONSE_FORMAT`)."""


@dataclass(frozen=True, slots=True)
class CompactionApplied:
    """The new memory, and the event that records the change in the session log."""

    memory: WorkingMemory
    event: MemoryWriteCommitted


@dataclass(frozen=True, slots=True)
class CompactionFailed:
    """Nothing was folded; the window stays as it was and the next trigger retries."""

    code: Literal["invalid_delta", "stale", "summary_too_long"]
    message: str
    """One line for the lane's log."""
    memory: WorkingMemory
    """The memory unchanged, only no longer marked as compacting."""
    problems: tuple[str, ...] = ()
    """What was wrong with the reply, one line per problem."""


def should_compact(memory: WorkingMemory, size: PromptSize, policy: CompactionPolicy) -> bool:
    """Whether to start a compaction now (never while one is in flight)."""
    if memory.pending is not None or not memory.events:
        return False
    if memory.forced or len(memory.compactable()) > policy.event_window_size:
        return True
    return size.window_tokens > policy.threshold(size.fixed_tokens)


def compaction_request(
    memory: WorkingMemory,
    size: PromptSize,
    policy: CompactionPolicy,
    *,
    result_view: ResultView = full_result,
) -> CompactionRequest | None:
    """The call folding the oldest events; None when no whole tool group can be folded yet
    (a manual trigger then stays set until one can, e.g. once the open calls are answered)."""
    events = memory.events
    costs = [estimate_tokens(event_messages(item.event, result_view)) for item in events]
    cut = _safe_cut(events, _wanted_cut(costs, size, policy))
    if cut is None:
        return None
    folded = events[:cut]
    messages = compaction_messages(
        memory.lane, memory.summary, folded, result_view, policy.max_summary_chars
    )
    return CompactionRequest(folded[-1].rev, folded, tuple(messages))


def apply_compaction(
    memory: WorkingMemory,
    delta_json: str,
    upto_rev: int,
    *,
    max_summary_chars: int = DEFAULT_MAX_SUMMARY_CHARS,
    archive: CompactionArchive | None = None,
) -> CompactionApplied | CompactionFailed:
    """Fold the events up to `upto_rev` into the summary with the model's reply, atomically.
    With `archive`, the fold names its archive entry: the summary update ends with its marker
    (`choir.core.memory.summaries.archives`) and the event carries it."""
    pending = memory.pending
    stale = pending is not None and pending.upto_rev != upto_rev
    if stale or upto_rev < memory.window_start_rev:
        why = f"compaction up to rev {upto_rev} no longer matches the window; it will be redone"
        return CompactionFailed("stale", why, memory.abandon())
    delta = parse_delta(delta_json)
    if isinstance(delta, list):
        why = f"the compaction reply is not a valid memory delta: {delta[0]}"
        return CompactionFailed("invalid_delta", why, memory.abandon(), tuple(delta))
    if archive is not None:
        update = marked(delta.summary_update, archive.name)
        delta = delta.model_copy(update={"summary_update": update})
    summary = memory.summary.apply(delta)
    if len(summary.summary) > max_summary_chars:
        chars = len(summary.summary)
        why = f"the summary would grow to {chars} characters (max {max_summary_chars})"
        return CompactionFailed("summary_too_long", why, memory.abandon())
    event = MemoryWriteCommitted(
        summary_lane=memory.lane, delta=delta, window_start_rev=upto_rev + 1, archive=archive
    )
    return CompactionApplied(memory.folded(summary, upto_rev), event)


def _wanted_cut(costs: Sequence[int], size: PromptSize, policy: CompactionPolicy) -> int:
    """How many of the oldest events to fold: half at least, and enough to keep under half of
    the threshold and half of the window size."""
    keep_tokens = policy.threshold(size.fixed_tokens) // 2
    keep_count = policy.event_window_size // 2
    cut = (len(costs) + 1) // 2
    remaining = sum(costs[cut:])
    while cut < len(costs) and (remaining > keep_tokens or len(costs) - cut > keep_count):
        remaining -= costs[cut]
        cut += 1
    return cut


def _safe_cut(events: Sequence[WindowEvent], wanted: int) -> int | None:
    """The nearest fold size to `wanted` that splits no tool-call group; None if there is none.

    A group runs from a model output with tool calls to its last result. A call without a result
    keeps the group open until the lane's next tool-calling model output (the call may still be
    running), as `prompt_window` pairs them.
    """
    unsafe = _group_interiors(events)
    later = [cut for cut in range(wanted, len(events) + 1) if cut not in unsafe]
    if later:
        return later[0] or None
    earlier = [cut for cut in range(wanted - 1, 0, -1) if cut not in unsafe]
    return earlier[0] if earlier else None


def _group_interiors(events: Sequence[WindowEvent]) -> set[int]:
    """Fold sizes that would fold a model output but not every result of its calls."""
    unsafe: set[int] = set()
    for start, item in enumerate(events):
        if not isinstance(item.event, ModelOutput) or not item.event.tool_calls:
            continue
        waiting = {call.id for call in item.event.tool_calls}
        end = len(events)
        for index in range(start + 1, len(events)):
            later = events[index].event
            if isinstance(later, ToolResultCommitted):
                waiting.discard(later.call_id)
            if not waiting:
                end = index + 1
                break
            if isinstance(later, ModelOutput) and later.tool_calls:
                end = index
                break
        unsafe.update(range(start + 1, end + (1 if waiting and end == len(events) else 0)))
    return unsafe
