"""`tui.bridge.shown`: every answer reaches the console with its controls made `visible`, and an
answer without any is passed on as it is (one scan of its encoding, no walk)."""

from __future__ import annotations

from typing import Any

import pytest

from choir.ctl.render.visible import visible_data
from tui.bridge import shown


def nested(text: str) -> dict[str, Any]:
    """`text` as a value, in a key, and deep in lists and objects, next to numbers and nulls."""
    return {
        "rev": 7,
        "payload": {"text": text, f"k{text}": [1, None, {"deep": [text, 2.5, True]}]},
        text: "value",
    }


@pytest.mark.parametrize("code", [*range(0xA0), 0xA0, 0x2400, 0x1F600])
def test_shown_is_visible_data_for_every_control_and_its_neighbours(code: int):
    answer = nested(f"a{chr(code)}b")
    assert shown(answer) == visible_data(answer)


@pytest.mark.parametrize(
    "text",
    ["\r\n", "line\r\nnext", "\\r literal", "C:\\users\\bob", "\\u0007", "tab\tand\nnewline", ""],
)
def test_backslashes_and_line_ends_come_out_as_visible_data_makes_them(text: str):
    answer = nested(text)
    assert shown(answer) == visible_data(answer)


def test_a_clean_answer_is_passed_on_without_a_copy():
    answer = nested("Looking at the tests. ✓ tab\there\nnext line")
    assert shown(answer) is answer
    dirty = nested("\x1b]52;c;clipboard\x07")
    assert shown(dirty) is not dirty
    assert "\x1b" not in str(shown(dirty))
