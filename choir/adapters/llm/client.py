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

The HTTP is `http1.Http1Pool`'s: h11 over asyncio streams, connections kept alive per origin
(a lane makes one call per step). Redirects are not followed, and https is verified against
certifi's bundle (or `SSL_CERT_FILE` / `SSL_CERT_DIR`), whatever CA certificates the agent's
image holds. An environment naming a proxy for the endpoint's scheme (`HTTP_PROXY`,
`HTTPS_PROXY`, `NO_PROXY`), and a borrowed aiohttp session, go through aiohttp instead, imported
then: the agent's start and its first call load no aiohttp (its import builds two TLS contexts
from the system's CA store, ~0.13 s of CPU, and it holds ~14 MB).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import ssl
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, Self
from urllib.parse import urlsplit

import orjson

from choir.adapters.llm.errors import LlmError, LlmErrorKind, scrub
from choir.adapters.llm.http1 import ConnectTimeout, Http1Pool, Malformed
from choir.adapters.llm.response import parse_completion, request_body
from choir.adapters.llm.status import rate_limited, retry_after_seconds, status_error
from choir.adapters.llm.types import (
    Completion,
    CompletionRequest,
    InvalidToolCall,
    ModelSettings,
)
from choir.logs import bind_context, get_logger
from choir.protocol.lenient_json import loads_lenient

if TYPE_CHECKING:  # aiohttp loads only for a proxy or a borrowed session (~0.13 s of CPU)
    import aiohttp

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


class _Answer(NamedTuple):
    """What the client keeps of one HTTP answer (the connection goes back to the pool)."""

    status: int
    retry_after: str | None
    content: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300


class LlmClient:
    """Calls OpenAI-compatible endpoints; `http` is borrowed when given, else owned and closed."""

    def __init__(
        self,
        http: aiohttp.ClientSession | None = None,
        *,
        max_retry_wait_s: float = 120.0,
    ) -> None:
        self.max_retry_wait_s = max_retry_wait_s
        """A 429 asking for a longer wait fails at once instead of stalling the lane."""
        self._owned = http is None
        self._http = http
        """Made at the first call when not borrowed (a session needs the running loop)."""
        self._verified: ssl.SSLContext | None = None
        """The CAs https endpoints are checked against, read at the first https call."""
        self._plain = Http1Pool()
        """Every call's HTTP but a proxied one's or a borrowed session's."""
        self._proxied: dict[str, bool] = {}
        """Per endpoint, whether the environment sends it through a proxy, read at its first
        call: reading the environment's proxies walks all of it (~50 µs a call)."""

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
        retried = response.status == 429
        if retried:
            response = await self._retry(request, body, response, on_rate_limited)
        if not response.is_success:
            raise status_error(request.settings, response.status, response.content)
        data = _decode(request.settings, response)
        return parse_completion(data, request, latency_ms=_elapsed_ms(started), retried=retried)

    async def _retry(
        self,
        request: CompletionRequest,
        body: bytes,
        limited: _Answer,
        on_rate_limited: RateLimitNotice | None,
    ) -> _Answer:
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
        if response.status == 429:
            raise rate_limited(request.settings, "still limited after one retry")
        return response

    def _rate_limit_wait(self, request: CompletionRequest, response: _Answer) -> float:
        asked = retry_after_seconds(response.retry_after)
        wait = asked if asked is not None else request.rate_limit_retry_ms / 1000
        if wait > self.max_retry_wait_s:
            why = f"asked to wait {wait:.0f} s, more than the {self.max_retry_wait_s:.0f} s allowed"
            raise rate_limited(request.settings, why)
        return wait

    async def _attempt(self, request: CompletionRequest, body: bytes) -> _Answer:
        """One POST; transport failures become LlmError, any HTTP status is returned."""
        url = request.settings.endpoint.rstrip("/") + "/chat/completions"
        proxied = self._proxied.get(url)
        if proxied is None:
            proxied = self._proxied[url] = _proxied(url)
        if self._http is None and not proxied:
            return await self._attempt_plain(request, url, body)
        return await self._attempt_aiohttp(request, url, body)

    async def _attempt_plain(self, request: CompletionRequest, url: str, body: bytes) -> _Answer:
        settings = request.settings
        timeout_s = request.timeout_s or settings.timeout_s
        tls = self._verified_context() if url.startswith("https:") else None
        try:
            async with asyncio.timeout(timeout_s):
                answer = await self._plain.post(
                    url,
                    body,
                    _headers(settings),
                    tls=tls,
                    connect_timeout_s=min(settings.connect_timeout_s, timeout_s),
                )
        except ConnectTimeout as exc:  # a TimeoutError too: the host is down
            raise _unreachable(settings, exc) from None
        except TimeoutError:
            raise _timed_out(settings, timeout_s) from None
        except Malformed:
            raise _malformed(settings) from None
        except (OSError, ValueError) as exc:
            raise _unreachable(settings, exc) from None
        return _Answer(answer.status, answer.headers.get("retry-after"), answer.content)

    async def _attempt_aiohttp(self, request: CompletionRequest, url: str, body: bytes) -> _Answer:
        """Through aiohttp: a proxy from the environment, or the session the caller lent."""
        session = await self._session()
        import aiohttp  # loaded by _session

        settings = request.settings
        timeout_s = request.timeout_s or settings.timeout_s
        # the whole answer is bounded by asyncio.timeout; aiohttp bounds only the connect
        timeout = aiohttp.ClientTimeout(sock_connect=min(settings.connect_timeout_s, timeout_s))
        try:
            async with (
                asyncio.timeout(timeout_s),
                session.post(
                    url,
                    data=body,
                    headers=_headers(settings),
                    timeout=timeout,
                    allow_redirects=False,
                    ssl=self._verified_context() if url.startswith("https:") else True,
                ) as response,
            ):
                content = await response.read()
                return _Answer(response.status, response.headers.get("Retry-After"), content)
        except aiohttp.ConnectionTimeoutError as exc:  # a TimeoutError too: the host is down
            raise _unreachable(settings, exc) from None
        except TimeoutError:
            raise _timed_out(settings, timeout_s) from None
        except aiohttp.ClientPayloadError:
            raise _malformed(settings) from None
        except (aiohttp.ClientError, ValueError, OSError) as exc:
            raise _unreachable(settings, exc) from None

    async def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            # the first call loads aiohttp (~0.1 s of CPU) on a thread: the loop keeps beating
            module = await asyncio.to_thread(importlib.import_module, "aiohttp")
            # aiohttp's trust_env looks up proxies and ~/.netrc on a thread at every call; only
            # an environment that names a proxy needs that (httpx read it once per client)
            proxied = bool(_environment_proxies())
            if self._http is None:  # another call may have made it meanwhile
                self._http = module.ClientSession(trust_env=proxied)
        return self._http

    def _verified_context(self) -> ssl.SSLContext:
        if self._verified is None:
            self._verified = _trusted_cas()
        return self._verified

    async def aclose(self) -> None:
        """Close the HTTP clients this client created."""
        await self._plain.aclose()
        if self._owned and self._http is not None:
            await self._http.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _decode(settings: ModelSettings, response: _Answer) -> Any:
    try:
        return loads_lenient(response.content)  # invalid UTF-8, lone surrogates: U+FFFD
    except orjson.JSONDecodeError:
        raise LlmError(
            LlmErrorKind.MALFORMED,
            f"model {settings.name!r} sent a malformed response (the body is not JSON); "
            "try again or choose another model",
            response.status,
        ) from None


def _trusted_cas() -> ssl.SSLContext:
    """The CA certificates https endpoints are verified against, chosen as httpx chose them:
    `SSL_CERT_FILE`, else `SSL_CERT_DIR`, else certifi's bundle."""
    import certifi  # only an https endpoint needs it

    if cafile := os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=cafile)
    if capath := os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def _headers(settings: ModelSettings) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    return headers


def _proxied(url: str) -> bool:
    """Whether the environment sends `url` through a proxy (`HTTP_PROXY`, `NO_PROXY`, …)."""
    parts = urlsplit(url)
    if parts.scheme not in _environment_proxies():
        return False
    import urllib.request

    return not urllib.request.proxy_bypass(parts.netloc)  # NO_PROXY


def _environment_proxies() -> dict[str, str]:
    """urllib's proxies from the environment. urllib.request (with http.client and email: ~6 ms
    on the first model call's path) is imported only when some variable could name one: it
    reads nothing but `<scheme>_proxy` variables, in either case."""
    if not any(name.lower().endswith("_proxy") for name in os.environ):
        return {}
    import urllib.request

    return urllib.request.getproxies_environment()


def _timed_out(settings: ModelSettings, timeout_s: float) -> LlmError:
    return LlmError(
        LlmErrorKind.TIMEOUT,
        f"model {settings.name!r} did not answer within {timeout_s:g} s "
        f"(models.{settings.name}.timeout_s); try again, or choose a faster model",
    )


def _malformed(settings: ModelSettings) -> LlmError:
    return LlmError(
        LlmErrorKind.MALFORMED,
        f"model {settings.name!r} sent a malformed response (its body could not be "
        "decoded); try again or choose another model",
    )


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
    if not _log.isEnabledFor(logging.INFO):  # CHOIR_LOG_LEVEL=warning: not even the fields
        return
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
