"""How choirctl talks back: human text on stdout, JSON for scripts, one-line errors on stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from choir.errors import ChoirError, ConfigError


def emit_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())
    sys.stdout.write("\n")


def emit(data: Any, as_json: bool, human: Callable[[], None]) -> None:
    """Print `data` as JSON when asked, else run the human renderer."""
    if as_json:
        emit_json(data)
    else:
        human()


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain aligned table; empty tables say so instead of printing bare headers."""
    if not rows:
        print("(none)")
        return
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def print_error(err: ChoirError) -> None:
    if isinstance(err, ConfigError) and err.problems:
        header = str(err).splitlines()[0] if str(err) != "\n".join(err.problems) else None
        if header:
            sys.stderr.write(f"error: {header}\n")
        for problem in err.problems:
            sys.stderr.write(f"error: {problem}\n" if not header else f"  {problem}\n")
    else:
        sys.stderr.write(f"error: {err.message}\n")


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
