"""The approval buttons' signed callback data and choird's key for it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from choir.daemon.gateway.telegram.approvals import KEY_FILE, load_key
from choir.daemon.gateway.telegram.callback_data import MAX_BYTES, Press, sign, verify

KEY = b"k" * 32
NOW = 1_800_000_000


def test_a_signed_press_verifies_in_its_chat_until_it_expires() -> None:
    data = sign(KEY, "reject", "ap-0123456789ab", 4242, NOW + 60, bot="tg")
    assert len(data.encode()) <= MAX_BYTES
    assert verify(KEY, data, 4242, NOW, bot="tg") == Press("reject", "ap-0123456789ab")
    assert verify(KEY, data, 4242, NOW + 59.9, bot="tg") is not None
    assert verify(KEY, data, 4242, NOW + 60, bot="tg") is None  # expired
    assert verify(KEY, data, 777, NOW, bot="tg") is None  # another chat
    assert verify(b"x" * 32, data, 4242, NOW, bot="tg") is None  # another choird's key
    assert verify(KEY, data, 4242, NOW, bot="tg2") is None  # the same user's chat, another bot


@pytest.mark.parametrize(
    "change",
    [
        lambda d: "a" + d[1:],  # reject turned into approve
        lambda d: d.replace("ap-0123456789ab", "ap-0123456789ac"),  # another approval
        lambda d: d.replace(".", ".1", 1),  # a later expiry
        lambda d: d[:-1] + ("A" if d[-1] != "A" else "B"),  # the tag
        lambda d: d.rsplit(".", 1)[0],  # no tag
        lambda d: "",
        lambda d: "...",
        lambda d: "r.x.y",
        lambda d: d + ".extra",
    ],
)
def test_altered_or_made_up_data_never_verifies(change: Callable[[str], str]) -> None:
    data = sign(KEY, "reject", "ap-0123456789ab", 4242, NOW + 60, bot="tg")
    assert verify(KEY, change(data), 4242, NOW, bot="tg") is None


def test_an_id_that_cannot_ride_a_button_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot ride a button"):
        sign(KEY, "approve", "ap.1", 1, NOW, bot="tg")
    with pytest.raises(ValueError, match="too long for a button"):
        sign(KEY, "approve", "ap-" + "0" * 40, 1, NOW, bot="tg")


def test_the_key_is_made_once_private_and_replaced_when_damaged(tmp_path: Path) -> None:
    key = load_key(tmp_path)
    assert len(key) == 32
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert load_key(tmp_path) == key  # a restarted choird honours its earlier buttons
    (tmp_path / KEY_FILE).write_bytes(b"short")
    fresh = load_key(tmp_path)
    assert len(fresh) == 32
    assert fresh != key
    assert load_key(tmp_path) == fresh
