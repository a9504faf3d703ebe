"""§7.7 rate limits: tell the user once, wait Retry-After (or the default), retry exactly once."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from choir.adapters.llm.client import LlmClient, LlmError, LlmErrorKind
from choir.scripted import HttpErrorStep, RateLimitStep, ReplyStep, Script, ScriptedModelServer
from tests.adapters.support import ask, llm_log_lines, settings_for


class Notices:
    """The `on_rate_limited` callback a lane passes: records every wait it was told about."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, wait_s: float) -> None:
        self.waits.append(wait_s)


async def test_retry_after_seconds_is_waited_then_retried_once(llm: LlmClient) -> None:
    script = Script(steps=[RateLimitStep(retry_after="1"), ReplyStep(text="made it")])
    notices = Notices()
    async with ScriptedModelServer(script) as server:
        started = time.perf_counter()
        with llm_log_lines() as lines:
            completion = await llm.complete(ask(settings_for(server)), on_rate_limited=notices)
        elapsed = time.perf_counter() - started
    assert notices.waits == [1.0]
    assert elapsed >= 1.0
    assert (completion.text, completion.retried) == ("made it", True)
    assert completion.latency_ms >= 1000
    assert [request.status for request in server.requests] == [429, 200]
    assert [line["message"] for line in lines] == ["llm rate limited; retrying once", "llm call"]


async def test_retry_after_as_an_http_date(llm: LlmClient) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=1), usegmt=True)
    script = Script(steps=[RateLimitStep(retry_after=when), ReplyStep(text="made it")])
    notices = Notices()
    async with ScriptedModelServer(script) as server:
        completion = await llm.complete(ask(settings_for(server)), on_rate_limited=notices)
    [wait] = notices.waits
    assert 0 <= wait <= 1
    assert completion.text == "made it"
    assert len(server.requests) == 2


async def test_without_retry_after_the_configured_default_is_waited(llm: LlmClient) -> None:
    script = Script(steps=[RateLimitStep(), ReplyStep(text="made it")])
    notices = Notices()
    async with ScriptedModelServer(script) as server:
        request = ask(settings_for(server), rate_limit_retry_ms=30)
        completion = await llm.complete(request, on_rate_limited=notices)
    assert notices.waits == [0.03]
    assert completion.retried


async def test_a_second_429_fails_after_exactly_one_retry(llm: LlmClient) -> None:
    script = Script(
        steps=[RateLimitStep(retry_after="0"), RateLimitStep(), ReplyStep(text="never")]
    )
    notices = Notices()
    async with ScriptedModelServer(script) as server:
        with pytest.raises(LlmError) as caught:
            await llm.complete(ask(settings_for(server)), on_rate_limited=notices)
    assert (caught.value.kind, caught.value.status) == (LlmErrorKind.RATE_LIMITED, 429)
    assert "after one retry" in caught.value.message
    assert notices.waits == [0.0]
    assert len(server.requests) == 2
    assert server.remaining() == 1


async def test_a_failed_retry_surfaces_its_own_error(llm: LlmClient) -> None:
    script = Script(steps=[RateLimitStep(retry_after="0"), HttpErrorStep(status=503)])
    async with ScriptedModelServer(script) as server:
        with pytest.raises(LlmError) as caught:
            await llm.complete(ask(settings_for(server)))
    assert caught.value.kind == LlmErrorKind.SERVER_ERROR
    assert len(server.requests) == 2


async def test_a_wait_longer_than_allowed_fails_at_once() -> None:
    script = Script(steps=[RateLimitStep(retry_after="3600"), ReplyStep(text="never")])
    notices = Notices()
    async with ScriptedModelServer(script) as server, LlmClient(max_retry_wait_s=60) as llm:
        with pytest.raises(LlmError) as caught:
            await llm.complete(ask(settings_for(server)), on_rate_limited=notices)
    assert caught.value.kind == LlmErrorKind.RATE_LIMITED
    assert "3600 s" in caught.value.message
    assert notices.waits == []
    assert len(server.requests) == 1


async def test_the_retry_happens_without_a_callback(llm: LlmClient) -> None:
    script = Script(steps=[RateLimitStep(retry_after="0"), ReplyStep(text="made it")])
    async with ScriptedModelServer(script) as server:
        completion = await llm.complete(ask(settings_for(server)))
    assert completion.text == "made it"
