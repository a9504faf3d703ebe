"""One line per committed event, and the full text of one, for the event timeline and Cores.

Pure: an event is the JSON object `session.events` sends (rev, lane, event_type, created_at,
hash, payload). The line says what happened in the words an operator scans for — the tool and
its status, the job and its outcome, the first words of a message — and never grows past
`SUMMARY_CHARS`: a huge payload is shown whole only when expanded, and even then cut at
`DETAIL_CHARS` unless asked for all of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from choir.protocol.operator.views import EventView


Payload = dict[str, Any]

SUMMARY_CHARS: Final = 240
DETAIL_CHARS: Final = 20_000


def clip(text: str, limit: int = SUMMARY_CHARS) -> str:
    """`text` on one line, at most `limit` characters (an ellipsis says it was cut)."""
    if len(text) <= limit and text.isprintable():
        return text  # the common case, and the cheap one
    flat = " ".join(text[: limit * 2].split())  # never scan more of a huge text than shown
    return flat if len(flat) <= limit and len(text) <= limit * 2 else flat[: limit - 1] + "…"


def _args(arguments: Any) -> str:
    if not isinstance(arguments, dict) or not arguments:
        return ""
    return " " + ", ".join(f"{key}={_short(value)}" for key, value in arguments.items())


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def _model_output(p: Payload) -> str:
    calls = [call.get("name", "?") for call in p.get("tool_calls") or []]
    text = p.get("text") or ""
    tools = f" → {', '.join(calls)}" if calls else ""
    return f"{text}{tools}" if text else (f"calls{tools}" if calls else "(empty answer)")


def _llm_call(p: Payload) -> str:
    cost = p.get("cost_usd")
    shown = f"${cost:.4f}" if isinstance(cost, int | float) else "cost unknown"
    cached = f" ({p['cached_tokens']} cached)" if p.get("cached_tokens") else ""
    return (
        f"{p.get('model', '?')} {p.get('prompt_tokens', 0)}+{p.get('completion_tokens', 0)} "
        f"tokens{cached}, {p.get('latency_ms', 0)} ms, {shown}"
    )


def _tool_result(p: Payload) -> str:
    result = p.get("result") or {}
    status = result.get("status", "?")
    took = f" {p['duration_ms']} ms" if p.get("duration_ms") is not None else ""
    detail = result.get("error") or result.get("output") or ""
    if isinstance(detail, dict):
        detail = detail.get("message") or json.dumps(detail, default=str)
    return f"{p.get('tool', '?')} {status}{took}: {detail}"


def _recall_line(p: Payload) -> str:
    # imported here: its module loads pydantic and the event models (~0.2 s), which the
    # console's first paint would otherwise wait on
    from choir.core.memory.recall import recall_line

    return recall_line(p)


def _core_event(p: Payload) -> str:
    event = p.get("event") or {}
    return f"{p.get('job_name', '?')} {event.get('kind', '?')}: {core_event_text(event)}"


def core_event_text(event: Payload) -> str:
    """The gist of a CoreEvent (§12.7): the summary, phase, question or message it carries."""
    kind = event.get("kind")
    if kind == "progress":
        percent = f" {event['percent']:.0f}%" if event.get("percent") is not None else ""
        return f"{event.get('phase', '')}{percent} {event.get('focus', '')}".strip()
    if kind == "plan":
        steps = event.get("steps") or []
        done = sum(bool(step.get("done")) for step in steps)
        return f"{done}/{len(steps)} steps: " + "; ".join(s.get("description", "") for s in steps)
    if kind == "tool_proposal":
        return f"{event.get('tool', '?')} — {event.get('why', '')}"
    for key in ("summary", "question", "description", "message"):
        if event.get(key):
            return str(event[key])
    return json.dumps(event, default=str)


_SUMMARIES: Final[dict[str, Callable[[Payload], str]]] = {
    "user_msg": lambda p: p.get("text", ""),
    "model_output": _model_output,
    "tool_call_requested": lambda p: f"{p.get('tool', '?')}{_args(p.get('arguments'))}",
    "tool_call_committed": lambda p: (
        f"{p.get('tool', '?')} {p.get('side_effect', '')} locks "
        + (", ".join(f"{lk['resource']}:{lk['mode']}" for lk in p.get("locks") or []) or "none")
    ),
    "tool_result_committed": _tool_result,
    "memory_write_committed": lambda p: f"summary of {p.get('summary_lane', '?')} updated",
    "core_started": lambda p: (
        f"{(p.get('job') or {}).get('job_name', '?')}: {(p.get('job') or {}).get('task_spec', '')}"
    ),
    "core_stopped": lambda p: (
        f"{p.get('job_name', '?')} {p.get('outcome', '?')}: {p.get('report', '')}"
    ),
    "injected_instruction": lambda p: f"[{p.get('source', '?')}] {p.get('content', '')}",
    "cancelled": lambda p: f"{p.get('target', '?')}: {p.get('reason', '')}",
    "skill_transition_committed": lambda p: (
        f"{p.get('skill', '?')} {p.get('from') or '∅'} → {p.get('to', '?')} on {p.get('on', '')}"
    ),
    "core_event_emitted": _core_event,
    "approval_resolved": lambda p: f"{p.get('approval_id', '?')} {p.get('status', '?')}",
    "agent_replied": lambda p: f"[{p.get('category', 'reply')}] {p.get('text', '')}",
    "session_summary": lambda p: p.get("summary", ""),
    "llm_call": _llm_call,
    "memory_recalled": _recall_line,
}


def summary(event: EventView) -> str:
    """The event's one-line gist (without rev, lane or type)."""
    payload = event.payload
    describe = _SUMMARIES.get(event.event_type)
    try:
        text = describe(payload) if describe else json.dumps(payload, default=str)
    except (AttributeError, KeyError, TypeError, ValueError):  # an odd payload still shows
        text = json.dumps(payload, default=str)
    return clip(str(text))


def detail(event: EventView, *, everything: bool = False) -> tuple[str, int]:
    """The event pretty-printed, and how many characters were left out (0: all shown)."""
    head = {
        "rev": event.rev,
        "lane": event.lane,
        "event_type": event.event_type,
        "created_at": event.created_at,
        "hash": event.hash,
    }
    text = json.dumps({**head, "payload": event.payload}, indent=2, default=str)
    if everything or len(text) <= DETAIL_CHARS:
        return text, 0
    return text[:DETAIL_CHARS], len(text) - DETAIL_CHARS
