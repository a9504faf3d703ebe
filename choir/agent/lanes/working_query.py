"""`choir.memory.query store=working` (§11.3, §11.7): search this session's in-memory log.

The tool's manifest is a host tool, because its `session` and `knowledge` stores live in choird's
Postgres. The working store lives here, in the commit log, so the lane hook answers it in
process and hands every other store to `fallback` (choird's EXECUTE_HOST_TOOL).

Working memory is the own session's only (§11.2): a `target_agent` other than this agent is
refused. Modes are `keyword` (every whitespace-separated term must occur in the event's values,
case-insensitively) and `hash` (event hashes starting with the given hex prefix). Matches come
newest first, each with a capped excerpt of the event's JSON around the first term.

Left out of the search, because they would only echo other events: the tool-call records the
arbiter keeps next to each model output (`tool_call_requested`, `tool_call_committed`), the model
output making this very query, and the results of earlier memory queries. A core job never sees
user messages, here as in its prompt: core only knows edge's briefing (§7.1).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.agent.kernel.dispatch import LaneHook
from choir.agent.kernel.proposal import ToolProposal
from choir.core.memory.working import HASH_REF_CHARS
from choir.core.prompt.window import json_text
from choir.protocol.log.lanes import EDGE_LANE
from choir.protocol.tooling.tools import ToolResult

__all__ = ["EXCERPT_CHARS", "TOOL", "query_working", "working_query_hook"]

TOOL: Final = "choir.memory.query"
EXCERPT_CHARS: Final = 320
"""Longest excerpt per match; 50 matches stay well under 20 KB."""
DEFAULT_LIMIT: Final = 10
MAX_LIMIT: Final = 50
WORKING_MODES: Final = ("keyword", "hash")
_HEX: Final = re.compile(r"^[0-9a-f]{4,64}$")
_ECHOES: Final = frozenset({"tool_call_requested", "tool_call_committed"})


def working_query_hook(
    log: CommitLog, *, agent_id: str, fallback: LaneHook | None = None
) -> LaneHook:
    """The lane hook of `choir.memory.query`: the working store here, the others via `fallback`."""

    async def hook(proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        if arguments.get("store") == "working":
            return query_working(log, proposal, arguments, agent_id=agent_id)
        if fallback is None:
            return ToolResult.fail(
                "host_unavailable",
                f"store {arguments.get('store')!r} needs choird, and choird is not connected",
            )
        return await fallback(proposal, arguments)

    return hook


def query_working(
    log: CommitLog, proposal: ToolProposal, arguments: Mapping[str, Any], *, agent_id: str
) -> ToolResult:
    """Search `log` as `proposal`'s lane may: keyword or hash, newest first, `limit` matches."""
    refusal = _refusal(arguments, agent_id)
    if refusal is not None:
        return refusal
    mode, query = str(arguments["mode"]), str(arguments["query"]).strip()
    limit = min(max(int(arguments.get("limit", DEFAULT_LIMIT)), 1), MAX_LIMIT)
    if mode == "hash":
        prefix = query.casefold()
        if not _HEX.fullmatch(prefix):
            return ToolResult.fail(
                "invalid_input", f"{query!r} is not an event hash: give at least 4 hex digits"
            )
        found = _first(_by_hash(log, prefix), limit + 1)
        terms: list[str] = []
    else:
        terms = query.casefold().split()
        found = _first(_by_keywords(log, terms, proposal), limit + 1)
    matches = [_match(entry, terms) for entry in found[:limit]]
    more = " (more exist; narrow the query)" if len(found) > limit else ""
    summary = f"{len(matches)} event(s) of this session match {query!r}{more}"
    return ToolResult(
        status="success",
        summary=summary,
        data={"store": "working", "mode": mode, "matches": matches},
        truncated=len(found) > limit,
    )


def _refusal(arguments: Mapping[str, Any], agent_id: str) -> ToolResult | None:
    target = arguments.get("target_agent")
    if target is not None and target != agent_id:
        return ToolResult.fail(
            "access_denied",
            f"working memory is this session's only; drop target_agent {target!r} or use "
            'store "session" to read another agent\'s memory',
        )
    mode = arguments.get("mode")
    if mode not in WORKING_MODES:
        return ToolResult.fail(
            "invalid_input", f'mode {mode!r} does not apply to store "working"; use keyword or hash'
        )
    if "session_id" in arguments:
        return ToolResult.fail(
            "invalid_input", 'session_id applies to store "session" (mode session_detail) only'
        )
    if not str(arguments.get("query", "")).strip():
        return ToolResult.fail("invalid_input", "query is empty: give keywords or an event hash")
    return None


def _by_hash(log: CommitLog, prefix: str) -> Iterator[LogEntry]:
    return (entry for entry in reversed(log.since(log.base_rev)) if entry.hash.startswith(prefix))


def _by_keywords(log: CommitLog, terms: list[str], proposal: ToolProposal) -> Iterator[LogEntry]:
    core = proposal.lane != EDGE_LANE
    for entry in reversed(log.since(log.base_rev)):
        if _echo(entry, proposal.call_id) or (core and entry.kind == "user_msg"):
            continue
        text = _searchable(entry.event)
        if all(term in text for term in terms):
            yield entry


def _echo(entry: LogEntry, call_id: str) -> bool:
    """Whether `entry` only repeats other events, or is the model output asking this query."""
    event = entry.event
    if entry.kind in _ECHOES:
        return True
    if entry.kind == "tool_result_committed":
        return bool(event["tool"] == TOOL)
    if entry.kind == "model_output":
        return any(call.get("id") == call_id for call in event.get("tool_calls", []))
    return False


def _first(entries: Iterator[LogEntry], count: int) -> list[LogEntry]:
    found: list[LogEntry] = []
    for entry in entries:
        found.append(entry)
        if len(found) >= count:
            break
    return found


def _match(entry: LogEntry, terms: list[str]) -> dict[str, Any]:
    return {
        "rev": entry.rev,
        "lane": entry.lane,
        "kind": entry.kind,
        "hash": entry.hash[:HASH_REF_CHARS],
        "ts": entry.ts,
        "excerpt": _excerpt(json_text(entry.event), terms),
    }


def _excerpt(text: str, terms: list[str]) -> str:
    """Up to EXCERPT_CHARS of `text`, starting a little before the first term found."""
    lowered = text.casefold()
    hits = [at for at in (lowered.find(term) for term in terms) if at >= 0]
    start = max(min(hits) - EXCERPT_CHARS // 4, 0) if hits else 0
    end = start + EXCERPT_CHARS
    head = "…" if start > 0 else ""
    tail = "…" if end < len(text) else ""
    return f"{head}{text[start:end]}{tail}"


def _searchable(event: Mapping[str, Any]) -> str:
    """The event's values (not its keys) as one case-folded text."""
    return "\n".join(_values(event)).casefold()


def _values(node: object) -> Iterator[str]:
    if isinstance(node, Mapping):
        for value in node.values():
            yield from _values(value)
    elif isinstance(node, list):
        for item in node:
            yield from _values(item)
    elif node is not None:
        yield str(node)
