"""`choir.memory.query store=working` (§11.3, §11.7): search this session's in-memory log.

The tool's manifest is a host tool, because its `session` and `knowledge` stores live in choird's
Postgres. The working store lives here, in the commit log, so the lane hook answers it in
process and hands every other store to `fallback` (choird's EXECUTE_HOST_TOOL).

Working memory is the own session's only (§11.2): a `target_agent` other than this agent is
refused. Modes are `keyword` (every whitespace-separated term must occur in the event's values,
case-insensitively) and `hash` (event hashes starting with the given hex prefix). Matches come
newest first, each with a capped excerpt of the event's JSON around the first term. Mode `result`
reads one tool result whole (query: its call id), in pages from `offset`: a prompt carries at most
`MAX_TOOL_RESULT_CHARS` of a result, and its truncation note names this call to read on. Offsets
count characters of the result as the model sees it (`prompt_mask` applied), so a page starts
where the prompt's copy stopped.

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
from choir.core.prompt.window import ResultView, full_result, json_text
from choir.protocol.log.lanes import EDGE_LANE
from choir.protocol.tooling.tools import ToolResult

__all__ = ["EXCERPT_CHARS", "RESULT_PAGE_CHARS", "TOOL", "query_working", "working_query_hook"]

TOOL: Final = "choir.memory.query"
EXCERPT_CHARS: Final = 320
"""Longest excerpt per match; 50 matches stay well under 20 KB."""
DEFAULT_LIMIT: Final = 10
MAX_LIMIT: Final = 50
RESULT_PAGE_CHARS: Final = 7_000
"""Characters of a tool result per `mode=result` page: JSON-escaped once more as this tool's own
result (at most twice as long), a page still fits the prompt's cap on one result."""
WORKING_MODES: Final = ("keyword", "hash", "result")
_HEX: Final = re.compile(r"^[0-9a-f]{4,64}$")
_ECHOES: Final = frozenset({"tool_call_requested", "tool_call_committed"})


def working_query_hook(
    log: CommitLog,
    *,
    agent_id: str,
    fallback: LaneHook | None = None,
    result_view: ResultView = full_result,
) -> LaneHook:
    """The lane hook of `choir.memory.query`: the working store here, the others via `fallback`.
    `result_view` is what the model is shown of a result (the registry's `result_for_prompt`)."""

    async def hook(proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        if arguments.get("store") == "working":
            return query_working(
                log, proposal, arguments, agent_id=agent_id, result_view=result_view
            )
        if fallback is None:
            return ToolResult.fail(
                "host_unavailable",
                f"store {arguments.get('store')!r} needs choird, and choird is not connected",
            )
        return await fallback(proposal, arguments)

    return hook


def query_working(
    log: CommitLog,
    proposal: ToolProposal,
    arguments: Mapping[str, Any],
    *,
    agent_id: str,
    result_view: ResultView = full_result,
) -> ToolResult:
    """Search `log` as `proposal`'s lane may: keyword or hash, newest first, `limit` matches;
    or read one tool result (`result`)."""
    refusal = _refusal(arguments, agent_id)
    if refusal is not None:
        return refusal
    mode, query = str(arguments["mode"]), str(arguments["query"]).strip()
    if mode == "result":
        return _read_result(log, query, int(arguments.get("offset", 0)), result_view)
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


def _read_result(log: CommitLog, call_id: str, offset: int, result_view: ResultView) -> ToolResult:
    """One page of the result of `call_id`, as the model sees it, from `offset`."""
    entry = next(
        (
            entry
            for entry in reversed(log.since(log.base_rev))
            if entry.kind == "tool_result_committed" and entry.event.get("call_id") == call_id
        ),
        None,
    )
    if entry is None:
        return ToolResult.fail(
            "not_found",
            f"no tool result with call id {call_id!r} in this session: give the id the "
            "truncation note names",
        )
    whole = log.resolved(entry)
    event = whole.event
    text = json_text(result_view(str(event["tool"]), ToolResult.model_validate(event["result"])))
    if offset < 0 or offset > len(text):
        return ToolResult.fail(
            "invalid_input", f"offset {offset} is outside the result's {len(text)} characters"
        )
    end = min(offset + RESULT_PAGE_CHARS, len(text))
    more = end < len(text)
    data: dict[str, Any] = {
        "store": "working",
        "mode": "result",
        "call_id": call_id,
        "tool": event["tool"],
        "offset": offset,
        "total_chars": len(text),
        "text": text[offset:end],
    }
    if more:
        data["next_offset"] = end
    shortened = entry.artifact is not None and whole is entry
    notes = [f"characters {offset}-{end} of {len(text)}"]
    if more:
        notes.append(f"read on with offset {end}")
    if shortened:  # the agent no longer holds the whole event (a resume from a snapshot)
        notes.append("only a shortened preview of this result is kept")
    elif entry.artifact is not None:  # the prompt's copy was cut from the preview
        notes.append("your context showed a shortened preview: offsets count in the whole result")
    summary = f"result of {event['tool']} call {call_id}: {'; '.join(notes)}"
    return ToolResult(status="success", summary=summary, data=data, truncated=more or shortened)


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
            "invalid_input",
            f'mode {mode!r} does not apply to store "working"; use keyword, hash or result',
        )
    if arguments.get("offset") and mode != "result":
        return ToolResult.fail(
            "invalid_input", "offset applies to mode result (reading one tool result) only"
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
