"""Rendering a step as the HTTP answer an OpenAI-compatible provider would send. Pure."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from choir.protocol.log.events import Usage
from choir.protocol.names import to_wire_name
from choir.scripted.player import ScriptPlayer
from choir.scripted.script import (
    HttpErrorStep,
    RateLimitStep,
    ReplyStep,
    ScriptedCall,
    ScriptedUsage,
    Step,
    ToolCallsStep,
)

JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer, ready to send."""

    status: int
    body: bytes
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    delay_ms: int = 0
    """Wait before sending it."""


def error_answer(status: int, message: str, kind: str = "invalid_request_error") -> Answer:
    """An OpenAI-style error object."""
    error = {"message": message, "type": kind, "param": None, "code": status}
    return Answer(status, orjson.dumps({"error": error}))


def answer(step: Step, player: ScriptPlayer, model: str, request_size: int) -> Answer:
    """The answer `step` gives to a request for `model` of `request_size` bytes."""
    return replace(_render(step, player, model, request_size), delay_ms=step.delay_ms)


def _render(step: Step, player: ScriptPlayer, model: str, request_size: int) -> Answer:
    if isinstance(step, ReplyStep):
        message: dict[str, Any] = {"role": "assistant", "content": step.text, "refusal": None}
        usage = step.usage or _estimate(request_size, len(step.text))
        return _completion(model, message, step.finish_reason, usage)
    if isinstance(step, ToolCallsStep):
        calls = [_call(call, player) for call in step.calls]
        message = {"role": "assistant", "content": step.text or None, "tool_calls": calls}
        generated = len(step.text) + sum(len(call["function"]["arguments"]) for call in calls)
        usage = step.usage or _estimate(request_size, generated)
        return _completion(model, message, "tool_calls", usage)
    if isinstance(step, HttpErrorStep):
        if step.body is None:
            return error_answer(step.status, step.message, "scripted_error")
        return Answer(step.status, orjson.dumps(step.body))
    if isinstance(step, RateLimitStep):
        headers = {"Retry-After": step.retry_after} if step.retry_after is not None else {}
        limited = error_answer(429, "rate limited (scripted)", "rate_limit_error")
        return replace(limited, headers=headers)
    return Answer(step.status, step.body.encode(errors="surrogateescape"), step.content_type)


def _call(call: ScriptedCall, player: ScriptPlayer) -> dict[str, Any]:
    arguments = call.raw_arguments
    if arguments is None:
        arguments = orjson.dumps(call.arguments).decode()
    name = call.raw_name if call.raw_name is not None else to_wire_name(call.name)
    return {
        "id": call.id or player.new_call_id(),
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _completion(
    model: str, message: dict[str, Any], finish_reason: str, usage: Usage | ScriptedUsage
) -> Answer:
    body = {
        "id": f"chatcmpl-scripted-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": usage_body(usage),
    }
    return Answer(200, orjson.dumps(body))


def usage_body(usage: Usage | ScriptedUsage) -> dict[str, Any]:
    """`usage` as an OpenAI-compatible provider sends it: the counts, then the cached prompt
    tokens and the cost (OpenRouter's `usage.cost`) when the step gives them."""
    body: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if isinstance(usage, ScriptedUsage):
        if usage.cached_tokens:
            body["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
        if usage.cost is not None:
            body["cost"] = usage.cost
    return body


def _estimate(request_bytes: int, generated_chars: int) -> Usage:
    """Roughly four characters a token, like the real tokenizers on English text."""
    prompt, completion = max(1, request_bytes // 4), max(1, generated_chars // 4)
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )
