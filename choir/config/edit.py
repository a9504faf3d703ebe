"""Add an entry to config.json without disturbing the rest of the operator's file.

Re-serialising the whole file would reflow every hand-formatted line. Instead the new member is
spliced in as text after the last member of the target object, copying the file's own
indentation. The result is re-parsed and compared with the intended data; should the splice
ever disagree, the file is re-serialised instead (correct, if less pretty).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from choir.config.scaffolding.skeleton import render

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class _Member:
    key: str
    key_start: int
    value_start: int
    value_end: int


@dataclass(frozen=True)
class _Object:
    start: int
    """Index of `{`."""
    end: int
    """Index just past `}`."""
    members: list[_Member]


def _skip(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    return match.end() if match else index


def _scan_object(text: str, start: int) -> _Object:
    """Locate the members of the JSON object whose `{` is at `start` (text is valid JSON)."""
    index = _skip(text, start + 1)
    members: list[_Member] = []
    while text[index] != "}":
        key, after_key = _DECODER.raw_decode(text, index)
        value_start = _skip(text, _skip(text, after_key) + 1)
        _, value_end = _DECODER.raw_decode(text, value_start)
        members.append(_Member(key, index, value_start, value_end))
        index = _skip(text, value_end)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return _Object(start, index + 1, members)


def _line_indent(text: str, index: int) -> str:
    line_start = text.rfind("\n", 0, index) + 1
    return _WHITESPACE.match(text, line_start).group().lstrip("\n\r")  # type: ignore[union-attr]


def _render_member(key: str, value: Any, indent: str, unit: int, pretty: bool) -> str:
    if not pretty:
        return f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}"
    body = json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)
    return f"{json.dumps(key)}: {body}"


def _append_member(text: str, obj: _Object, key: str, value: Any, unit: int) -> str:
    if not obj.members:
        outer = _line_indent(text, obj.start)
        inner = outer + " " * unit
        member = _render_member(key, value, inner, unit, pretty=True)
        return f"{text[: obj.start]}{{\n{inner}{member}\n{outer}}}{text[obj.end :]}"
    members = obj.members
    if len(members) > 1:
        separator = text[members[-2].value_end : members[-1].key_start]
    else:
        opening = text[obj.start + 1 : members[0].key_start]
        separator = "," + (opening if "\n" in opening else " ")
    pretty = "\n" in separator
    indent = separator.rsplit("\n", 1)[-1]
    member = _render_member(key, value, indent, unit, pretty)
    last = members[-1].value_end
    return f"{text[:last]}{separator}{member}{text[last:]}"


def _indent_unit(text: str, top: _Object) -> int:
    if not top.members:
        return 2
    return len(_line_indent(text, top.members[0].key_start)) or 2


def add_member(text: str, section: str, key: str, value: Any) -> str:
    """`text` with `section.key = value` added as the last member of `section`.

    `text` must be valid JSON whose top level is an object; `section` is created (last) when
    absent. The caller has checked that `key` is new.
    """
    top = _scan_object(text, _skip(text, 0))
    unit = _indent_unit(text, top)
    existing = next((m for m in reversed(top.members) if m.key == section), None)
    if existing is not None and text[existing.value_start] != "{":
        raise ValueError(f"{section} is not a JSON object")
    if existing is None:
        spliced = _append_member(text, top, section, {key: value}, unit)
    else:
        spliced = _append_member(text, _scan_object(text, existing.value_start), key, value, unit)
    expected = json.loads(text)
    expected.setdefault(section, {})[key] = value
    return spliced if _same(json.loads(spliced), expected) else render(expected)


def _same(left: Any, right: Any) -> bool:
    """Equal, with the same key order everywhere."""
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    return bool(left == right)
