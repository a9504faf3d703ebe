"""Lenient decoding of outside JSON: lone surrogates and invalid UTF-8 become U+FFFD, nothing
else changes (`choir.protocol.lenient_json`)."""

from __future__ import annotations

import orjson
import pytest

from choir.protocol.lenient_json import loads_lenient, without_lone_surrogates

R = "\ufffd"


@pytest.mark.parametrize(
    ("data", "value"),
    [
        (b'{"a": "x\\ud800y"}', {"a": f"x{R}y"}),
        (b'{"a": "\\udc00\\ud800"}', {"a": f"{R}{R}"}),  # low before high: no pair
        (b'{"a": "\\ud83d\\ude00"}', {"a": "😀"}),  # a pair is the character (orjson's path)
        (b'{"\\ud800": 1}', {R: 1}),
        (b'{"a": "caf\xe9"}', {"a": f"caf{R}"}),  # Latin-1, not UTF-8
        (b'["\xff\xfe", "\\u0000"]', [f"{R}{R}", "\x00"]),
        (
            '{"a": "x\\ud800", "n": 18446744073709551616}',
            {"a": f"x{R}", "n": 1.8446744073709552e19},
        ),
    ],
)
def test_what_orjson_refuses_for_its_text_is_read_with_replacements(
    data: bytes | str, value: object
) -> None:
    assert loads_lenient(data) == value


@pytest.mark.parametrize("data", [b"{", b'{"a": NaN}', b'{"a": "\\ud800", }', b"[" * 5000])
def test_what_is_not_json_stays_an_error(data: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        loads_lenient(data)


def test_strings_hashable_again() -> None:
    value = {"a\ud800": ["\udfff", {"k": "ok"}], "n": 1}
    clean = without_lone_surrogates(value)
    assert clean == {f"a{R}": [R, {"k": "ok"}], "n": 1}
    assert orjson.dumps(clean)
