"""An encrypted memory's item as stored: placeholder text, one sealed value of text and data."""

from __future__ import annotations

import base64
import json
import secrets

import pytest

from choir.core.memory.sealed_items import (
    LOCKED_TEXT,
    SEALED_KEY,
    SEALED_TEXT,
    UNOPENED_TEXT,
    OpenedItem,
    SealedTooLarge,
    is_sealed,
    open_item,
    readable,
    seal_item,
)
from choir.core.memory.sealing import SealBroken

KEY = bytes(range(32))


def _sealed() -> dict[str, object]:
    _, data = seal_item(
        KEY, "ada", "personal", "likes tea", {"cups": 2}, nonce=secrets.token_bytes(12)
    )
    return data


def test_an_item_seals_to_a_placeholder_and_opens_to_its_text_and_data() -> None:
    text, data = seal_item(
        KEY, "ada", "personal", "likes tea", {"cups": 2}, nonce=secrets.token_bytes(12)
    )
    assert text == SEALED_TEXT
    assert is_sealed(data)
    assert "tea" not in json.dumps(data)
    opened = open_item(KEY, "ada", "personal", data)
    assert (opened.text, opened.data) == ("likes tea", {"cups": 2})


def test_plain_data_is_not_sealed() -> None:
    assert not is_sealed({})
    assert not is_sealed({SEALED_KEY: "x", "other": 1})
    assert not is_sealed(None)


@pytest.mark.parametrize(
    ("agent", "memory_class"), [("bob", "personal"), ("ada", "app")], ids=["agent", "class"]
)
def test_a_value_copied_into_another_memory_does_not_open(agent: str, memory_class: str) -> None:
    with pytest.raises(SealBroken, match=f"a sealed value of {agent}/{memory_class} does not"):
        open_item(KEY, agent, memory_class, _sealed())


def test_an_altered_value_is_refused_naming_the_memory() -> None:
    sealed = base64.b64decode(str(_sealed()[SEALED_KEY]))
    altered = {SEALED_KEY: base64.b64encode(sealed[:-1] + bytes([sealed[-1] ^ 1])).decode()}
    with pytest.raises(SealBroken, match="ada/personal does not open: it was altered"):
        open_item(KEY, "ada", "personal", altered)
    with pytest.raises(SealBroken, match="ada/personal is not base64"):
        open_item(KEY, "ada", "personal", {SEALED_KEY: "not base64!"})


def test_an_item_too_large_once_sealed_is_refused_naming_the_limit() -> None:
    with pytest.raises(SealedTooLarge, match=r"over the limit of 16384 \(16 KiB\) sealed; keep"):
        seal_item(KEY, "ada", "personal", "x" * 13_000, {}, nonce=secrets.token_bytes(12))
    text, _ = seal_item(KEY, "ada", "personal", "x" * 12_000, {}, nonce=secrets.token_bytes(12))
    assert text == SEALED_TEXT


def test_a_view_shows_an_item_opened_with_its_key_else_says_why_not() -> None:
    sealed = _sealed()
    assert readable(KEY, "ada", "personal", SEALED_TEXT, sealed) == OpenedItem(
        "likes tea", {"cups": 2}
    )
    assert readable(None, "ada", "personal", SEALED_TEXT, sealed) == OpenedItem(LOCKED_TEXT, sealed)
    other = bytes(32)
    assert readable(other, "ada", "personal", SEALED_TEXT, sealed).text == UNOPENED_TEXT
    assert readable(KEY, "ada", "app", SEALED_TEXT, sealed).text == UNOPENED_TEXT  # moved
    clear = readable(None, "ada", "personal", "in the clear", {"a": 1})
    assert clear == OpenedItem("in the clear", {"a": 1})
