"""Every tool call told in one past-tense sentence, so memory finds it by text and vector (pure).

    describe("choir.exec", {"command": "pytest -q"}, result)   # "ran `pytest -q` (exit 0)"
    rows = tool_rows(events)                                     # MemoryChunks, one per call

From seed design 004 (tool-call content synthesis): a tool call's row is its name, arguments and
JSON result — words a search rarely matches ("what did I run yesterday", "the todo file"). Here
the sentence is computed, not asked of a model (choird stays inference-free, §11.5): the same
call always gets the same sentence, so a close or a backfill run twice stores the same row.

What a sentence never holds: a value under a key that names a secret, `key=value` secrets
spelled out in a command, the text typed into a page, an email's body, or anything of a result's
`data` for a tool the caller says is prompt-masked (§8.5: the model saw status and summary only)
or for a tool this module does not know (the generic sentence uses its arguments' short values
and the result's summary). Every value is cut, and the sentence to `MAX_CHARS`.

Calls of `ECHOES` (memory searches) get no row: their sentence only repeats a query, and would
answer the same query later in place of what it found (their chunk still holds the call).

A call's row is keyed by the revision of its result (`index = -rev`: session chunks count up
from 0, so the two never meet); a call that never got a result is keyed by the revision of the
model output that asked for it, the unanswered calls of one output told in one row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from choir.core.memory.chunking import LoggedEvent, names_secret
from choir.core.memory.chunks import ChunkKind, MemoryChunk
from choir.protocol.log.events import ModelOutput, ToolCall, ToolResultCommitted
from choir.protocol.log.lanes import CORE_LANE_PREFIX, EDGE_LANE
from choir.protocol.tooling.tools import ToolResult

MAX_CHARS: Final = 300
"""The longest sentence (the value caps below keep most far shorter)."""
VALUE_CHARS: Final = 80
"""A path, query, name or subject is cut to this many characters."""
COMMAND_CHARS: Final = 120
TEXT_CHARS: Final = 60
"""Free text quoted from an argument (a task, a note) is cut shorter."""
SUMMARY_CHARS: Final = 100
"""A result's summary, quoted by the generic sentence and by failures."""
GENERIC_ARGS: Final = 3
"""The generic sentence names at most this many of an unknown tool's arguments."""
ECHOES: Final = frozenset({"choir.memory.query"})
"""Tools whose calls get no row (`tool_rows`): reading memory adds nothing to remember."""

_BEARER: Final = re.compile(r"(?i)\b(bearer|basic)\s+[\w.~+/=-]+")
"""`Authorization: Bearer …` in a command line."""
_INLINE_SECRET: Final = re.compile(
    r"(?i)\b([\w-]*(?:password|passwd|token|secret|api[_-]?key|auth)[\w-]*)(\s*[=:]\s*|\s+)"
    r"(?!(?:bearer|basic)\s)(\"[^\"]*\"|'[^']*'|\S+)"
)
"""`TOKEN=abc`, `--password hunter2`, `api_key: …` in a command line."""
_SPACE: Final = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class _Phrase:
    """A call in words: `done` (past tense) when it succeeded, `tried` (infinitive) when not."""

    done: str
    tried: str


Describer = Callable[[Mapping[str, Any], ToolResult | None], _Phrase | str | None]
"""A tool's sentence from its arguments and result (None: not enough to say; the generic one)."""


def describe(
    tool: str,
    arguments: Mapping[str, Any] | None,
    result: ToolResult | None,
    *,
    masked: bool = False,
) -> str:
    """One past-tense sentence for one tool call (deterministic, at most `MAX_CHARS`).

    `arguments` None: the call is not in the log (a result the arbiter gave a rejected proposal);
    `result` None: the call got no result. `masked`: the tool is prompt-masked, its result's
    `data` is not read."""
    args = arguments or {}
    said: _Phrase | str | None = None
    describer = _DESCRIBERS.get(tool)
    if describer is not None:
        visible = result if result is None or not masked else _masked(result)
        said = describer(args, visible)
    if said is None:
        said = _generic(tool, args, result)
    return _cap(_SPACE.sub(" ", _outcome(said, result)).strip(), MAX_CHARS)


@dataclass(frozen=True, slots=True)
class ToolDescription:
    """One described call, where it sits in the session's log."""

    rev: int
    """The result's revision (the model output's, for calls that got none): the row's key."""
    first_rev: int
    """The model output that asked for the call (the result's rev when it is not in the log)."""
    lane: str
    tool: str
    text: str


def tool_descriptions(
    events: Iterable[LoggedEvent], *, masked: Collection[str] = (), skip: Collection[str] = ()
) -> list[ToolDescription]:
    """Every tool call of a session's events (but those of `skip`), described, in revision
    order; `masked` names the prompt-masked tools."""
    calls: dict[str, tuple[int, str, ToolCall]] = {}
    described: list[ToolDescription] = []
    for logged in sorted(events, key=lambda e: e.rev):
        event = logged.event
        if isinstance(event, ModelOutput):
            for call in event.tool_calls:
                calls[call.id] = (logged.rev, logged.lane, call)
        elif isinstance(event, ToolResultCommitted) and event.tool not in skip:
            asked = calls.pop(event.call_id, None)
            text = describe(
                event.tool,
                None if asked is None else asked[2].arguments,
                event.result,
                masked=event.tool in masked,
            )
            first_rev = logged.rev if asked is None else asked[0]
            described.append(ToolDescription(logged.rev, first_rev, logged.lane, event.tool, text))
    unanswered: dict[int, tuple[str, list[ToolCall]]] = {}
    for rev, lane, call in calls.values():
        if call.name in skip:
            continue
        unanswered.setdefault(rev, (lane, []))[1].append(call)
    for rev, (lane, pending) in unanswered.items():
        text = "; ".join(
            describe(call.name, call.arguments, None, masked=call.name in masked)
            for call in pending
        )
        tools = ", ".join(sorted({call.name for call in pending}))
        described.append(ToolDescription(rev, rev, lane, tools, text))
    return sorted(described, key=lambda d: d.rev)


def tool_rows(events: Iterable[LoggedEvent], *, masked: Collection[str] = ()) -> list[MemoryChunk]:
    """The session's tool-call rows: each description with who made the call, keyed `-rev`
    (none for `ECHOES`)."""
    return [
        MemoryChunk(
            -d.rev,
            _cap(f"{_speaker(d.lane)} {d.text}", MAX_CHARS + 40),
            ChunkKind.TOOL_DESCRIPTION,
            d.first_rev,
            d.rev,
        )
        for d in tool_descriptions(events, masked=masked, skip=ECHOES)
    ]


def _speaker(lane: str) -> str:
    if lane == EDGE_LANE:
        return "agent"
    return f"agent (core job {lane.removeprefix(CORE_LANE_PREFIX)})"


# -- the sentence's frame ---------------------------------------------------------------------


def _outcome(said: _Phrase | str, result: ToolResult | None) -> str:
    """The phrase with how the call ended: as is when it succeeded (or `said` is a whole
    sentence), `tried to … but it failed (code)` when not, `asked to … (no result)` when none
    came."""
    if isinstance(said, str):
        return said
    if result is None:
        return f"asked to {said.tried} (no result)"
    if result.status == "success":
        return said.done
    why = result.error_code or result.status
    return f"tried to {said.tried} but it {_ended(result)} ({why}: {_cap(result.summary, 60)})"


def _ended(result: ToolResult) -> str:
    return {"timeout": "timed out", "cancelled": "was cancelled"}.get(result.status, "failed")


def _masked(result: ToolResult) -> ToolResult:
    return result.model_copy(update={"data": None})


def _generic(tool: str, args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | str:
    shown = [
        f"{key}={_scalar(value)}"
        for key, value in sorted(args.items())
        if not names_secret(key) and _scalar(value) is not None
    ][:GENERIC_ARGS]
    with_args = f" with {', '.join(shown)}" if shown else ""
    if result is not None and result.status == "success" and result.summary.strip():
        return f"called {tool}{with_args}: {_cap(result.summary, SUMMARY_CHARS)}"
    return _Phrase(f"called {tool}{with_args}", f"call {tool}{with_args}")


def _scalar(value: Any) -> str | None:
    """A short argument value as written in a sentence; None for structures and long text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str) and value.strip() and len(value) <= VALUE_CHARS and "\n" not in value:
        return _unsecret(value)
    return None


# -- values -----------------------------------------------------------------------------------


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unsecret(text: str) -> str:
    text = _BEARER.sub(lambda m: f"{m.group(1)} [REDACTED]", text)
    return _INLINE_SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)


def _str(args: Mapping[str, Any], key: str, limit: int = VALUE_CHARS) -> str | None:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return _cap(_unsecret(_SPACE.sub(" ", value.strip())), limit)


def _int(mapping: Mapping[str, Any] | None, key: str) -> int | None:
    value = None if mapping is None else mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _data(result: ToolResult | None) -> Mapping[str, Any]:
    return result.data if result is not None and result.data else {}


def _quoted(text: str) -> str:
    return f'"{text}"'


def _lines(text: str) -> int:
    """Lines in written content: a last line without its newline counts."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _plural(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else (plural or noun + 's')}"


def _names(values: Any, limit: int = 3) -> str | None:
    if not isinstance(values, list):
        return None
    names = [v for v in values if isinstance(v, str) and v.strip()]
    if not names:
        return None
    shown = ", ".join(_cap(v, 60) for v in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# -- the built-in tools -----------------------------------------------------------------------


def _exec(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | str | None:
    command = _str(args, "command", COMMAND_CHARS)
    if command is None:
        return None
    ran = f"ran `{command}`"
    if result is None:
        return _Phrase(ran, f"run `{command}`")
    code = _int(_data(result), "exit_code")
    if result.status == "timeout":
        return f"{ran}, which timed out"
    if code is not None:
        return f"{ran} (killed by signal {-code})" if code < 0 else f"{ran} (exit {code})"
    return _Phrase(ran, f"run `{command}`")


def _fs_read(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    path = _str(args, "path")
    if path is None:
        return None
    data = _data(result)
    start, end, total = (_int(data, k) for k in ("start_line", "end_line", "total_lines"))
    if start is not None and end is not None and total is not None:
        if start == 1 and end >= total:
            return _Phrase(f"read {path} ({_plural(total, 'line')})", f"read {path}")
        return _Phrase(f"read lines {start}-{end} of {path} ({total} lines)", f"read {path}")
    return _Phrase(f"read {path}", f"read {path}")


def _fs_search(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    pattern = _str(args, "pattern")
    if pattern is None:
        return None
    where = _str(args, "path")
    where = "the workspace" if where in (None, ".", "/workspace") else where
    glob = _str(args, "glob")
    within = f"{where} ({glob})" if glob else where
    searched = f"searched {within} for `{pattern}`"
    data = _data(result)
    matches, files = _int(data, "match_count"), _int(data, "file_count")
    if matches is None:
        done = searched
    elif matches == 0:
        done = f"{searched} (no matches)"
    else:
        done = (
            f"{searched} ({_plural(matches, 'match', 'matches')} in {_plural(files or 0, 'file')})"
        )
    return _Phrase(done, f"search {within} for `{pattern}`")


_WRITE_DONE: Final = {
    "overwrite": "wrote {lines} to {path}",
    "append": "appended {lines} to {path}",
    "replace_range": "replaced lines {start}-{end} of {path} with {lines}",
    "insert_at": "inserted {lines} at line {line} of {path}",
}


def _fs_write(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    path, op = _str(args, "path"), _str(args, "op")
    content = args.get("content")
    if path is None or op not in _WRITE_DONE or not isinstance(content, str):
        return None
    fields = {
        "path": path,
        "lines": _plural(_lines(content), "line"),
        "start": _int(args, "start_line"),
        "end": _int(args, "end_line"),
        "line": _int(args, "line"),
    }
    done = _WRITE_DONE[op].format(**fields)
    if op == "overwrite" and _data(result).get("created") is True:
        done = "created {path} with {lines}".format(**fields)
    return _Phrase(done, f"write to {path}")


def _web_search(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    query = _str(args, "query")
    if query is None:
        return None
    results = _data(result).get("results")
    found = f" ({_plural(len(results), 'result')})" if isinstance(results, list) else ""
    return _Phrase(
        f"searched the web for {_quoted(query)}{found}", f"search the web for {_quoted(query)}"
    )


def _web_browse(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    action = _str(args, "action") or "open"
    url, tab, index = _str(args, "url"), _int(args, "tab"), _int(args, "index")
    target = _str(args, "selector") or (f"link {index}" if index is not None else "the page")
    match action:
        case "open" if url is not None:
            return _Phrase(f"opened {url} in the browser", f"open {url} in the browser")
        case "read":
            return _Phrase("read the open page in the browser", "read the open page")
        case "links":
            return _Phrase("listed the open page's links", "list the open page's links")
        case "find" if (text := _str(args, "text")) is not None:
            return _Phrase(
                f"looked for {_quoted(text)} on the open page",
                f"look for {_quoted(text)} on the open page",
            )
        case "click":
            return _Phrase(f"clicked {target} in the browser", f"click {target} in the browser")
        case "type":  # never the value typed: it may be a password
            return _Phrase(f"typed into {target} in the browser", f"type into {target}")
        case "tabs":
            return _Phrase("listed the browser's tabs", "list the browser's tabs")
        case "switch" if tab is not None:
            return _Phrase(f"switched to browser tab {tab}", f"switch to browser tab {tab}")
        case "close_tab":
            which = f"browser tab {tab}" if tab is not None else "a browser tab"
            return _Phrase(f"closed {which}", f"close {which}")
        case "screenshot":
            return _Phrase("took a screenshot of the open page", "take a screenshot of the page")
    return None


def _memory_query(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    store, mode, query = _str(args, "store"), _str(args, "mode"), _str(args, "query")
    if store is None:
        return None
    whose = _str(args, "target_agent")
    memory = f"{whose}'s {store} memory" if whose else f"{store} memory"
    hits = _data(result).get("hits")
    found = f" ({_plural(len(hits), 'hit')})" if isinstance(hits, list) else ""
    match mode:
        case "result" if query is not None:
            return _Phrase(f"read the result of tool call {query}", f"read tool call {query}")
        case "hash" if query is not None:
            return _Phrase(f"looked up event {query} in {memory}", f"look up event {query}")
        case "session_detail":
            session = _str(args, "session_id") or "a past session"
            return _Phrase(f"opened session {session} from {memory}", f"open session {session}")
        case "browse":
            session = _str(args, "session_id") or "a session"
            return _Phrase(f"read the messages of session {session}", f"read session {session}")
        case "stats":
            whose = f"{whose}'s" if whose else "its"
            return _Phrase(f"checked {whose} memory statistics", f"check {whose} memory statistics")
    if query is None:
        return None
    return _Phrase(
        f"searched {memory} for {_quoted(query)}{found}",
        f"search {memory} for {_quoted(query)}",
    )


def _memory_upsert(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    op, name = _str(args, "op"), _str(args, "name") or _str(_data(result), "name")
    if op is None:
        return None
    item = f"knowledge {_quoted(name)}" if name else "a knowledge item"
    new_name, alias = _str(args, "new_name"), _str(args, "alias")
    match op:
        case "add" | "insert":
            return _Phrase(f"stored {item}", f"store {item}")
        case "write" | "put" | "update":
            return _Phrase(f"wrote {item}", f"write {item}")
        case "rename" if new_name is not None:
            return _Phrase(
                f"renamed {item} to {_quoted(new_name)}", f"rename {item} to {_quoted(new_name)}"
            )
        case "alias" if alias is not None:
            return _Phrase(
                f"gave {item} the alias {_quoted(alias)}", f"alias {item} as {_quoted(alias)}"
            )
        case "remove" | "delete":
            return _Phrase(f"removed {item}", f"remove {item}")
    return None


def _memory_compact(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase:
    return _Phrase("compacted working memory", "compact working memory")


def _core_spawn(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    job = _str(args, "job_name")
    if job is None:
        return None
    task = _str(args, "task_spec", TEXT_CHARS)
    said = f" to {task}" if task else ""
    return _Phrase(f"started core job {job}{said}", f"start core job {job}")


def _core_cancel(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    job = _str(args, "job_name")
    if job is None:
        return None
    reason = _str(args, "reason", TEXT_CHARS)
    said = f" ({reason})" if reason else ""
    return _Phrase(f"cancelled core job {job}{said}", f"cancel core job {job}")


def _core_inject(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    job = _str(args, "job_name")
    if job is None:
        return None
    content = _str(args, "content", TEXT_CHARS)
    said = f": {_quoted(content)}" if content else ""
    return _Phrase(f"instructed core job {job}{said}", f"instruct core job {job}")


def _core_list(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase:
    jobs = _data(result).get("jobs")
    counted = f" ({_plural(len(jobs), 'job')})" if isinstance(jobs, list) else ""
    return _Phrase(f"listed the core jobs{counted}", "list the core jobs")


def _core_report(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    kind, text = _str(args, "kind"), _str(args, "text", TEXT_CHARS)
    match kind:
        case "plan":
            steps = args.get("steps")
            counted = f" of {_plural(len(steps), 'step')}" if isinstance(steps, list) else ""
            return _Phrase(f"reported a plan{counted}", "report a plan")
        case "progress":
            phase, percent = _str(args, "phase"), args.get("percent")
            parts = [p for p in (phase, f"{percent:g}%" if _number(percent) else None) if p]
            said = f" ({', '.join(parts)})" if parts else ""
            return _Phrase(f"reported progress{said}", "report progress")
        case "partial_result":
            said = f": {_quoted(text)}" if text else ""
            return _Phrase(f"reported a partial result{said}", "report a partial result")
        case "need_info":
            said = f": {_quoted(text)}" if text else ""
            return _Phrase(f"asked for more information{said}", "ask for more information")
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _email_send(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    to, subject = _names(args.get("to")), _str(args, "subject")
    if to is None:
        return None
    about = f" {_quoted(subject)}" if subject else ""  # never the body
    return _Phrase(f"sent an email{about} to {to}", f"send an email{about} to {to}")


def _email_check(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase:
    folder = _str(args, "folder") or "INBOX"
    return _Phrase(f"checked the {folder} mailbox", f"check the {folder} mailbox")


def _email_receive(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase:
    folder, message = _str(args, "folder") or "INBOX", _str(args, "message_id")
    if message is not None:
        return _Phrase(f"fetched email {message} from {folder}", f"fetch email {message}")
    messages = _data(result).get("messages")
    unseen = "unseen " if args.get("unseen_only") is True else ""
    counted = _plural(len(messages), f"{unseen}email") if isinstance(messages, list) else None
    done = f"fetched {counted} from {folder}" if counted else f"fetched {unseen}email from {folder}"
    return _Phrase(done, f"fetch {unseen}email from {folder}")


def _notion(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    match _str(args, "action"):
        case "search":
            query = _str(args, "query")
            what = f" for {_quoted(query)}" if query else ""
            return _Phrase(f"searched Notion{what}", f"search Notion{what}")
        case "get_page" if (page := _str(args, "page_id")) is not None:
            return _Phrase(f"opened Notion page {page}", f"open Notion page {page}")
        case "query_database" if (db := _str(args, "database_id")) is not None:
            return _Phrase(f"queried Notion database {db}", f"query Notion database {db}")
    return None


def _propose_config(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase:
    summary = _str(args, "summary", TEXT_CHARS)
    said = f": {summary}" if summary else ""
    return _Phrase(f"proposed a config change{said}", "propose a config change")


def _propose_repo_change(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase:
    branch = _str(args, "branch", TEXT_CHARS)
    where = f" on branch {branch}" if branch else ""
    return _Phrase(f"proposed a change to its repo{where}", f"propose a change to its repo{where}")


def _propose_skill(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase:
    spec = args.get("spec")
    name = _str(spec, "name") if isinstance(spec, Mapping) else None
    skill = f"skill {name}" if name else "a skill"
    return _Phrase(f"proposed {skill}", f"propose {skill}")


def _propose_tool(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase:
    manifest = args.get("manifest")
    llm = manifest.get("llm") if isinstance(manifest, Mapping) else None
    name = _str(llm, "name") if isinstance(llm, Mapping) else None
    tool = f"tool {name}" if name else "a tool"
    return _Phrase(f"proposed {tool}", f"propose {tool}")


def _tts(args: Mapping[str, Any], result: ToolResult | None) -> _Phrase | None:
    text = _str(args, "text", TEXT_CHARS)
    if text is None:
        return None
    return _Phrase(f"spoke {_quoted(text)} as audio", f"speak {_quoted(text)}")


_DESCRIBERS: Final[Mapping[str, Describer]] = {
    "choir.exec": _exec,
    "choir.fs.read": _fs_read,
    "choir.fs.search": _fs_search,
    "choir.fs.write": _fs_write,
    "choir.web.search": _web_search,
    "choir.web.browse": _web_browse,
    "choir.memory.query": _memory_query,
    "choir.memory.upsert": _memory_upsert,
    "choir.memory.compact": _memory_compact,
    "choir.core.spawn": _core_spawn,
    "choir.core.cancel": _core_cancel,
    "choir.core.inject": _core_inject,
    "choir.core.list": _core_list,
    "choir.core.report": _core_report,
    "choir.email.send": _email_send,
    "choir.email.check": _email_check,
    "choir.email.receive": _email_receive,
    "choir.notion.query": _notion,
    "choir.propose.config_change": _propose_config,
    "choir.propose.repo_change": _propose_repo_change,
    "choir.propose.skill": _propose_skill,
    "choir.propose.tool": _propose_tool,
    "choir.tts.speak": _tts,
}
"""The built-in tools (`choir/_seeds/global/tools`); every other tool gets the generic one."""

BUILTIN_TOOLS: Final = frozenset(_DESCRIBERS)
