"""Text a model or a tool wrote, made safe to show on the operator's terminal. Pure.

What an agent says is chosen by whoever steers its model — a prompt injection included. Printed
raw, its control characters drive the operator's terminal: `ESC [2J` clears the screen, `ESC ]52`
writes the clipboard, `ESC ]0` retitles the window, `\\r` overwrites what a line seemed to say,
and a terminal that takes 8-bit controls does the same with the C1 bytes (`\\x9b` is a CSI). So
every human rendering of such text goes through `visible`: C0 controls (but newline and tab)
become their Unicode control pictures (`␛`, `␇`, `␍`), DEL becomes `␡` and C1 controls are
spelt `\\x9b`. A CRLF line end is kept as a newline.

JSON output stays exact: orjson escapes C0 controls itself, and `visible_json` writes DEL and
the C1 range as `\\u00XX` escapes too — the same document to any JSON reader, inert on a terminal.
"""

from __future__ import annotations

import re
from typing import Any, Final

_C0_PICTURES: Final = {code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in "\n\t"}
_TABLE: Final[dict[int, str]] = {
    **_C0_PICTURES,
    0x7F: "\u2421",
    **{code: f"\\x{code:02x}" for code in range(0x80, 0xA0)},
}
_UNSAFE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_UNSAFE_IN_JSON: Final = re.compile("[\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with every control character but newline and tab shown, never acted on."""
    if _UNSAFE.search(text) is None:
        return text  # the common case: one scan, no copy
    return text.replace("\r\n", "\n").translate(_TABLE)


def visible_line(text: str) -> str:
    """`visible(text)` on one line: newlines shown as `␊` (a table cell, a log field)."""
    return visible(text).replace("\n", "\u240a")


def visible_json(encoded: str) -> str:
    """An encoded JSON document with DEL and C1 controls written as `\\u00XX` escapes.

    Those characters can only occur inside strings of the document (JSON's own syntax is
    ASCII), where the escape means the same character."""
    return _UNSAFE_IN_JSON.sub(lambda found: f"\\u{ord(found.group()):04x}", encoded)


def visible_data(value: Any) -> Any:
    """A copy of JSON-shaped `value` whose strings (keys included) are `visible`; for a view
    that shows whatever it is given (the console)."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {
            visible(key) if isinstance(key, str) else key: visible_data(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [visible_data(item) for item in value]
    return value
