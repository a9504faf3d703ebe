"""The session summary made at graceful stop (§11.5, §11.8, §17.2).

One LLM call over what edge's working memory holds (its reference summary and event window)
asks for a JSON object with `summary`, `topics`, `decisions` and `open_items`; the answer becomes
the `SessionSummary` event that choird's memory pipeline promotes to mid-term memory. The call
has `summary_timeout_ms`: past it, or when the reply is not such an object, the stop goes on
without a summary rather than hang — the session log itself is durable either way. Why there
is none (`Attempt.skipped`) goes to choird with TERMINATE_SELF, so `agent stop` can say so.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from pydantic import ValidationError

from choir.adapters.llm.client import LlmError
from choir.agent.stopping import Drain, unless_hurried
from choir.core.memory.working import WorkingMemory
from choir.core.prompt.window import Message, ResultView, full_result, window_messages
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import EDGE_LANE, SessionSummary
from choir.protocol.wire.payloads import SummaryOutcome, SummarySkipped

if TYPE_CHECKING:
    from choir.agent.lanes.support import LaneKit

log = get_logger("choir.agent.lanes.summary")

SUMMARY_MARKER: Final = "Summarize this session for long-term memory"
"""Starts the summary request's last user message (scripted models match on it)."""

_INSTRUCTIONS: Final = """\
The session with the user is ending. Write its summary for long-term memory: what happened, \
from the agent's side, concisely. Answer with one JSON object and nothing else: \
{"summary": "...", "topics": ["..."], "decisions": ["..."], "open_items": ["..."]}. \
Decisions are what was agreed with the user; open items are work left unfinished."""

_FENCE: Final = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)


def summary_messages(memory: WorkingMemory, result_view: ResultView = full_result) -> list[Message]:
    """The chat messages of the summary call over edge's `memory`."""
    folded = memory.summary.summary
    earlier = f"Earlier in the session (reference summary): {folded}\n\n" if folded else ""
    window = window_messages(memory.window(len(memory.events) + 1), result_view)
    transcript = json.dumps(window, ensure_ascii=False, default=str)
    body = f"{SUMMARY_MARKER}.\n\n{earlier}The conversation, as chat messages:\n{transcript}"
    return [{"role": "system", "content": _INSTRUCTIONS}, {"role": "user", "content": body}]


def parse_summary(reply: str) -> SessionSummary | None:
    """The `SessionSummary` in a reply (a fenced JSON object is accepted); None if none."""
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data: Any = json.loads(text)
        return SessionSummary.model_validate(data) if isinstance(data, dict) else None
    except (ValueError, ValidationError):
        return None


class Attempt(NamedTuple):
    """The summary, or why there is none."""

    summary: SessionSummary | None
    skipped: SummarySkipped | None = None


async def session_summary(kit: LaneKit, timeout_ms: int) -> Attempt:
    """Ask the model for the session summary within `timeout_ms`; why not when it cannot be had."""
    memory = kit.memories.lanes.get(EDGE_LANE)
    if timeout_ms <= 0:
        log.info("session summary skipped: its timeout is 0")
        return Attempt(None, "disabled")
    if memory is None or not memory.events:
        log.info("session summary skipped: nothing to summarize")
        return Attempt(None, "nothing_to_summarize")
    messages = summary_messages(memory, kit.kernel.registry.result_for_prompt)
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            completion = await kit.complete(EDGE_LANE, messages, [], purpose="summary")
    except TimeoutError:
        log.warning("session summary skipped: the model took too long", fields={"ms": timeout_ms})
        return Attempt(None, "timed_out")
    except (LlmError, ChoirError) as error:
        log.warning("session summary skipped: the call failed", fields={"error": error.message})
        return Attempt(None, "call_failed")
    summary = parse_summary(completion.text)
    if summary is None:
        log.warning("session summary skipped: the reply is not a summary object")
        return Attempt(None, "not_a_summary")
    return Attempt(summary)


async def summarize_at_stop(kit: LaneKit, timeout_ms: int, drain: Drain) -> SummaryOutcome:
    """The graceful stop's summary, committed in edge's lane when made; how it went.

    A hurried stop (a second request, choird's SIGTERM) cancels the call: no summary then.
    """
    attempt = await unless_hurried(session_summary(kit, timeout_ms), drain)
    if attempt is None:
        log.warning("session summary skipped: the stop was hurried", fields={"ms": timeout_ms})
        return SummaryOutcome(skipped="hurried", timeout_ms=timeout_ms)
    if attempt.summary is None:
        return SummaryOutcome(skipped=attempt.skipped, timeout_ms=timeout_ms)
    entry = kit.kernel.arbiter.commit(EDGE_LANE, attempt.summary)
    return SummaryOutcome(rev=entry.rev, timeout_ms=timeout_ms)
