"""An OpenAI-compatible embeddings endpoint (OpenRouter, OpenAI, any local server) (§11.9).

    async with OpenAIEmbeddings(EmbeddingSettings.from_config(config.embedding, api_key=key)) as p:
        vectors = await p.embed(texts)

One POST to `{endpoint}/embeddings` per batch of up to 32 texts. 429, 5xx, timeouts and network
failures are tried again on `Backoff`'s schedule (1/2/4 s with jitter); a rejected request or an
unusable answer (malformed, wrong dimensions) fails at once: it would fail the same way again.
The API key lives in `EmbeddingSettings` and the `Authorization` header only; errors are scrubbed
of it and the client logs no request.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

import httpx
import orjson

from choir.adapters.llm.status import provider_detail, retry_after_seconds
from choir.config.resources import EmbeddingConfig
from choir.daemon.memory.embedding.backoff import Backoff
from choir.daemon.memory.embedding.errors import EmbeddingError, EmbeddingErrorKind
from choir.daemon.memory.embedding.openai_response import (
    parse_embeddings,
    reported_tokens,
    request_body,
)
from choir.daemon.memory.embedding.provider import Vector
from choir.errors import ConfigError
from choir.logs import get_logger

BATCH_SIZE = 32
"""§11.9: up to 32 chunks per API call."""

DEFAULT_BACKOFF = Backoff()
"""§11.9's schedule: 1, 2, 4 s with jitter, three retries."""

_log = get_logger("choir.memory.embeddings")


@dataclass(frozen=True, slots=True)
class EmbeddingSettings:
    """How to reach the embedding model; a snapshot taken from config when the provider is made."""

    model: str
    """The provider's model id, sent as `model` (e.g. `text-embedding-3-small`)."""
    endpoint: str
    """Base URL of the API, e.g. `https://openrouter.ai/api/v1`; `/embeddings` is appended."""
    dimensions: int
    """The size every answered vector must have (`embedding.dimensions`)."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as `Authorization: Bearer <key>` when set; never logged, repr'd or put in an error."""
    timeout_s: float = 30.0
    """Deadline of one attempt, from sending the request to the last byte of the answer."""
    connect_timeout_s: float = 10.0
    """Deadline of opening the connection."""

    @classmethod
    def from_config(cls, config: EmbeddingConfig, *, api_key: str | None) -> EmbeddingSettings:
        """Settings of config.json's `embedding` section; its `secret`'s value is `api_key`."""
        if config.base_url is None:
            raise ConfigError(
                ["embedding.endpoint: required for an OpenAI-compatible embedding model"],
                header="cannot embed",
            )
        return cls(
            config.model_name,
            config.base_url,
            config.vector_dimensions,
            api_key=api_key,
            timeout_s=config.timeout_s,
            connect_timeout_s=min(10.0, config.timeout_s),
        )


class OpenAIEmbeddings:
    """An `EmbeddingProvider` over HTTP; `http` is borrowed when given, else owned and closed."""

    def __init__(
        self,
        settings: EmbeddingSettings,
        *,
        http: httpx.AsyncClient | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.backoff = backoff
        self._rng = rng or random.Random()
        self._owned = http is None
        self._http = http if http is not None else httpx.AsyncClient()
        self._url = settings.endpoint.rstrip("/") + "/embeddings"

    @property
    def name(self) -> str:
        return self.settings.model

    @property
    def dimensions(self) -> int:
        return self.settings.dimensions

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in batches of 32; the first batch that fails for good raises."""
        return (await self.embed_counted(texts))[0]

    async def embed_counted(self, texts: Sequence[str]) -> tuple[list[Vector], int | None]:
        """`embed`, and the input tokens the provider billed (None when an answer said not)."""
        vectors: list[Vector] = []
        tokens: int | None = 0
        for start in range(0, len(texts), BATCH_SIZE):
            batch, counted = await self._batch(list(texts[start : start + BATCH_SIZE]))
            vectors.extend(batch)
            tokens = None if tokens is None or counted is None else tokens + counted
        return vectors, tokens

    async def _batch(self, texts: list[str]) -> tuple[list[Vector], int | None]:
        body = orjson.dumps(request_body(self.settings.model, texts))
        retry = 0
        while True:
            try:
                return await self._attempt(body, len(texts))
            except EmbeddingError as error:
                if not error.retryable:
                    raise
                retry += 1
                wait = self.backoff.wait_s(retry, self._rng.random(), error.retry_after_s)
                if wait is None:
                    raise
                _log.info(
                    "embedding call failed; retrying",
                    fields={
                        "model": self.name,
                        "kind": error.kind.value,
                        "retry": retry,
                        "wait_s": round(wait, 3),
                    },
                )
                await asyncio.sleep(wait)

    async def _attempt(self, body: bytes, count: int) -> tuple[list[Vector], int | None]:
        response = await self._post(body)
        if not response.is_success:
            raise self._status_failure(response)
        try:
            data = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise EmbeddingError(
                EmbeddingErrorKind.MALFORMED,
                f"embedding model {self.name!r} sent an unusable answer (the body is not JSON); "
                "nothing was stored — check embedding.endpoint",
                status=response.status_code,
            ) from None
        vectors = parse_embeddings(data, count, self.dimensions, self.name)
        return vectors, reported_tokens(data)

    async def _post(self, body: bytes) -> httpx.Response:
        """One POST; transport failures become EmbeddingError, any status is returned."""
        s = self.settings
        timeout = httpx.Timeout(s.timeout_s, connect=min(s.connect_timeout_s, s.timeout_s))
        try:
            async with asyncio.timeout(s.timeout_s):  # httpx's read timeout is per chunk
                return await self._http.post(
                    self._url, content=body, headers=self._headers(), timeout=timeout
                )
        except (TimeoutError, httpx.TimeoutException):
            kind, why = EmbeddingErrorKind.TIMEOUT, f"no answer within {s.timeout_s:g} s"
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            kind, why = EmbeddingErrorKind.UNREACHABLE, str(exc) or type(exc).__name__
        host = urlsplit(s.endpoint).netloc or s.endpoint
        message = f"embedding model {self.name!r}: cannot reach {host} ({why}); check "
        raise EmbeddingError(kind, message + "embedding.endpoint", secret=s.api_key) from None

    def _status_failure(self, response: httpx.Response) -> EmbeddingError:
        status = response.status_code
        said = provider_detail(response.content, self.settings.api_key) or f"HTTP {status}"
        if status == 429 or status >= 500:
            kind = (
                EmbeddingErrorKind.RATE_LIMITED
                if status == 429
                else EmbeddingErrorKind.SERVER_ERROR
            )
            asked_s = retry_after_seconds(response.headers.get("Retry-After"))
            return self._error(kind, status, f"failed ({said}); try again later", asked_s)
        fix = (
            "check the secret named by embedding.secret"
            if status in (401, 403)
            else "check embedding.model and embedding.endpoint"
        )
        return self._error(EmbeddingErrorKind.HTTP_ERROR, status, f"refused ({said}); {fix}")

    def _error(
        self, kind: EmbeddingErrorKind, status: int, what: str, asked_s: float | None = None
    ) -> EmbeddingError:
        message = f"embedding model {self.name!r} {what}"
        return EmbeddingError(
            kind, message, status=status, retry_after_s=asked_s, secret=self.settings.api_key
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        return headers

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
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
