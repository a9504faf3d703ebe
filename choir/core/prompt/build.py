"""Per-lane prompt assembly (§11.3, §10.2, §21.4): a lane's working memory as OpenAI messages.

The layout follows choir's memory page (seed 000) exactly:

    edge: [system: instructions + skills] [system: USER.md] [system: SOUL.md]
          [system: reference summary] [event window, the latest user message included]
          [system: memories recalled for the latest user message]
    core: [system: instructions + skills] [system: SOUL-CORE.md]
          [system: reference summary] [event window] [system: CoreJobStart]

The latest user message is part of the window in its place in time (what the model answers
comes after it), and is shown in full even once it is folded out of the window; it then comes
right after the summary. While a skill runs, one last system message shows its current state
only: objective, allowed tools, transitions (§10.2). Empty parts (no summary yet, an empty
identity file) are left out rather than sent as empty messages. The recalled memories (design
004, `choir.core.memory.recall`) come last, after the window: they change with every message, so
the head and window before them stay the same prefix from call to call (a provider's prompt cache
keeps serving it).

`LanePrompt` also measures itself: the window (compactable) and everything else (never
compacted), which is what `compaction.should_compact` compares with its threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from choir.core.memory.recall import recall_block
from choir.core.memory.working import WorkingMemory
from choir.core.prompt.text import (
    CORE_INSTRUCTIONS,
    EDGE_INSTRUCTIONS,
    briefing_text,
    identity_text,
    summary_text,
    system_text,
)
from choir.core.prompt.window import (
    CHARS_PER_TOKEN,
    Message,
    ResultView,
    ShownEvents,
    estimate_tokens,
    full_result,
    window_messages,
)
from choir.core.skills.runner import SkillView
from choir.protocol.log.core_jobs import CoreJobStart
from choir.protocol.tooling.memory import ReferenceSummary

__all__ = [
    "DEFAULT_WINDOW_SIZE",
    "LanePrompt",
    "PromptSize",
    "core_prompt",
    "edge_prompt",
]

DEFAULT_WINDOW_SIZE: Final = 50
"""Events shown per lane unless config says otherwise (`event_window_size`, §11.3)."""


@dataclass(frozen=True, slots=True)
class PromptSize:
    """A prompt's size in estimated tokens, split the way compaction needs it."""

    window_tokens: int
    """The compactable part: the event window, without the latest user message."""
    fixed_tokens: int
    """Everything never compacted: system prompt, identity, summary, latest user message,
    briefing, skill view, and the tool schemas sent alongside."""


@dataclass(frozen=True, slots=True)
class LanePrompt:
    """One LLM call's messages, with the parts measured."""

    messages: tuple[Message, ...]
    window_tokens: int
    fixed_tokens: int

    def size(self, tools: Sequence[dict[str, Any]] = ()) -> PromptSize:
        """The prompt's size, counting the `tools` parameter sent with it as fixed."""
        tool_tokens = _TOOL_TOKENS.of(tools)
        return PromptSize(self.window_tokens, self.fixed_tokens + tool_tokens)


class _ToolTokens:
    """`estimate_tokens` of the `tools` lists lately measured, by the identity of their entries.

    A lane offers the same tools call after call, as the very same dicts (the registry builds
    each tool's view once and never changes it), so encoding them all again at every call to
    measure them (~20 µs for the seed tools) is waste. The entries are kept with their count:
    an id cannot be reused while its dict is held here.
    """

    __slots__ = ("_counted",)

    LIMIT: Final = 8
    """Lists remembered (a lane's, each core job's, a skill state's); the oldest goes first."""

    def __init__(self) -> None:
        self._counted: dict[tuple[int, ...], tuple[tuple[dict[str, Any], ...], int]] = {}

    def of(self, tools: Sequence[dict[str, Any]]) -> int:
        key = tuple(map(id, tools))
        found = self._counted.get(key)
        if found is not None:
            return found[1]
        tokens = estimate_tokens(tools)
        if len(self._counted) >= self.LIMIT:
            del self._counted[next(iter(self._counted))]
        self._counted[key] = (tuple(tools), tokens)
        return tokens


_TOOL_TOKENS: Final = _ToolTokens()


def edge_prompt(
    memory: WorkingMemory,
    *,
    user_md: str,
    soul_md: str,
    skills: Sequence[tuple[str, str]] = (),
    skill_view: SkillView | None = None,
    window_size: int = DEFAULT_WINDOW_SIZE,
    result_view: ResultView = full_result,
    shown: ShownEvents | None = None,
) -> LanePrompt:
    """The edge lane's prompt: identity of user and edge, summary, window (§11.3); `shown`
    keeps the window's messages for the lane's next prompt."""
    head = _HEADS.of(
        memory.summary,
        (EDGE_INSTRUCTIONS, tuple(skills), user_md, soul_md),
        lambda: [
            _system(system_text(EDGE_INSTRUCTIONS, skills)),
            *_optional(identity_text("USER.md", "the user", user_md)),
            *_optional(identity_text("SOUL.md", "who you are", soul_md)),
            *_optional(summary_text(memory.summary)),
        ],
    )
    recalled = recall_block(memory.recalled) if memory.recalled is not None else None
    return _assemble(memory, head, _optional(recalled), skill_view, window_size, result_view, shown)


def core_prompt(
    memory: WorkingMemory,
    *,
    soul_core_md: str,
    briefing: CoreJobStart,
    skills: Sequence[tuple[str, str]] = (),
    skill_view: SkillView | None = None,
    window_size: int = DEFAULT_WINDOW_SIZE,
    result_view: ResultView = full_result,
    shown: ShownEvents | None = None,
) -> LanePrompt:
    """A core job's prompt: SOUL-CORE.md only (never USER.md), summary, window, briefing."""
    head = _HEADS.of(
        memory.summary,
        (CORE_INSTRUCTIONS, tuple(skills), soul_core_md),
        lambda: [
            _system(system_text(CORE_INSTRUCTIONS, skills)),
            *_optional(identity_text("SOUL-CORE.md", "who you are", soul_core_md)),
            *_optional(summary_text(memory.summary)),
        ],
    )
    tail = [_system(briefing_text(briefing))]
    return _assemble(memory, head, tail, skill_view, window_size, result_view, shown)


@dataclass(frozen=True, slots=True)
class _Head:
    """A prompt's messages before the window, and their estimated tokens."""

    messages: tuple[Message, ...]
    tokens: int


class _Heads:
    """The heads lately built, by what they are made of: the instructions, skills and identity
    texts, and the reference summary (by identity: working memory swaps in a new one at each
    fold, and keeps it meanwhile).

    A lane's head is the same from one model call to the next; building its system messages
    again and encoding them to measure them (a system prompt, identity files and a summary of
    some KB) was a good part of what a prompt cost. The summary is kept with its entry, so its
    `id()` cannot be reused while the entry is held.
    """

    __slots__ = ("_built",)

    LIMIT: Final = 8
    """Heads remembered (edge's, each core job's); the oldest goes first."""

    def __init__(self) -> None:
        self._built: dict[tuple[object, ...], tuple[ReferenceSummary, _Head]] = {}

    def of(
        self,
        summary: ReferenceSummary,
        parts: tuple[object, ...],
        build: Callable[[], list[Message]],
    ) -> _Head:
        key = (*parts, id(summary))
        found = self._built.get(key)
        if found is not None and found[0] is summary:
            return found[1]
        messages = build()
        head = _Head(tuple(messages), estimate_tokens(messages))
        if len(self._built) >= self.LIMIT:
            del self._built[next(iter(self._built))]
        self._built[key] = (summary, head)
        return head


_HEADS: Final = _Heads()


def _assemble(
    memory: WorkingMemory,
    head: _Head,
    tail: list[Message],
    skill_view: SkillView | None,
    window_size: int,
    result_view: ResultView,
    shown: ShownEvents | None,
) -> LanePrompt:
    shown = shown if shown is not None else ShownEvents()
    window = window_messages(memory.window(window_size), result_view, shown)
    if skill_view is not None:
        tail = [*tail, _system(skill_view.render())]
    pinned = 0
    if memory.latest_user is not None:
        pinned = _tokens(shown.chars(shown.view(memory.latest_user).messages))
    window_tokens = _tokens(shown.chars(window)) - pinned
    return LanePrompt(
        messages=(*head.messages, *window, *tail),
        window_tokens=window_tokens,
        fixed_tokens=head.tokens + estimate_tokens(tail) + pinned,
    )


def _tokens(chars: int) -> int:
    """`estimate_tokens` of messages `chars` long."""
    return -(-chars // CHARS_PER_TOKEN)


def _system(content: str) -> Message:
    return {"role": "system", "content": content}


def _optional(content: str | None) -> list[Message]:
    return [] if content is None else [_system(content)]
