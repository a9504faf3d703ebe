"""Pure text rules shared by the file tools: what counts as binary, and what a line is.

A line ends at `\\n` (a `\\r\\n` file keeps its `\\r`); a final line without `\\n` still counts.
`choir.fs.read` numbers lines and `choir.fs.write` edits them by exactly this rule.
"""

from __future__ import annotations

import codecs


def is_binary(sample: bytes) -> bool:
    """True when the start of a file holds NUL bytes or is not UTF-8 (a cut last char is fine)."""
    if b"\0" in sample:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
    except UnicodeDecodeError:
        return True
    return False


def count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def split_lines(text: str) -> list[str]:
    """`text` as lines that keep their `\\n`; `""` has no lines."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def splice(lines: list[str], start: int, stop: int, content: str) -> list[str]:
    """`lines[start:stop]` (0-based) replaced by the lines of `content`.

    Line boundaries survive: inserted text never merges into the line after it, and a last line
    without `\\n` gets one when text is inserted after it.
    """
    before, new, after = lines[:start], split_lines(content), lines[stop:]
    if new and before and not before[-1].endswith("\n"):
        before[-1] += "\n"
    if new and after and not new[-1].endswith("\n"):
        new[-1] += "\n"
    return before + new + after
