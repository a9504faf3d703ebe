"""Validation of chat-completions requests, as strict as the real APIs on what choir sends.

The scripted server is where tests see exactly what a lane sends a model, so it rejects what
OpenAI would: a missing `model`, an empty `messages`, a role it does not know, a tool that is not
`{"type": "function", "function": {...}}`, a function name outside `^[a-zA-Z0-9_-]{1,64}$` (the
reason wire names exist), a tool message that answers no pending tool call, or a tool call left
unanswered. Unknown top-level parameters pass: providers accept many.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from choir.config.validation.problems import json_path

FUNCTION_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionSpec(_Closed):
    name: str = Field(pattern=FUNCTION_NAME_PATTERN)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolSpec(_Closed):
    type: Literal["function"]
    function: FunctionSpec


class CalledFunction(_Closed):
    name: str = Field(pattern=FUNCTION_NAME_PATTERN)
    arguments: str


class AssistantToolCall(_Closed):
    id: str = Field(min_length=1)
    type: Literal["function"]
    function: CalledFunction


class Message(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[AssistantToolCall] | None = None
    tool_call_id: str | None = None


class ChatRequest(_Open):
    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    reasoning_effort: str | None = None
    stream: Literal[False] | None = None
    """Streaming is not scripted: a request asking for it is refused."""


def request_problems(body: Any) -> list[str]:
    """Why `body` is not a well-formed chat-completions request (empty when it is)."""
    if not isinstance(body, dict):
        return ["the request body must be a JSON object"]
    try:
        request = ChatRequest.model_validate(body)
    except ValidationError as exc:
        return [
            f"{json_path(error['loc'], root='body')}: {error['msg']}"
            for error in exc.errors(include_url=False)
        ]
    return history_problems(request.messages)


def history_problems(messages: Sequence[Message]) -> list[str]:
    """Tool messages must answer the tool calls of the assistant message before them, all of
    them, before the conversation moves on."""
    problems: list[str] = []
    pending: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "tool":
            if message.tool_call_id not in pending:
                problems.append(
                    f"messages[{index}]: tool message answers {message.tool_call_id!r}, "
                    "which is not a pending tool call of the previous assistant message"
                )
            pending.discard(message.tool_call_id or "")
            continue
        if pending:
            problems.append(f"messages[{index}]: tool calls {sorted(pending)} were not answered")
        pending = {call.id for call in message.tool_calls or ()}
    if pending:
        problems.append(f"messages: tool calls {sorted(pending)} were not answered")
    return problems
