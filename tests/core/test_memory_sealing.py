"""Sealing encrypted memory (`choir.core.memory.sealing`): AES-256-GCM, the key check, and
every way a key or a sealed value can be wrong."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable

import pytest

from choir.core.memory.sealing import (
    BadMemoryKey,
    SealBroken,
    WrongMemoryKey,
    key_check,
    open_sealed,
    parse_key,
    seal,
    verify_key,
)

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
CONTEXT = b"ada/personal"


def sealed(plaintext: bytes = b"the cat is Miso", key: bytes = KEY) -> bytes:
    return seal(key, plaintext, CONTEXT, nonce=os.urandom(12))


def test_a_sealed_value_opens_with_its_key_and_context_only() -> None:
    value = sealed()
    assert open_sealed(KEY, value, CONTEXT) == b"the cat is Miso"
    assert b"Miso" not in value
    assert sealed() != value  # a fresh nonce each time
    with pytest.raises(SealBroken, match="sealed for another memory or under another key"):
        open_sealed(OTHER, value, CONTEXT)
    with pytest.raises(SealBroken, match="does not open"):
        open_sealed(KEY, value, b"bob/personal")


@pytest.mark.parametrize(
    ("alter", "says"),
    [
        (lambda v: v[:-1] + bytes([v[-1] ^ 1]), "altered"),
        (lambda v: v[:20] + bytes([v[20] ^ 1]) + v[21:], "altered"),
        (lambda v: b"\x02" + v[1:], "not in a format this choir knows"),
        (lambda v: v[:20], "cut short"),
        (lambda v: b"", "not in a format"),
    ],
)
def test_a_corrupted_value_is_refused_clearly(alter: Callable[[bytes], bytes], says: str) -> None:
    with pytest.raises(SealBroken, match=says) as caught:
        open_sealed(KEY, alter(sealed()), CONTEXT)
    assert "\n" not in caught.value.message
    assert caught.value.exit_code == 2


def test_the_key_check_tells_a_wrong_key_without_holding_the_key() -> None:
    check = key_check(KEY)
    verify_key(KEY, check)
    assert KEY not in check
    assert len(check) == 32
    with pytest.raises(WrongMemoryKey, match="does not open ada's personal memory"):
        verify_key(OTHER, check, "ada's personal memory")


@pytest.mark.parametrize(
    "raw",
    [KEY, KEY.hex().encode(), KEY.hex().encode() + b"\n", base64.b64encode(KEY) + b"\n"],
)
def test_key_files_hold_raw_hex_or_base64_keys(raw: bytes) -> None:
    assert parse_key(raw) == KEY


@pytest.mark.parametrize("raw", [b"", b"short", b"z" * 64, b"a" * 31, base64.b64encode(b"x" * 16)])
def test_anything_else_is_not_a_key(raw: bytes) -> None:
    with pytest.raises(BadMemoryKey, match="head -c 32 /dev/urandom"):
        parse_key(raw)


def test_a_key_of_the_wrong_size_never_seals() -> None:
    with pytest.raises(BadMemoryKey, match="32 bytes, not 16"):
        seal(KEY[:16], b"x", CONTEXT, nonce=os.urandom(12))
    with pytest.raises(ValueError, match="nonce is 12 bytes"):
        seal(KEY, b"x", CONTEXT, nonce=b"short")
