"""The OpenAI-compatible chat-completions client the lanes call (§21.1, §7.7, §22.1).

    async with LlmClient() as llm:
        completion = await llm.complete(
            CompletionRequest(settings, messages, lane="edge", tools=views),
            on_rate_limited=tell_user,
        )

One POST to `{endpoint}/chat/completions` per attempt. The only retry is §7.7's: on a 429 the
client calls `on_rate_limited(wait_s)` once (the edge lane tells the user), waits `Retry-After`
(or `rate_limit_retry_ms`), and tries once more; every other failure, and a second one, raises
`LlmError` at once — the user re-triggers. Each call logs one structured line (model, lane,
tokens, latency; never message contents or the key).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import httpx
import orjson

from choir.adapters.llm_errors import LlmError, LlmErrorKind, scrub
from choir.adapters.llm_response import parse_completion, request_body
from choir.adapters.llm_status import rate_limited, retry_after_seconds, status_error
from choir.adapters.llm_types import (
    Completion,
    CompletionRequest,
    InvalidToolCall,
    ModelSettings,
)
from choir.logs import bind_context, get_logger
from choir.protocol.lenient_json import loads_lenient

__all__ = [
    "Completion",
    "CompletionRequest",
    "InvalidToolCall",
    "LlmClient",
    "LlmError",
    "LlmErrorKind",
    "ModelSettings",
    "RateLimitNotice",
]

RateLimitNotice = Callable[[float], Awaitable[None]]
"""Called once with the seconds about to be waited when a call is rate limited."""

_log = get_logger("choir.llm")


class LlmClient:
    """Calls OpenAI-compatible endpoints; `http` is borrowed when given, else owned and closed."""

    def __init__(
        self,
        http: httpx.AsyncClient | None = None,
        *,
        max_retry_wait_s: float = 120.0,
    ) -> None:
        self.max_retry_wait_s = max_retry_wait_s
        """A 429 asking for a longer wait fails at once instead of stalling the lane."""
        self._owned = http is None
        self._http = http if http is not None else httpx.AsyncClient()

    async def complete(
        self, request: CompletionRequest, *, on_rate_limited: RateLimitNotice | None = None
    ) -> Completion:
        """The model's answer; LlmError for every way the call can fail."""
        started = time.perf_counter()
        try:
            completion = await self._complete(request, started, on_rate_limited)
        except LlmError as error:
            _log_failure(request, error, _elapsed_ms(started))
            raise
        _log_success(completion)
        return completion

    async def _complete(
        self, request: CompletionRequest, started: float, on_rate_limited: RateLimitNotice | None
    ) -> Completion:
        body = orjson.dumps(request_body(request))
        response = await self._attempt(request, body)
        retried = response.status_code == 429
        if retried:
            response = await self._retry(request, body, response, on_rate_limited)
        if not response.is_success:
            raise status_error(request.settings, response.status_code, response.content)
        data = _decode(request.settings, response)
        return parse_completion(data, request, latency_ms=_elapsed_ms(started), retried=retried)

    async def _retry(
        self,
        request: CompletionRequest,
        body: bytes,
        limited: httpx.Response,
        on_rate_limited: RateLimitNotice | None,
    ) -> httpx.Response:
        """§7.7: tell the lane once, wait as asked, try exactly once more."""
        wait = self._rate_limit_wait(request, limited)
        with bind_context(lane=request.lane):
            _log.warning(
                "llm rate limited; retrying once",
                fields={"model": request.settings.name, "wait_s": wait},
            )
        if on_rate_limited is not None:
            await on_rate_limited(wait)
        await asyncio.sleep(wait)
        response = await self._attempt(request, body)
        if response.status_code == 429:
            raise rate_limited(request.settings, "still limited after one retry")
        return response

    def _rate_limit_wait(self, request: CompletionRequest, response: httpx.Response) -> float:
        asked = retry_after_seconds(response.headers.get("Retry-After"))
        wait = asked if asked is not None else request.rate_limit_retry_ms / 1000
        if wait > self.max_retry_wait_s:
            why = f"asked to wait {wait:.0f} s, more than the {self.max_retry_wait_s:.0f} s allowed"
            raise rate_limited(request.settings, why)
        return wait

    async def _attempt(self, request: CompletionRequest, body: bytes) -> httpx.Response:
        """One POST; transport failures become LlmError, any HTTP status is returned."""
        settings = request.settings
        timeout_s = request.timeout_s or settings.timeout_s
        # httpx's read timeout is per chunk: the whole answer is bounded by asyncio.timeout
        timeout = httpx.Timeout(timeout_s, connect=min(settings.connect_timeout_s, timeout_s))
        try:
            async with asyncio.timeout(timeout_s):
                return await self._http.post(
                    settings.endpoint.rstrip("/") + "/chat/completions",
                    content=body,
                    headers=_headers(settings),
                    timeout=timeout,
                )
        except (TimeoutError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
            raise LlmError(
                LlmErrorKind.TIMEOUT,
                f"model {settings.name!r} did not answer within {timeout_s:g} s "
                f"(models.{settings.name}.timeout_s); try again, or choose a faster model",
            ) from None
        except httpx.DecodingError:
            raise LlmError(
                LlmErrorKind.MALFORMED,
                f"model {settings.name!r} sent a malformed response (its body could not be "
                "decoded); try again or choose another model",
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _unreachable(settings, exc) from None

    async def aclose(self) -> None:
        """Close the HTTP client if this client created it."""
        if self._owned:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _decode(settings: ModelSettings, response: httpx.Response) -> Any:
    try:
        return loads_lenient(response.content)  # invalid UTF-8, lone surrogates: U+FFFD
    except orjson.JSONDecodeError:
        raise LlmError(
            LlmErrorKind.MALFORMED,
            f"model {settings.name!r} sent a malformed response (the body is not JSON); "
            "try again or choose another model",
            response.status_code,
        ) from None


def _headers(settings: ModelSettings) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    return headers


def _unreachable(settings: ModelSettings, exc: Exception) -> LlmError:
    host = urlsplit(settings.endpoint).netloc or settings.endpoint
    why = scrub(str(exc) or type(exc).__name__, settings.api_key)
    return LlmError(
        LlmErrorKind.UNREACHABLE,
        f"model {settings.name!r}: cannot reach {host} ({why}); "
        f"check models.{settings.name}.endpoint and the network",
    )


def _elapsed_ms(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


def _log_success(completion: Completion) -> None:
    usage = completion.usage
    with bind_context(lane=completion.lane):
        _log.info(
            "llm call",
            fields={
                "model": completion.model,
                "provider_model": completion.provider_model,
                "latency_ms": completion.latency_ms,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
                "finish_reason": completion.finish_reason,
                "tool_calls": len(completion.tool_calls),
                "invalid_tool_calls": len(completion.invalid_tool_calls),
                "retried": completion.retried,
            },
        )


def _log_failure(request: CompletionRequest, error: LlmError, latency_ms: int) -> None:
    with bind_context(lane=request.lane):
        _log.warning(
            "llm call failed",
            fields={
                "model": request.settings.name,
                "latency_ms": latency_ms,
                "kind": error.kind.value,
                "status": error.status,
                "error": error.message,
            },
        )
