"""The event window as OpenAI chat messages (§11.3, seed 000 "LLM Prompt Structure").

`UserMsg` becomes a user message, `ModelOutput` an assistant message with its `tool_calls` (wire
names, JSON-string arguments), `ToolResultCommitted` a tool message answering its `tool_call_id`,
`InjectedInstruction` a system message prefixed `[INJECTED]`, core reports (`CoreStopped`,
`CoreEventEmitted`) system notes, `AgentReplied` assistant text. Other events are not shown.

OpenAI-compatible APIs reject a transcript in which an assistant's tool call is not answered by a
tool message right after it, or a tool message answers no such call. The log does not guarantee
that order: a core report or an injection can be committed between two results of one model
output, and a window boundary can fall between a call and its result. So `window_messages`
holds other messages back until the open calls are answered, drops a result whose call is not in
the window, and strips a call whose result is missing (dropping the assistant message if nothing
is left of it). The transcript it returns always pairs calls and results.

A lane's next prompt repeats its last one plus an event or two, so a lane keeps a `ShownEvents`:
each window event's messages are encoded (and measured) once, not at every model call — that
was most of what assembling a prompt cost. The messages it hands out are shared by successive
prompts and never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any, Final

import orjson

from choir.core.memory.working import WindowEvent
from choir.protocol.log.core_jobs import CoreError, CoreEvent, CoreFinalResult, CoreNeedInfo
from choir.protocol.log.events import (
    AgentReplied,
    ApprovalResolved,
    CoreEventEmitted,
    CoreStopped,
    Event,
    InjectedInstruction,
    ModelOutput,
    ToolCall,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.names import to_wire_name
from choir.protocol.tooling.tools import ToolResult

__all__ = [
    "CHARS_PER_TOKEN",
    "Message",
    "ResultView",
    "ShownEvents",
    "estimate_tokens",
    "event_messages",
    "full_result",
    "json_text",
    "window_messages",
]

Message = dict[str, Any]
"""One OpenAI chat message."""

ResultView = Callable[[str, ToolResult], dict[str, Any]]
"""What the model sees of a tool's result, by tool name (`ToolRegistry.result_for_prompt`
applies `prompt_mask`, §8.5)."""

CHARS_PER_TOKEN: Final = 4
"""The usual estimate for English text and JSON; no tokenizer is needed to decide compaction."""


def full_result(tool: str, result: ToolResult) -> dict[str, Any]:
    """The whole structured result (tools without `prompt_mask`)."""
    return result.model_dump(mode="json", exclude_none=True)


MAX_TOOL_RESULT_CHARS: Final = 16_000
"""Most of one tool result a prompt carries (~4,000 tokens); the rest stays in the log."""


def capped(content: str, call_id: str) -> str:
    """`content`, cut to MAX_TOOL_RESULT_CHARS with a note saying how to see the rest."""
    if len(content) <= MAX_TOOL_RESULT_CHARS:
        return content
    dropped = len(content) - MAX_TOOL_RESULT_CHARS
    return (
        content[:MAX_TOOL_RESULT_CHARS]
        + f"\n[truncated: {dropped} more characters; choir.memory.query store=working "
        f"mode=result query={call_id} offset={MAX_TOOL_RESULT_CHARS} reads on]"
    )


def json_text(value: object) -> str:
    """Compact JSON, non-ASCII kept as is: what tool arguments and results cost in tokens."""
    return orjson.dumps(value).decode()


def estimate_tokens(messages: Iterable[Message]) -> int:
    """Roughly how many tokens `messages` take (their JSON length / CHARS_PER_TOKEN)."""
    listed = list(messages)
    # one encoding of the list: `[` + the messages joined by `,` + `]`, so n + 1 more characters
    # than the messages' own encodings
    chars = len(orjson.dumps(listed)) - len(listed) - 1 if listed else 0
    return -(-chars // CHARS_PER_TOKEN)


def event_messages(event: Event, result_view: ResultView = full_result) -> list[Message]:
    """The messages one event becomes on its own (unpaired); [] for events not shown."""
    match event:
        case UserMsg(text=text, attachments=attachments):
            extra = f"\n[attached: {', '.join(attachments)}]" if attachments else ""
            return [{"role": "user", "content": text + extra}]
        case ModelOutput(text=text, tool_calls=calls):
            return [_assistant(text, _unique(calls))] if text or calls else []
        case ToolResultCommitted(call_id=call_id, tool=tool, result=result):
            content = capped(json_text(result_view(tool, result)), call_id)
            return [{"role": "tool", "tool_call_id": call_id, "content": content}]
        case InjectedInstruction(content=content):
            return [{"role": "system", "content": f"[INJECTED] {content}"}]
        case CoreStopped(job_name=name, outcome=outcome, report=report):
            note = f"[CORE {outcome.upper()}] core job {name}: {report}"
            return [{"role": "system", "content": note}]
        case CoreEventEmitted(job_name=name, event=core_event):
            return [{"role": "system", "content": f"[CORE EVENT] {_core_note(name, core_event)}"}]
        case AgentReplied(text=text):
            return [{"role": "assistant", "content": text}] if text else []
        case ApprovalResolved(approval_id=approval, status=status, reason=reason):
            said = f": {reason}" if reason else ""
            note = f"[APPROVAL] {approval} {status.replace('_', ' ')}{said}"
            return [{"role": "system", "content": note}]
        case _:
            return []


def window_messages(
    events: Sequence[WindowEvent],
    result_view: ResultView = full_result,
    shown: ShownEvents | None = None,
) -> list[Message]:
    """The window as a valid transcript: every tool call answered right after its message.

    `shown` keeps the events' messages for the lane's next call (a fresh one when None)."""
    cache = shown if shown is not None else ShownEvents()
    cache.use(result_view)
    messages = cache.transcript(events)
    cache.keep(events)
    return messages


@dataclass(frozen=True, slots=True)
class _EventView:
    """One window event as a transcript shows it."""

    messages: list[Message]
    """What it becomes on its own (`event_messages`)."""
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    """A model output's calls (distinct ids): the transcript pairs them with their results."""
    whole: Message | None = None
    """The assistant message with all of `calls`, for when each of them is answered."""
    answers: str | None = None
    """A tool result's call id: the call it answers."""


class ShownEvents:
    """A lane's window events as messages, built once per event and kept between its calls.

    Entries are keyed by the event's chain hash and built for one result view (a reloaded tool
    registry masks results differently: its first prompt starts afresh). Only the events of the
    latest window are kept. `chars` measures a transcript, reading the sizes of the messages
    held here instead of encoding them again.

    The latest window's transcript is kept too (`transcript`): pairing a whole window of fifty
    events at every model call was most of what a prompt still cost, and the next window is
    mostly the same events — the same objects, as working memory only appends, drops the
    oldest as the window slides, and folds.
    """

    __slots__ = ("_built", "_last", "_marks", "_origin", "_result_view", "_sizes", "_views")

    def __init__(self) -> None:
        self._result_view: ResultView | None = None
        self._views: dict[str, _EventView] = {}
        self._sizes: dict[int, int] = {}
        """Encoded length by `id()` of each message held in `_views` (alive while held)."""
        self._last: tuple[WindowEvent, ...] = ()
        """The latest window paired (held: an event of it keeps its `id()`)."""
        self._built: _Transcript | None = None
        """`_last` paired, before `finish` closed its open calls."""
        self._marks: dict[int, tuple[int, int]] = {}
        """By `id()` of an event after which no call was open: its index in the window and how
        many messages the transcript had then, both plus `_origin` — so a transcript taken
        over, its events and messages now further ahead, keeps its marks by moving `_origin`.
        Marks of events gone from the window linger until pruned: `_take_over` checks that
        a mark's event is still the one at its index."""
        self._origin = (0, 0)

    def use(self, result_view: ResultView) -> None:
        """Build for `result_view` from now on (forgetting what was built for another)."""
        if result_view != self._result_view:
            self._result_view = result_view
            self._views, self._sizes = {}, {}
            self._last, self._built, self._marks, self._origin = (), None, {}, (0, 0)

    def transcript(self, events: Sequence[WindowEvent]) -> list[Message]:
        """`events` paired into a transcript, taking over the latest window's where they agree.

        Pairing is a scan whose state, wherever no call is open, is only the messages so far —
        and what comes next depends on the last two of them alone (`_dedupe_reply`). So once
        this window reaches such a point at an event where the latest one also was, with the
        same last two messages, and the rest of the latest window follows in this one, the
        rest pairs as it did then: its messages are taken over, and only the new events
        after it are paired.
        """
        window = tuple(events)
        builder, fresh = _Transcript(), list[tuple[int, int, int]]()
        rest = len(window)
        for index, item in enumerate(window):
            self._pair(builder, item)
            if builder.calls or builder.held:
                continue
            taken = self._take_over(builder, window, index)
            if taken is not None:
                builder, rest = taken
                break
            fresh.append((id(item), index, len(builder.out)))
        else:
            self._marks, self._origin = {}, (0, 0)
        marks, (events_at, messages_at) = self._marks, self._origin
        for key, index, length in fresh:
            marks[key] = (index + events_at, length + messages_at)
        for index in range(rest, len(window)):
            self._pair(builder, window[index])
            if not builder.calls and not builder.held:
                marks[id(window[index])] = (index + events_at, len(builder.out) + messages_at)
        if len(marks) > 2 * len(window) + 16:
            held = set(map(id, window))
            self._marks = {key: mark for key, mark in marks.items() if key in held}
        self._last, self._built = window, builder.copy()
        return builder.finish()

    def _pair(self, builder: _Transcript, item: WindowEvent) -> None:
        view = self.view(item)
        if view.answers is not None:
            builder.answer(view.answers, view.messages)
        elif view.calls:
            builder.call(view.text, view.calls, view.whole)
        else:
            builder.note(view.messages)

    def _take_over(
        self, builder: _Transcript, window: tuple[WindowEvent, ...], index: int
    ) -> tuple[_Transcript, int] | None:
        """The latest window's transcript continuing `builder` (no call open after
        `window[index]`), and the index of this window's first event after the latest's end;
        None when the two do not agree from here on. Moves `_origin` when it takes over."""
        built, last, item = self._built, self._last, window[index]
        mark = self._marks.get(id(item))
        if built is None or mark is None:
            return None
        events_at, messages_at = self._origin
        at, length = mark[0] - events_at, mark[1] - messages_at
        after = len(last) - at - 1
        if not 0 <= at < len(last) or last[at] is not item or len(window) - index - 1 < after:
            return None
        if not all(map(is_, last[at + 1 :], window[index + 1 : index + 1 + after])):
            return None
        if builder.out[-2:] != built.out[max(length - 2, 0) : length]:
            return None
        built.out = builder.out + built.out[length:]
        self._origin = (events_at + at - index, messages_at + length - len(builder.out))
        self._built = None  # taken over: the caller's to extend
        return built, index + 1 + after

    def view(self, item: WindowEvent) -> _EventView:
        found = self._views.get(item.hash)
        if found is None:
            found = self._views[item.hash] = self._build(item.event)
            self._measure(found)
        return found

    def keep(self, items: Sequence[WindowEvent]) -> None:
        """Forget events no longer in the window (once enough of them have left it)."""
        if len(self._views) <= 2 * len(items) + 16:
            return
        views = self._views
        self._views = {item.hash: views[item.hash] for item in items if item.hash in views}
        self._sizes = {}
        for view in self._views.values():
            self._measure(view)

    def chars(self, messages: Iterable[Message]) -> int:
        """The encoded length of `messages`, as `estimate_tokens` counts it."""
        sizes = self._sizes
        return sum(sizes.get(id(message)) or len(orjson.dumps(message)) for message in messages)

    def _build(self, event: Event) -> _EventView:
        result_view = self._result_view or full_result
        if isinstance(event, ModelOutput) and event.tool_calls:
            calls = _unique(event.tool_calls)
            whole = _assistant(event.text, calls)  # what `event_messages` makes of it
            return _EventView([whole], event.text, calls, whole)
        if isinstance(event, ToolResultCommitted):
            return _EventView(event_messages(event, result_view), answers=event.call_id)
        return _EventView(event_messages(event, result_view))

    def _measure(self, view: _EventView) -> None:
        whole = view.whole
        shown_whole = whole is None or any(message is whole for message in view.messages)
        for message in view.messages if shown_whole else (*view.messages, whole):
            self._sizes[id(message)] = len(orjson.dumps(message))


class _Transcript:
    """Messages so far, plus the assistant message whose calls are still being answered.

    Built over a lane's window whenever it changed beyond taking over the latest one
    (`ShownEvents.transcript`), so it keeps to plain lists and dicts and does nothing for a
    group that is not open.
    """

    __slots__ = ("answers", "calls", "held", "out", "text", "whole")

    def __init__(self) -> None:
        self.out: list[Message] = []
        self.text = ""
        self.calls: list[ToolCall] = []
        """The open assistant message's calls (distinct ids); empty when none is open."""
        self.whole: Message | None = None
        self.answers: dict[str, Message] = {}
        self.held: list[Message] = []
        """Notes that came while calls were open: they follow the calls' answers."""

    def call(self, text: str, calls: list[ToolCall], whole: Message | None = None) -> None:
        if self.calls:
            self._close()
        self.text, self.calls, self.whole = text, calls, whole

    def answer(self, call_id: str, messages: list[Message]) -> None:
        calls, answers = self.calls, self.answers
        if call_id in answers or all(call.id != call_id for call in calls):
            return  # its call is not in the window (or was answered already): an orphan
        answers[call_id] = messages[0]
        if len(answers) == len(calls):
            self._close()

    def note(self, messages: list[Message]) -> None:
        if self.calls:
            self.held.extend(messages)
            return
        self.out.extend(messages)
        self._dedupe_reply()

    def finish(self) -> list[Message]:
        if self.calls:
            self._close()
        return self.out

    def copy(self) -> _Transcript:
        """An independent copy (the messages themselves are shared: never changed)."""
        other = _Transcript()
        other.out, other.text, other.calls = self.out.copy(), self.text, self.calls.copy()
        other.whole, other.answers, other.held = self.whole, self.answers.copy(), self.held.copy()
        return other

    def _close(self) -> None:
        """Emit the open assistant message with its answered calls, then what was held back."""
        calls, answers, out = self.calls, self.answers, self.out
        if len(answers) == len(calls) and self.whole is not None:
            out.append(self.whole)
            out.extend(answers[call.id] for call in calls)
        else:
            answered = [call for call in calls if call.id in answers]
            if answered or self.text:
                whole = self.whole if len(answered) == len(calls) else None
                out.append(whole if whole is not None else _assistant(self.text, answered))
                out.extend(answers[call.id] for call in answered)
        self.text, self.calls, self.whole = "", [], None
        if answers:
            self.answers = {}
        if self.held:
            for message in self.held:
                out.append(message)
                self._dedupe_reply()
            self.held = []

    def _dedupe_reply(self) -> None:
        """Drop an `AgentReplied` that repeats the assistant text right before it."""
        out = self.out
        if len(out) < 2:
            return
        last, before = out[-1], out[-2]
        if (
            last["role"] == before["role"] == "assistant"
            and "tool_calls" not in last
            and "tool_calls" not in before
            and last["content"] == before["content"]
        ):
            out.pop()


def _assistant(text: str, calls: Sequence[ToolCall]) -> Message:
    if not calls:
        return {"role": "assistant", "content": text}
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": to_wire_name(call.name),
                    "arguments": json_text(call.arguments),
                },
            }
            for call in calls
        ],
    }


def _unique(calls: Iterable[ToolCall]) -> list[ToolCall]:
    """Calls with distinct ids (the first of each): a transcript may not repeat an id."""
    seen: dict[str, ToolCall] = {}
    for call in calls:
        seen.setdefault(call.id, call)
    return list(seen.values())


def _core_note(job: str, event: CoreEvent) -> str:
    """One line about a core event edge must act on."""
    match event:
        case CoreFinalResult(summary=summary):
            return f"core job {job} final result: {summary}"
        case CoreError(code=code, message=message):
            return f"core job {job} error ({code}): {message}"
        case CoreNeedInfo(question=question):
            return f"core job {job} needs information: {question}"
        case _:
            return f"core job {job} {event.kind}: {json_text(event.model_dump(mode='json'))}"
