"""`choir.web.search` (§8.7, §18.3): Brave Search, called from inside the agent with its key.

The provider is the first entry of config.json's `search` (by name); its key is the session's
copy of the entry's secret, read at each call, so a `secret set` + `secret apply` or a `config
apply` reaches the next search. Results come back structured — title, url, snippet, age — with
the offset of the next page when the provider has more. A 429 is waited out when the provider
says when (`Retry-After`, else the first window of `X-RateLimit-Reset`) and that fits the
call's time, at most `RETRIES` times; every other failure is an error code the model can act on
(`auth_failed`, `rate_limited`, `invalid_request`, `provider_error`, `unreachable`).

The functions above `search` are pure: what to ask, how to read the answer.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from choir.core.integrations import WEB_SEARCH, SearchProvider
from choir.protocol.tooling.tools import ToolResult

if TYPE_CHECKING:  # loaded on a thread once the agent serves (`choir.agent.app`), not at start
    import aiohttp

TOOL: Final = WEB_SEARCH
SEARCH_PATH: Final = "/web/search"
RETRIES: Final = 2
"""429s waited out per call (when the provider says how long and the call has the time)."""
MAX_WAIT_S: Final = 5.0
"""Longest single wait for a 429's reset: past it the model is told to try later instead."""
MAX_OFFSET: Final = 9
"""Brave serves at most ten pages of a query (offset 0-9, in pages of `count`)."""
SNIPPET_CHARS: Final = 400
_TAG: Final = re.compile(r"<[^>]{0,200}>")


class SearchInput(BaseModel):
    """The call's arguments (already checked against the manifest's JSON schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, max_length=400)
    count: int = Field(default=10, ge=1, le=20)
    freshness: Literal["pd", "pw", "pm", "py"] | None = None
    country: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)


def query_params(call: SearchInput) -> dict[str, str]:
    """Brave's query string for `call`: its page is `offset` pages of `count` in."""
    params = {"q": call.query, "count": str(call.count), "offset": str(call.offset)}
    if call.freshness is not None:
        params["freshness"] = call.freshness
    if call.country is not None:
        params["country"] = call.country
    return params


def plain(text: Any, limit: int = SNIPPET_CHARS) -> str:
    """A snippet as plain text: Brave marks matches up (`<strong>`) and escapes entities."""
    if not isinstance(text, str):
        return ""
    flat = " ".join(html.unescape(_TAG.sub("", text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def results_of(body: Mapping[str, Any], call: SearchInput) -> ToolResult:
    """The tool's result for Brave's answer `body` to `call`."""
    web = body.get("web")
    raw = web.get("results") if isinstance(web, Mapping) else None
    results = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping) or not isinstance(item.get("url"), str):
            continue
        result = {
            "title": plain(item.get("title"), 200),
            "url": item["url"],
            "snippet": plain(item.get("description")),
        }
        if isinstance(item.get("age"), str):
            result["age"] = item["age"]
        results.append(result)
        if len(results) == call.count:
            break
    query = body.get("query")
    more = isinstance(query, Mapping) and query.get("more_results_available") is True
    data: dict[str, Any] = {"query": call.query, "offset": call.offset, "results": results}
    if more and call.offset < MAX_OFFSET:
        data["next_offset"] = call.offset + 1
    noun = "result" if len(results) == 1 else "results"
    return ToolResult.ok(f"{len(results)} {noun} for {call.query!r}", **data)


def reset_wait_s(headers: Mapping[str, str]) -> float | None:
    """How long a 429 asks to wait: `Retry-After` seconds, else the first (shortest) window's
    `X-RateLimit-Reset`; None when neither says."""
    for name in ("Retry-After", "X-RateLimit-Reset"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value.split(",")[0].strip()))
        except ValueError:
            continue
    return None


def refusal(status: int, body: bytes, provider: SearchProvider) -> ToolResult:
    """The error for an answer other than 200 or a 429 (those are handled by `search`)."""
    detail = _provider_detail(body)
    if status in (401, 403):
        return ToolResult.fail(
            "auth_failed",
            f"the search provider refused the key in secret {provider.secret!r} (HTTP {status}): "
            f"the operator sets a valid one with choirctl secret set {provider.secret}",
        )
    if 400 <= status < 500:
        return ToolResult.fail(
            "invalid_request", f"the search provider refused the query (HTTP {status}){detail}"
        )
    return ToolResult.fail(
        "provider_error",
        f"the search provider failed (HTTP {status}){detail}; try again later",
    )


def _provider_detail(body: bytes) -> str:
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    error = answer.get("error") if isinstance(answer, dict) else None
    detail = error.get("detail") if isinstance(error, dict) else None
    return f": {plain(detail, 200)}" if isinstance(detail, str) and detail else ""


async def search(
    session: aiohttp.ClientSession,
    provider: SearchProvider,
    key: str,
    call: SearchInput,
    *,
    deadline: float,
) -> ToolResult:
    """Run `call` against `provider` with API key `key`, giving up at `deadline` (monotonic)."""
    import aiohttp  # loaded: `session` is aiohttp's

    url = provider.endpoint + SEARCH_PATH
    headers = {"Accept": "application/json", "X-Subscription-Token": key}
    waits = 0
    while True:
        try:
            async with asyncio.timeout_at(_loop_time(deadline)):
                async with session.get(url, params=query_params(call), headers=headers) as reply:
                    body = await reply.read()
                    status, reply_headers = reply.status, reply.headers
        except TimeoutError:
            return ToolResult.fail(
                "timeout", "the search provider did not answer in time; try again later"
            )
        except aiohttp.ClientError as error:
            return ToolResult.fail(
                "unreachable", f"the search provider cannot be reached ({type(error).__name__})"
            )
        if status == 200:
            try:
                answer = orjson.loads(body)
            except orjson.JSONDecodeError:
                answer = None
            if not isinstance(answer, dict):
                return ToolResult.fail(
                    "provider_error", "the search provider answered something other than JSON"
                )
            return results_of(answer, call)
        if status != 429:
            return refusal(status, body, provider)
        wait = reset_wait_s(reply_headers)
        left = deadline - time.monotonic()
        if wait is None or waits == RETRIES or wait > min(MAX_WAIT_S, left - 1.0):
            later = f" in {wait:g} s" if wait is not None else " later"
            return ToolResult.fail(
                "rate_limited",
                f"the search provider is rate limiting this key: try again{later}",
                **({"retry_after_s": wait} if wait is not None else {}),
            )
        waits += 1
        await asyncio.sleep(wait)


def _loop_time(deadline: float) -> float:
    """`deadline` (time.monotonic) on the running loop's clock."""
    return asyncio.get_running_loop().time() + (deadline - time.monotonic())
