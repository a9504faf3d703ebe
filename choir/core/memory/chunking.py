"""A session's committed events cut into the logical blocks of §11.4, as `MemoryChunk`s (pure).

    chunks = session_chunks(events, max_chars=config.memory_chunk_chars)

Each lane is cut on its own (a core job's work is never interleaved with edge's): a tool call
with its result is one block; the events of one skill state are one block (its tool calls
included), from a transition to the lane's next one, an in-place ending (`max_steps`,
`interrupted`) or the job's end; user messages and model output between tool calls are a
`messages` run. A block longer than `max_chars` is split at line boundaries (a single longer
line at whitespace), each piece of a skill phase repeating the phase's header; then a small
block (under a quarter of the cap) is merged with its same-kind neighbour while both fit. The
chunks are ordered by their first revision and numbered from 0.

The text is what retrieval sees: who spoke (`user`, `agent`, `agent (core job x)`), each tool's
name, arguments and result, JSON truncated to a few hundred characters (the raw events stay in
`session_events` for drill-down). Events that carry no content (`tool_call_requested`,
`tool_call_committed`, compaction's `memory_write_committed`, the `session_summary`, chunked by
`summary_chunks`) are left out; a reply repeating the model output just before it is written
once. Values under keys that name a secret (`password`, `token`, `api_key`…) are replaced: the
agent already redacts every secret it was given before committing (choir.logs.redaction), this
catches credentials a user or a tool spelled out. Same events, same chunks: close is idempotent
because of it.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import orjson

from choir.core.memory.chunks import ChunkKind, MemoryChunk
from choir.protocol.log.core_jobs import (
    CoreError,
    CoreEvent,
    CoreFinalResult,
    CoreNeedInfo,
    CorePartialResult,
    CorePlan,
    CoreThoughtSummary,
)
from choir.protocol.log.events import (
    AgentReplied,
    ApprovalResolved,
    Cancelled,
    CoreEventEmitted,
    CoreStarted,
    CoreStopped,
    Event,
    InjectedInstruction,
    ModelOutput,
    SessionSummary,
    SkillTransitionCommitted,
    ToolCall,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.log.lanes import CORE_LANE_PREFIX, EDGE_LANE

ARGUMENT_CHARS: Final = 300
"""A tool call's arguments are cut to this many characters of JSON."""
RESULT_DATA_CHARS: Final = 600
"""A tool result's `data` is cut to this many characters of JSON (its summary is kept whole)."""
HEADER_CHARS: Final = 120
"""A skill phase's header (repeated on each of its pieces) is cut to this many characters."""
SMALL_FRACTION: Final = 4
"""A block under `max_chars // SMALL_FRACTION` is small: merged with a same-kind neighbour."""
MIN_CHARS: Final = 200
"""The smallest cap that leaves room for a header and some content."""
REDACTED: Final = "[REDACTED]"
_SECRET_WORDS: Final = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "apikey",
        "authorization",
        "credential",
        "credentials",
        "cookie",
    }
)
"""A key holding one of these words (`refresh_token`, `accessToken`, `X-Auth-Token`) names a
secret; `max_tokens`, `passed` or `bypass` do not."""
_SECRET_PAIRS: Final = ("api_key", "private_key", "access_key", "secret_key")
_CAMEL: Final = re.compile(r"([a-z0-9])([A-Z])")
_NOT_WORD: Final = re.compile(r"[^a-z0-9]+")
_IN_PLACE_ENDINGS: Final = frozenset({"max_steps", "interrupted"})
"""Transitions that end a skill where it stands (choir.core.skills.runner)."""


class LoggedEvent(Protocol):
    """A committed event as the chunker reads it (`CommittedEvent` is one)."""

    @property
    def rev(self) -> int: ...
    @property
    def lane(self) -> str: ...
    @property
    def event(self) -> Event: ...


@dataclass(frozen=True, slots=True)
class _Line:
    rev: int
    text: str


@dataclass(slots=True)
class _Block:
    kind: ChunkKind
    seq: int
    """Creation order within the session: the tie-break between blocks of one revision."""
    lines: list[_Line] = field(default_factory=list)
    header: str | None = None
    """Written at the top of every piece a split makes (a skill phase's state)."""
    header_rev: int | None = None
    """The revision the header stands for, on the piece that holds that event."""
    folded: list[int] = field(default_factory=list)
    """Revisions written as no line of their own (a reply repeating the model's text)."""

    @property
    def revs(self) -> list[int]:
        revs = [line.rev for line in self.lines] + self.folded
        return revs if self.header_rev is None else [self.header_rev, *revs]

    @property
    def size(self) -> int:
        return len(_text(self))


def session_chunks(events: Iterable[LoggedEvent], *, max_chars: int) -> list[MemoryChunk]:
    """The mid-term chunks of a session's committed events (in any order; sorted by rev)."""
    _check_cap(max_chars)
    cutters: dict[str, _LaneCutter] = {}
    counter = itertools.count()
    for logged in sorted(events, key=lambda e: e.rev):
        cutter = cutters.get(logged.lane)
        if cutter is None:
            cutter = cutters[logged.lane] = _LaneCutter(logged.lane, counter)
        cutter.add(logged.rev, logged.event)
    blocks: list[_Block] = []
    for cutter in cutters.values():
        pieces = [piece for block in cutter.finish() for piece in _split(block, max_chars)]
        blocks.extend(_merge_small(pieces, max_chars))
    blocks.sort(key=lambda b: (min(b.revs), b.seq))
    return [
        MemoryChunk(index, _text(block), block.kind, min(block.revs), max(block.revs))
        for index, block in enumerate(blocks)
    ]


def summary_chunks(summary: SessionSummary, *, max_chars: int) -> list[MemoryChunk]:
    """The long-term chunks of the agent's session summary: its text by paragraph, then its
    decisions, open items and topics, each section cut at the cap and small ones merged."""
    _check_cap(max_chars)
    sections = [
        ("Session summary:", [part.strip() for part in summary.summary.split("\n\n")]),
        ("Decisions:", [f"- {item}" for item in summary.decisions]),
        ("Open items:", [f"- {item}" for item in summary.open_items]),
        ("Topics:", ["; ".join(summary.topics)] if summary.topics else []),
    ]
    blocks: list[_Block] = []
    for seq, (header, parts) in enumerate(sections):
        lines = [_Line(0, part) for part in parts if part]
        if lines:
            blocks.extend(_split(_Block(ChunkKind.SUMMARY, seq, lines, header), max_chars))
    return [
        MemoryChunk(index, _text(block), ChunkKind.SUMMARY)
        for index, block in enumerate(_merge_small(blocks, max_chars))
    ]


def _check_cap(max_chars: int) -> None:
    if max_chars < MIN_CHARS:
        raise ValueError(f"max_chars must be at least {MIN_CHARS}, got {max_chars}")


class _LaneCutter:
    """Cuts one lane's events into blocks, in the lane's order."""

    def __init__(self, lane: str, counter: Iterator[int]) -> None:
        self.lane = lane
        self.speaker = "agent" if lane == EDGE_LANE else f"agent (core job {_job(lane)})"
        self._counter = counter
        self._done: list[_Block] = []
        self._run: _Block | None = None
        """The open `messages` run."""
        self._phase: _Block | None = None
        """The open skill phase; while one is open, every event of the lane goes into it."""
        self._calls: dict[str, tuple[_Block, str]] = {}
        """The block of each call waiting for its result, and the tool's name, by call id."""
        self._last_said: tuple[str, _Block] | None = None
        """The latest model text and its block, so a reply that repeats it is written once."""

    def add(self, rev: int, event: Event) -> None:
        match event:
            case SkillTransitionCommitted():
                self._transition(rev, event)
            case ModelOutput(text=text, tool_calls=calls):
                self._last_said = None
                if text:
                    self._last_said = (text, self._say(rev, f"{self.speaker}: {text}"))
                for call in calls:
                    self._call(rev, call)
            case ToolResultCommitted():
                self._result(rev, event)
            case AgentReplied(text=text, category=category, attachments=files):
                last, self._last_said = self._last_said, None
                if last is not None and last[0] == text and not files:
                    last[1].folded.append(rev)
                else:
                    self._say(rev, _reply_line(self.speaker, text, category, files))
            case CoreStopped():
                self._say(rev, f"core job {event.job_name} {event.outcome}: {event.report}")
                if self.lane != EDGE_LANE:
                    self._close_phase()
            case _:
                line = _other_line(event)
                if line is not None:
                    self._say(rev, line)

    def finish(self) -> list[_Block]:
        """Every block of the lane; tool calls that never got a result say so."""
        for block, name in self._calls.values():
            block.lines.append(_Line(block.lines[-1].rev, f"  → {name}: no result"))
        self._calls.clear()
        self._close_run()
        self._close_phase()
        return sorted(self._done, key=lambda b: (min(b.revs), b.seq))

    def _transition(self, rev: int, event: SkillTransitionCommitted) -> None:
        self._close_run()
        self._close_phase()
        if event.from_ is not None and event.on in _IN_PLACE_ENDINGS:  # the skill ends here
            line = f"skill {event.skill} ended in state {event.to} ({event.on})"
            self._done.append(self._block(ChunkKind.SKILL_PHASE, [_Line(rev, line)]))
            return
        came = "starts" if event.from_ is None else f"from {event.from_} on {event.on}"
        header = _cap(f"skill {event.skill}, state {event.to} ({came})", HEADER_CHARS)
        self._phase = self._block(ChunkKind.SKILL_PHASE, [], header, rev)

    def _say(self, rev: int, text: str) -> _Block:
        """Add a line to the open phase, else to the open messages run; returns that block."""
        if self._phase is not None:
            block = self._phase
        elif self._run is not None:
            block = self._run
        else:
            block = self._run = self._block(ChunkKind.MESSAGES, [])
        block.lines.append(_Line(rev, text))
        return block

    def _call(self, rev: int, call: ToolCall) -> None:
        line = _Line(rev, f"tool {call.name} {_json(_scrub(call.arguments), ARGUMENT_CHARS)}")
        if self._phase is not None:
            block = self._phase
            block.lines.append(line)
        else:
            self._close_run()
            block = self._block(ChunkKind.TOOL_CALL, [line])
            self._done.append(block)
        self._calls[call.id] = (block, call.name)

    def _result(self, rev: int, event: ToolResultCommitted) -> None:
        line = _Line(rev, _result_line(event))
        block, _ = self._calls.pop(event.call_id, (None, ""))
        if block is not None:  # with its call, even when a skill moved on in between
            block.lines.append(line)
        elif self._phase is not None:
            self._phase.lines.append(line)
        else:  # a result with no call in the log (a recovered intent, a rejection)
            self._close_run()
            lines = [_Line(rev, f"tool {event.tool}"), line]
            self._done.append(self._block(ChunkKind.TOOL_CALL, lines))

    def _close_run(self) -> None:
        if self._run is not None:
            self._done.append(self._run)
            self._run = None

    def _close_phase(self) -> None:
        if self._phase is not None:
            self._done.append(self._phase)
            self._phase = None

    def _block(
        self,
        kind: ChunkKind,
        lines: list[_Line],
        header: str | None = None,
        header_rev: int | None = None,
    ) -> _Block:
        return _Block(kind, next(self._counter), lines, header, header_rev)


def _reply_line(speaker: str, text: str, category: str, files: Sequence[str]) -> str:
    label = speaker if category == "reply" else f"{speaker} [{category.replace('_', ' ')}]"
    attached = f" [attached: {', '.join(files)}]" if files else ""
    return f"{label}: {text}{attached}"


def _result_line(event: ToolResultCommitted) -> str:
    result = event.result
    status = result.status if result.error_code is None else f"{result.status} {result.error_code}"
    line = f"  → {status}: {result.summary}"
    if result.data:
        line += f" {_json(_scrub(result.data), RESULT_DATA_CHARS)}"
    if result.artifact_ref:
        line += f" (full output: {result.artifact_ref})"
    return line


def _other_line(event: Event) -> str | None:
    """The line of an event that is neither a tool call nor a skill move; None: left out."""
    match event:
        case UserMsg(text=text, attachments=files):
            attached = f" [attached: {', '.join(files)}]" if files else ""
            return f"user: {text}{attached}"
        case InjectedInstruction(content=content, source=source):
            return f"user (injected): {content}" if source == "user" else f"edge: {content}"
        case CoreStarted(job=job):
            return f"core job {job.job_name} started: {job.task_spec}"
        case CoreEventEmitted(job_name=name, event=core_event):
            said = _core_line(core_event)
            return None if said is None else f"core job {name} {said}"
        case Cancelled(target=target, reason=reason):
            return f"cancelled {target}: {reason}"
        case ApprovalResolved(approval_id=approval, status=status, reason=reason):
            said = f": {reason}" if reason else ""
            return f"approval {approval}: {status.replace('_', ' ')}{said}"
        case _:
            return None


def _core_line(event: CoreEvent) -> str | None:
    match event:
        case CorePlan(steps=steps):
            return "plans: " + "; ".join(step.description for step in steps)
        case CoreThoughtSummary(summary=summary):
            return f"thinks: {summary}"
        case CoreNeedInfo(question=question):
            return f"asks: {question}"
        case CorePartialResult(description=description):
            return f"has a partial result: {description}"
        case CoreFinalResult(summary=summary, artifacts=files):
            made = f" (files: {', '.join(files)})" if files else ""
            return f"finished: {summary}{made}"
        case CoreError(code=code, message=message):
            return f"failed ({code}): {message}"
        case _:  # progress ticks and tool proposals: the calls themselves are in the log
            return None


def _scrub(value: Any, depth: int = 0) -> Any:
    """`value` with every value under a secret-naming key replaced (nested up to 8 levels)."""
    if depth > 8:
        return value
    if isinstance(value, dict):
        return {
            key: REDACTED if isinstance(key, str) and names_secret(key) else _scrub(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_scrub(item, depth + 1) for item in value]
    return value


@functools.lru_cache(maxsize=1024)
def names_secret(key: str) -> bool:
    """Whether a JSON key names a secret (`refresh_token`, `apiKey`; not `max_tokens`)."""
    words = _NOT_WORD.split(_CAMEL.sub(r"\1_\2", key).lower())
    joined = "_".join(words)
    return any(word in _SECRET_WORDS for word in words) or any(p in joined for p in _SECRET_PAIRS)


def _json(value: Any, limit: int) -> str:
    return _cap(orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode(), limit)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _job(lane: str) -> str:
    return lane.removeprefix(CORE_LANE_PREFIX)


def _text(block: _Block) -> str:
    lines = [line.text for line in block.lines]
    return "\n".join(lines if block.header is None else [block.header, *lines])


def _split(block: _Block, max_chars: int) -> list[_Block]:
    """`block` in pieces of at most `max_chars`, cut between lines (inside a longer line at
    whitespace); each piece keeps the block's header, the first its revision."""
    if block.size <= max_chars:
        return [block]
    room = max_chars - (len(block.header) + 1 if block.header is not None else 0)
    pieces: list[_Block] = []
    current: list[_Line] = []
    used = -1
    for line in (part for whole in block.lines for part in _cut_line(whole, room)):
        if current and used + 1 + len(line.text) > room:
            pieces.append(_piece(block, current, first=not pieces))
            current, used = [], -1
        current.append(line)
        used += 1 + len(line.text)
    if current or not pieces:
        pieces.append(_piece(block, current, first=not pieces))
    pieces[-1].folded = list(block.folded)  # folded replies came after what they repeat
    return pieces


def _piece(block: _Block, lines: list[_Line], *, first: bool) -> _Block:
    return _Block(block.kind, block.seq, lines, block.header, block.header_rev if first else None)


def _cut_line(line: _Line, room: int) -> Iterator[_Line]:
    text = line.text
    while len(text) > room:
        cut = text.rfind(" ", room // 2, room)
        cut = cut if cut > 0 else room
        yield _Line(line.rev, text[:cut])
        text = text[cut:].lstrip(" ")
    if text:
        yield _Line(line.rev, text)


_MIXABLE: Final = frozenset({ChunkKind.MESSAGES, ChunkKind.TOOL_CALL})
"""Kinds a small block may be merged across: a short exchange around a tool call reads best
whole. A skill phase merges only with another phase."""


def _merge_small(blocks: list[_Block], max_chars: int) -> list[_Block]:
    """Neighbours merged while one of them is small and together they fit the cap."""
    small = max_chars // SMALL_FRACTION
    merged: list[_Block] = []
    for block in blocks:
        last = merged[-1] if merged else None
        if (
            last is not None
            and (last.kind is block.kind or {last.kind, block.kind} <= _MIXABLE)
            and (last.size < small or block.size < small)
            and last.size + 1 + block.size <= max_chars
        ):
            merged[-1] = _joined(last, block)
        else:
            merged.append(block)
    return merged


def _joined(first: _Block, second: _Block) -> _Block:
    """One block holding both; the second's header becomes a line of it, and the kind is that
    of the larger part."""
    lines = list(first.lines)
    if second.header is not None:
        rev = second.header_rev if second.header_rev is not None else second.lines[0].rev
        lines.append(_Line(rev, second.header))
    lines.extend(second.lines)
    kind = first.kind if first.size >= second.size else second.kind
    return _Block(
        kind, first.seq, lines, first.header, first.header_rev, [*first.folded, *second.folded]
    )
