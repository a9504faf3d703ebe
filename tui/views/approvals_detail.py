"""How the Approvals tab words an approval: ages, countdowns, summaries and the detail pane.

Pure — no Textual, no I/O — so the words are tested on their own. Payloads are what agents sent
with a `choir.propose.*` tool: prose fields (`summary`, `rationale`, `intended_behavior`) are shown
as text, objects (a tool manifest, a skill spec) as indented JSON, and a config change's `patch`
(a JSON merge patch over config.json) as the changes it would make to the running config, old
value → new value. Long blocks are cut to `COLLAPSED_LINES` until the operator expands them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from choir.protocol.operator.views import ApprovalView


COLLAPSED_LINES: Final = 12
"""Lines of each JSON block shown before the operator expands the detail."""
PROSE: Final = ("summary", "description", "rationale", "intended_behavior")
"""Payload fields shown as text, in this order, before any structured field."""
_ABSENT: Final = object()


def parse_time(value: str | None) -> datetime | None:
    return None if not value else datetime.fromisoformat(value)


def duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`: whole seconds, the two largest units."""
    total = max(int(seconds), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def age(approval: ApprovalView, now: datetime) -> str:
    created = parse_time(approval.created_at)
    return "?" if created is None else duration((now - created).total_seconds())


def countdown(approval: ApprovalView, now: datetime, timeout_ms: int | None) -> str:
    """Time left before the approval times out (a rejection, §19.6), or `due` once it is."""
    created = parse_time(approval.created_at)
    if created is None or timeout_ms is None:
        return "?"
    left = timeout_ms / 1000 - (now - created).total_seconds()
    return duration(left) if left >= 1 else "due"


def summary(payload: Mapping[str, Any], width: int = 60) -> str:
    """The proposal's own one-liner, else what it proposes (choirctl's `approval list`)."""
    for key in ("summary", "description", "rationale"):
        text = payload.get(key)
        if isinstance(text, str) and text.strip():
            return _cut(" ".join(text.split()), width)
    for key in ("manifest", "spec"):
        named = payload.get(key)
        if isinstance(named, Mapping):
            name = named.get("name") or (named.get("llm") or {}).get("name")
            if name:
                return _cut(f"{key} {name}", width)
    return _cut(json.dumps(payload, sort_keys=True), width)


def resolution(approval: ApprovalView) -> str:
    """`approved by choirctl`, `rejected (timed out)`…: how a resolved approval ended."""
    status = approval.status.replace("_", " ")
    by = approval.resolved_by
    if by == "timeout":
        return f"{status} (timed out)" if status != "timed out" else status
    return f"{status} by {by}" if by else status


def patch_changes(config: Mapping[str, Any], patch: Mapping[str, Any]) -> list[str]:
    """A JSON merge patch as the lines it would change: `~ path: old → new`, `+ path: new`,
    `- path` (RFC 7396: null removes, an object merges, anything else replaces)."""
    return list(_patch_lines(config, patch, ""))


def _patch_lines(current: Any, patch: Mapping[str, Any], prefix: str) -> Iterator[str]:
    for key in sorted(patch):
        path = f"{prefix}{key}"
        old = current.get(key, _ABSENT) if isinstance(current, Mapping) else _ABSENT
        new = patch[key]
        if new is None:
            if old is not _ABSENT:
                yield f"- {path}"
        elif isinstance(new, Mapping) and (old is _ABSENT or isinstance(old, Mapping)):
            if old is _ABSENT:
                yield f"+ {path}: {_short(new)}"
            else:
                yield from _patch_lines(old, new, f"{path}.")
        elif old is _ABSENT:
            yield f"+ {path}: {_short(new)}"
        elif old != new:
            yield f"~ {path}: {_short(old)} → {_short(new)}"


DIFFED: Final = ("spec", "manifest")
"""Payload fields the proposal's diff shows, left out of the blocks when it is shown (a config
patch stays: its old → new lines are against the running config, the diff against the file)."""


def detail_blocks(
    approval: ApprovalView, config: Mapping[str, Any] | None, *, diffed: bool = False
) -> list[tuple[str, list[str]]]:
    """The detail pane's sections as (title, lines): header, prose, then structured fields
    (but those the diff shows, when `diffed`)."""
    payload = approval.payload
    head = [
        f"agent     {approval.agent_id}  (session {approval.session_id or '-'})",
        f"type      {approval.request_type}",
        f"created   {approval.created_at}",
        f"status    {resolution(approval)}",
    ]
    blocks: list[tuple[str, list[str]]] = [(approval.approval_id, head)]
    for key in PROSE:
        text = payload.get(key)
        if isinstance(text, str) and text.strip():
            blocks.append((key.replace("_", " "), text.strip().splitlines()))
    for key, value in payload.items():
        if (key in PROSE and isinstance(value, str)) or (diffed and key in DIFFED):
            continue
        if key == "patch" and isinstance(value, Mapping):
            changes = patch_changes(config or {}, value) if config is not None else []
            title = "changes to the running config" if config is not None else "patch"
            blocks.append((title, changes or _json_lines(value)))
        else:
            blocks.append((key.replace("_", " "), _json_lines(value)))
    return blocks


def collapse(lines: list[str], expanded: bool) -> tuple[list[str], int]:
    """`lines`, cut to COLLAPSED_LINES unless expanded; and how many were hidden."""
    if expanded or len(lines) <= COLLAPSED_LINES:
        return lines, 0
    return lines[:COLLAPSED_LINES], len(lines) - COLLAPSED_LINES


def _json_lines(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines() or [""]
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def _short(value: Any, width: int = 50) -> str:
    return _cut(json.dumps(value, sort_keys=True, ensure_ascii=False), width)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
