"""Pure pieces of the client: Retry-After parsing, provider error details, the request body."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from choir.adapters.llm.client import CompletionRequest, LlmError, LlmErrorKind, ModelSettings
from choir.adapters.llm.response import request_body
from choir.adapters.llm.status import provider_detail, retry_after_seconds

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("", None),
        ("3", 3.0),
        (" 2 ", 2.0),
        ("0.5", 0.5),
        ("0", 0.0),
        ("-1", None),
        ("nan", None),
        ("soon", None),
        ("Sat, 01 Mar 2025 12:00:07 GMT", 7.0),
        ("Sat, 01 Mar 2025 11:00:00 GMT", 0.0),
        ("Sat, 01 Mar 2025 12:00:07", 7.0),
    ],
)
def test_retry_after(header: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(header, NOW) == seconds


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (
            b'{"error": {"message": "No endpoints found for x", "code": 404}}',
            "No endpoints found for x",
        ),
        (b'{"error": "quota exceeded"}', "quota exceeded"),
        (b'{"message": "bad gateway"}', "bad gateway"),
        (b'{"error": {"code": 500}}', ""),
        (b"[]", ""),
        (b"upstream\n  timed   out", "upstream timed out"),
        (b"key sk-abcdef leaked", "key [REDACTED] leaked"),
    ],
)
def test_provider_detail(body: bytes, detail: str) -> None:
    assert provider_detail(body, "sk-abcdef") == detail


def test_request_body_sends_only_what_is_set() -> None:
    settings = ModelSettings(name="n", model="m", endpoint="http://x", temperature=0.0)
    tools = [{"type": "function", "function": {"name": "choir__fs__read", "parameters": {}}}]
    request = CompletionRequest(
        settings, [{"role": "user", "content": "hi"}], lane="edge", tools=tools
    )
    assert request_body(request) == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": tools,
        "temperature": 0.0,
    }


def test_errors_are_one_line_with_a_readable_repr() -> None:
    error = LlmError(LlmErrorKind.TIMEOUT, "model 'm' did not\nanswer", None)
    assert str(error) == "model 'm' did not answer"
    assert (
        repr(error) == "LlmError(kind='timeout', status=None, message=\"model 'm' did not answer\")"
    )
