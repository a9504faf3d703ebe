"""Replies cut into Telegram messages: within 4,096 UTF-16 units, on line or word boundaries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from choir.daemon.gateway.telegram.chunks import LIMIT, chunks, units


def test_a_short_reply_is_one_message() -> None:
    assert chunks("hello *world") == ["hello *world"]


def test_blank_text_is_no_message() -> None:
    assert chunks(" \n\t ") == []


def test_lines_are_kept_whole() -> None:
    text = "\n".join(f"line {n} of the answer" for n in range(400))
    cut = chunks(text, 1000)
    assert all(units(c) <= 1000 for c in cut)
    assert "\n".join(cut) == text
    assert all(c.startswith("line ") and c.endswith("of the answer") for c in cut)


def test_words_are_kept_whole_without_line_breaks() -> None:
    text = " ".join(f"word{n}" for n in range(3000))
    cut = chunks(text)
    assert [units(c) <= LIMIT for c in cut] == [True] * len(cut)
    assert " ".join(cut) == text


def test_a_word_longer_than_a_message_is_cut_at_the_limit() -> None:
    assert [len(c) for c in chunks("x" * 5000)] == [4096, 904]


def test_emoji_count_two_units_and_are_never_split() -> None:
    text = "😀" * 3000
    cut = chunks(text)
    assert [units(c) for c in cut] == [4096, 1904]
    assert "".join(cut) == text


@pytest.mark.parametrize("limit", [5, 64, LIMIT])
@given(text=st.text(alphabet=st.sampled_from("ab c\n😀*_"), max_size=600))
def test_nothing_but_break_whitespace_is_lost(limit: int, text: str) -> None:
    cut = chunks(text, limit)
    assert all(0 < units(c) <= limit for c in cut)
    assert "".join(cut).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace(
        "\n", ""
    )
