"""Every way a call fails ends in one `LlmError` with a one-line message and no API key."""

from __future__ import annotations

import socket
import time
from typing import Any

import orjson
import pytest

from choir.adapters.llm.client import LlmClient, LlmError, LlmErrorKind, ModelSettings
from choir.config.llm import ModelConfig
from choir.scripted import HttpErrorStep, RawStep, ReplyStep, Script, ScriptedModelServer
from tests.adapters.support import ask, llm_log_lines, settings_for

KEY = "sk-live-Zq8Xw3Pk9Lm2Nb7V"


async def fail_with(llm: LlmClient, script: Script, **settings: Any) -> LlmError:
    async with ScriptedModelServer(script) as server:
        with pytest.raises(LlmError) as caught:
            await llm.complete(ask(settings_for(server, **settings)))
    error = caught.value
    assert "\n" not in str(error)
    assert "test-model" in str(error)
    return error


@pytest.mark.parametrize(
    ("status", "kind", "hint"),
    [
        (500, LlmErrorKind.SERVER_ERROR, "try again"),
        (502, LlmErrorKind.SERVER_ERROR, "try again"),
        (503, LlmErrorKind.SERVER_ERROR, "try again"),
        (400, LlmErrorKind.HTTP_ERROR, "check models.test-model"),
        (401, LlmErrorKind.HTTP_ERROR, "API key"),
        (403, LlmErrorKind.HTTP_ERROR, "API key"),
        (404, LlmErrorKind.HTTP_ERROR, "models.test-model.model"),
        (422, LlmErrorKind.HTTP_ERROR, "check models.test-model"),
        (408, LlmErrorKind.TIMEOUT, "try again"),
    ],
)
async def test_statuses_map_to_kinds(
    llm: LlmClient, status: int, kind: LlmErrorKind, hint: str
) -> None:
    script = Script(steps=[HttpErrorStep(status=status, message="upstream said\nno")])
    error = await fail_with(llm, script)
    assert (error.kind, error.status) == (kind, status)
    assert f"HTTP {status}: upstream said no" in error.message
    assert hint in error.message


async def test_a_non_json_error_body_is_quoted_briefly(llm: LlmClient) -> None:
    script = Script(
        steps=[RawStep(status=502, body="<html>" + "x" * 500, content_type="text/html")]
    )
    error = await fail_with(llm, script)
    assert error.kind == LlmErrorKind.SERVER_ERROR
    assert "<html>" in error.message
    assert len(error.message) < 300


async def test_a_content_filter_stop_is_an_error(llm: LlmClient) -> None:
    script = Script(steps=[ReplyStep(text="", finish_reason="content_filter")])
    error = await fail_with(llm, script)
    assert error.kind == LlmErrorKind.CONTENT_FILTER
    assert "rephrase" in error.message


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"message": "upstream died", "code": 502}, LlmErrorKind.SERVER_ERROR),
        ({"message": "slow down", "code": 429}, LlmErrorKind.RATE_LIMITED),
        ({"message": "weird"}, LlmErrorKind.MALFORMED),
    ],
)
async def test_an_error_object_in_a_success_body(
    llm: LlmClient, error: dict[str, object], kind: LlmErrorKind
) -> None:
    script = Script(steps=[RawStep(body=orjson.dumps({"error": error}).decode())])
    failure = await fail_with(llm, script)
    assert failure.kind == kind
    assert str(error["message"]) in failure.message


async def test_a_slow_answer_times_out(llm: LlmClient) -> None:
    script = Script(steps=[ReplyStep(text="late", delay_ms=3_000)])
    async with ScriptedModelServer(script) as server:
        started = time.perf_counter()
        with pytest.raises(LlmError) as caught:
            await llm.complete(ask(settings_for(server), timeout_s=0.2))
    assert caught.value.kind == LlmErrorKind.TIMEOUT
    assert "0.2 s" in caught.value.message
    assert time.perf_counter() - started < 2


async def test_the_models_own_timeout_applies(llm: LlmClient) -> None:
    """`models.<name>.timeout_s`: a hung model is given up on after it, saying which setting."""
    script = Script(steps=[ReplyStep(text="late", delay_ms=3_000)])
    async with ScriptedModelServer(script) as server:
        started = time.perf_counter()
        with pytest.raises(LlmError) as caught:
            await llm.complete(ask(settings_for(server, timeout_s=0.3)))
    assert caught.value.kind == LlmErrorKind.TIMEOUT
    assert caught.value.message == (
        "model 'test-model' did not answer within 0.3 s (models.test-model.timeout_s); "
        "try again, or choose a faster model"
    )
    assert time.perf_counter() - started < 2


def test_a_model_waits_two_minutes_unless_configured() -> None:
    default = ModelSettings.from_config(
        "m", ModelConfig(provider="openai", model="x", endpoint="http://127.0.0.1:9/v1")
    )
    assert (default.timeout_s, default.connect_timeout_s) == (120.0, 10.0)
    tuned = ModelConfig.model_validate(
        {
            "provider": "openai",
            "model": "x",
            "endpoint": "http://127.0.0.1:9/v1",
            "timeout_s": 1.5,
            "connect_timeout_s": 0.5,
        }
    )
    settings = ModelSettings.from_config("m", tuned)
    assert (settings.timeout_s, settings.connect_timeout_s) == (1.5, 0.5)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("endpoint", ["closed-port", "not-a-url", "ftp://127.0.0.1/v1"])
async def test_an_unreachable_endpoint(llm: LlmClient, endpoint: str) -> None:
    # The port is picked when the test runs, not at collection: test ids must be the same in
    # every pytest-xdist worker, and a port free at collection may be taken by then.
    if endpoint == "closed-port":
        endpoint = f"http://127.0.0.1:{free_port()}/v1"
    settings = ModelSettings(name="test-model", model="m", endpoint=endpoint, api_key=KEY)
    with pytest.raises(LlmError) as caught:
        await llm.complete(ask(settings))
    assert caught.value.kind == LlmErrorKind.UNREACHABLE
    assert "models.test-model.endpoint" in caught.value.message
    assert KEY not in caught.value.message


async def test_the_key_never_appears_in_errors_logs_or_reprs(llm: LlmClient) -> None:
    script = Script(
        steps=[HttpErrorStep(status=401, message=f"invalid key {KEY} for this account")]
    )
    async with ScriptedModelServer(script) as server:
        request = ask(settings_for(server, api_key=KEY))
        with llm_log_lines() as lines, pytest.raises(LlmError) as caught:
            await llm.complete(request)
    assert server.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    error = caught.value
    assert "[REDACTED]" in error.message
    exposed = [str(error), repr(error), repr(request), repr(request.settings), str(error.args)]
    exposed += [orjson.dumps(line).decode() for line in lines]
    assert lines
    assert not [text for text in exposed if KEY in text]
