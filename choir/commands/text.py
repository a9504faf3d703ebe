"""Answers as readable lines for a chat: what a DM replies to a command (never raw JSON).

A generic layout (`key: value`, lists as `- a=1 · b=2`, long values cut) serves every verb;
events, approvals and the progress of long verbs get lines of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

WIDTH: Final = 160
"""Longest line a reply carries; the rest is cut with an ellipsis."""


def cut(text: str, width: int = WIDTH) -> str:
    """One line: inner whitespace collapsed (the indentation kept), cut at `width`."""
    text = str(text)
    indent = text[: len(text) - len(text.lstrip(" "))]
    text = indent + " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={scalar(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list | tuple):
        return ", ".join(scalar(v) for v in value) or "none"
    return str(value)


def readable(answer: Any, indent: str = "") -> list[str]:
    """Any answer as lines: nested objects indented, lists of objects one line per item."""
    if not isinstance(answer, Mapping):
        return [cut(indent + scalar(answer))]
    lines: list[str] = []
    for key, value in answer.items():
        if isinstance(value, Mapping) and value and indent == "":
            lines.append(f"{key}:")
            lines.extend(readable(value, indent + "  "))
        elif isinstance(value, list) and value and isinstance(value[0], Mapping):
            lines.append(f"{indent}{key}:")
            lines.extend(cut(f"{indent}- {item_line(item)}") for item in value)
        else:
            lines.append(cut(f"{indent}{key}: {scalar(value)}"))
    return lines


def item_line(item: Mapping[str, Any]) -> str:
    return " · ".join(f"{key}={scalar(value)}" for key, value in item.items())


def status_lines(status: Mapping[str, Any]) -> list[str]:
    """`agent.status` in a few lines: state, session, runtime, bindings, skill, lanes, budget."""
    session = status.get("session_id")
    head = f"{status.get('agent_id')}: {status.get('state')}"
    if session:
        head += f", session {session} ({status.get('session_status')})"
    if status.get("uptime_s") is not None:
        head += f", up {float(status['uptime_s']):.0f} s"
    lines = [head]
    runtime = [f"runtime {status['runtime']}"] if status.get("runtime") else []
    bindings = status.get("bindings") or {}
    lines.append(" · ".join(runtime + [f"{k} {v}" for k, v in bindings.items() if v]))
    lines.append(f"skill: {status.get('skill') or '-'}")
    for lane in status.get("lanes") or []:
        step = f", step {lane['step']}" if lane.get("step") is not None else ""
        skill = f", skill {lane['skill']}" if lane.get("skill") else ""
        lines.append(f"- {lane.get('lane')}: {lane.get('state')}{skill}{step}")
    budgets, left = status.get("budgets") or {}, status.get("budget_remaining") or {}
    if "total_session_tokens" in left:
        lines.append(
            f"tokens left: {left['total_session_tokens']} of {budgets.get('total_session_tokens')}"
        )
    if status.get("config_behind"):
        lines.append(f"config: behind (runs {status.get('config_version')})")
    if status.get("held_jobs"):
        lines.append(f"held jobs: {scalar(status['held_jobs'])} (see choirctl session recover)")
    return [cut(line) for line in lines if line]


def event_lines(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """`session.events`: one line per event, `rev lane type: what it says`."""
    if not events:
        return ["no events yet"]
    lines = []
    for event in events:
        payload = event.get("payload") or {}
        said = payload.get("text") or payload.get("summary") or payload.get("name") or ""
        what = f": {said}" if said else ""
        lines.append(cut(f"#{event['rev']} {event['lane']} {event['event_type']}{what}"))
    return lines


def knowledge_lines(answer: Mapping[str, Any]) -> list[str]:
    """`memory.about`: one line per knowledge item, `name (memory): text`."""
    items = answer.get("items") or []
    if not items:
        return [f"{answer.get('agent_id')} learnt nothing from {answer.get('user')}"]
    lines = []
    for item in items:
        memory = str(item.get("memory", "knowledge"))
        memory += f" of {item['user']}" if item.get("user") else ""
        lines.append(cut(f"{item['name']} ({memory}): {item.get('text', '')}"))
    return lines


def approval_lines(approvals: Sequence[Mapping[str, Any]]) -> list[str]:
    """Pending approvals, numbered: `/approve <n>` picks one."""
    lines = []
    for number, approval in enumerate(approvals, start=1):
        payload = approval.get("payload") or {}
        summary = payload.get("summary") or payload.get("description") or scalar(payload)
        lines.append(
            cut(
                f"{number}. {approval['approval_id']} {approval['agent_id']} "
                f"{approval['request_type']}: {summary}"
            )
        )
    return lines


def progress_line(item: Mapping[str, Any]) -> str:
    """One progress item of a build or update, as `choirctl agent update` prints it."""
    agent = item.get("agent_id", "")
    if item.get("phase") == "outcome":
        outcome = item.get("outcome") or {}
        return f"{outcome.get('agent_id')} {outcome.get('outcome')}: {outcome.get('reason')}"
    if item.get("log") is not None:
        return f"  | {item['log']}"
    if item.get("phase") == "reembed":
        return f"{agent}: re-embedded {bar(item.get('step') or 0, item.get('total') or 0)}"
    if item.get("phase") == "reembedded":
        row = item.get("reembedded") or {}
        model = f"{row.get('model')} ({row.get('dims')})"
        return f"{agent}: re-embed finished, {row.get('embedded')} vectors of {model} stored"
    if isinstance(item.get("step"), int):
        total = f"/{item['total']}" if item.get("total") else ""
        detail = f": {item['detail']}" if item.get("detail") else ""
        return f"{agent}: build step {item['step']}{total} {item.get('title', '')}{detail}"
    return f"{agent}: {item.get('title', '')}"


BAR_WIDTH = 30


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """`[#########.........]  300/900 vectors (33%)`: a progress bar as text, for any terminal
    and a DM alike."""
    share = min(done / total, 1.0) if total > 0 else 1.0
    filled = round(share * width)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} vectors ({share:.0%})"
