"""Pure translation between `CompletionRequest`/`Completion` and chat-completions JSON.

`request_body` omits every null setting rather than sending `null`: reasoning models reject a
`temperature` key even when it is null (§21.2). `parse_completion` accepts what OpenAI-compatible
providers really send (content as a string or as text parts, a `refusal` instead of content,
missing usage) and raises `LlmError(malformed)` for anything it cannot read.
"""

from __future__ import annotations

from typing import Any

from choir.adapters.llm.errors import LlmError, LlmErrorKind
from choir.adapters.llm.status import body_error
from choir.adapters.llm.tool_calls import offered_names, read_tool_calls
from choir.adapters.llm.types import Completion, CompletionRequest
from choir.protocol.log.events import Usage


def request_body(request: CompletionRequest) -> dict[str, Any]:
    """The JSON body of the POST to `{endpoint}/chat/completions`."""
    settings = request.settings
    body: dict[str, Any] = {"model": settings.model, "messages": list(request.messages)}
    if request.tools:
        body["tools"] = list(request.tools)
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.reasoning_effort is not None:
        body["reasoning_effort"] = settings.reasoning_effort
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    return body


def parse_completion(
    data: Any, request: CompletionRequest, *, latency_ms: int, retried: bool = False
) -> Completion:
    """The completion in a decoded 2xx body; LlmError when it is not a usable one."""
    name = request.settings.name
    if not isinstance(data, dict):
        raise _malformed(name, "the body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        if data.get("error"):
            raise body_error(request.settings, data["error"])
        raise _malformed(name, "it has no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    finish_reason = choice.get("finish_reason") if isinstance(choice, dict) else None
    if finish_reason == "content_filter":
        raise LlmError(
            LlmErrorKind.CONTENT_FILTER,
            f"model {name!r}: the provider's content filter blocked the answer; "
            "rephrase the request",
        )
    if not isinstance(message, dict):
        raise _malformed(name, "choices[0] has no message")
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise _malformed(name, "tool_calls is not a list")
    text = _content_text(name, message)
    calls = read_tool_calls(raw_calls, offered_names(request.tools))
    assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls.wire:
        assistant["tool_calls"] = calls.wire
    elif not text:
        assistant["content"] = ""
    provider_model = data.get("model")
    return Completion(
        text=text,
        tool_calls=calls.valid,
        invalid_tool_calls=calls.invalid,
        usage=_usage(data.get("usage")),
        cached_tokens=_cached_tokens(data.get("usage")),
        provider_cost_usd=_reported_cost(data.get("usage")),
        latency_ms=latency_ms,
        model=name,
        provider_model=provider_model
        if isinstance(provider_model, str)
        else request.settings.model,
        lane=request.lane,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        message=assistant,
        retried=retried,
    )


def _content_text(name: str, message: dict[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        refusal = message.get("refusal")
        return refusal if isinstance(refusal, str) else ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    raise _malformed(name, "message content is neither text nor a list of parts")


def _usage(raw: Any) -> Usage:
    """Provider token counts; zeros for anything missing or unreadable."""
    if not isinstance(raw, dict):
        return Usage()
    counts = {
        key: value
        for key in ("prompt_tokens", "completion_tokens", "total_tokens")
        if isinstance(value := raw.get(key), int) and not isinstance(value, bool) and value >= 0
    }
    if "total_tokens" not in counts:
        counts["total_tokens"] = counts.get("prompt_tokens", 0) + counts.get("completion_tokens", 0)
    return Usage(**counts)


def _cached_tokens(raw: Any) -> int:
    """Prompt tokens served from the provider's cache (`prompt_tokens_details.cached_tokens`,
    as OpenAI and OpenRouter report them); 0 when not reported."""
    details = raw.get("prompt_tokens_details") if isinstance(raw, dict) else None
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and not isinstance(cached, bool) and cached > 0 else 0


def _reported_cost(raw: Any) -> float | None:
    """The call's cost in USD when the provider reports it (OpenRouter's `usage.cost`)."""
    cost = raw.get("cost") if isinstance(raw, dict) else None
    if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e6:
        return float(cost)
    return None


def _malformed(name: str, why: str) -> LlmError:
    return LlmError(
        LlmErrorKind.MALFORMED,
        f"model {name!r} sent a malformed response ({why}); try again or choose another model",
    )
