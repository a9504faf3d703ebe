"""`choir.web.browse`'s pure rules: URLs, addresses, chunks, text folding, arguments."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from choir.daemon.workers.browser.rules import (
    MAX_CHARS,
    BrowseCall,
    chunk,
    clean_text,
    private_address,
    web_url,
)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://example.org/a?b", None),
        ("HTTP://example.org", None),
        ("file:///etc/passwd", "only http(s) URLs"),
        ("javascript:alert(1)", "only http(s) URLs"),
        ("chrome://settings", "only http(s) URLs"),
        ("/relative", "not a relative URL"),
        ("http:///nohost", "names no host"),
    ],
)
def test_only_web_urls(url: str, problem: str | None) -> None:
    found = web_url(url)
    assert found is None if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    ("address", "private"),
    [
        ("93.184.216.34", False),
        ("2606:4700::1111", False),
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),  # cloud metadata
        ("100.64.0.1", True),  # carrier-grade NAT
        ("0.0.0.0", True),
        ("::1", True),
        ("fe80::1%eth0", True),
        ("fd00::1", True),
        ("::ffff:127.0.0.1", True),  # a v4-mapped loopback
        ("224.0.0.1", True),
    ],
)
def test_private_addresses(address: str, private: bool) -> None:
    assert private_address(address) is private


def test_chunks_cover_the_text_exactly_once() -> None:
    text = " ".join(f"word{n}" for n in range(5_000))
    offset, pieces = 0, []
    while True:
        part = chunk(text, offset, 1_000)
        assert len(part.text) <= 1_000
        assert part.total == len(text)
        pieces.append(part.text)
        if part.next_offset is None:
            break
        assert part.text.endswith(" ")  # cut at a word break, never mid-word
        offset = part.next_offset
    assert "".join(pieces) == text


def test_a_chunk_past_the_end_is_empty() -> None:
    part = chunk("abc", 10, 100)
    assert (part.text, part.offset, part.next_offset) == ("", 3, None)


def test_a_long_word_is_cut_where_it_must_be() -> None:
    part = chunk("x" * 300, 0, 100)
    assert (len(part.text), part.next_offset) == (100, 100)


def test_clean_text_folds_spaces_and_blank_lines() -> None:
    raw = "  Title \n\n\n\n  a   b\u00a0c \t\n \n next "
    assert clean_text(raw) == "Title\n\na b c\n\nnext"


def test_arguments_are_checked_again() -> None:
    assert BrowseCall.model_validate({"url": "https://x.org"}).action == "open"
    assert BrowseCall.model_validate({"action": "read", "max_chars": 150_000}).chars == MAX_CHARS
    with pytest.raises(ValidationError):
        BrowseCall.model_validate({"action": "download"})
    with pytest.raises(ValidationError):
        BrowseCall.model_validate({"action": "read", "offset": -1})
    with pytest.raises(ValidationError):
        BrowseCall.model_validate({"action": "read", "cookie": "x"})
