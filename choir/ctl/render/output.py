"""How choirctl talks back: human text on stdout, JSON for scripts, one-line errors on stderr.

Whatever it prints may hold an agent's text (a reply, a tool's output, a resume failure's
reason), so human output and errors pass through `visible` and JSON through `visible_json`:
no control character an agent wrote reaches the operator's terminal (`choir.ctl.render.visible`).
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from choir.ctl.render.visible import visible, visible_json, visible_line
from choir.errors import ChoirError, ConfigError


def json_text(data: Any, option: int = 0) -> str:
    """`data` as JSON with nothing a terminal would act on (one line unless `option` says)."""
    return visible_json(orjson.dumps(data, option=option).decode())


def wire(data: Any) -> Any:
    """An answer model as the JSON choird sent (`model_dump(mode="json")`); anything else as is."""
    dump = getattr(data, "model_dump", None)
    return dump(mode="json") if dump is not None else data


def emit_json(data: Any) -> None:
    sys.stdout.write(json_text(data, orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    sys.stdout.write("\n")


def emit(data: Any, as_json: bool, human: Callable[[], None]) -> None:
    """Print `data` (an answer model as its wire JSON) as JSON when asked, else what the human
    renderer prints, made `visible` (renderers print agents' text among their own: this is the
    one place it is escaped)."""
    if as_json:
        emit_json(wire(data))
        return
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        human()
    sys.stdout.write(visible(shown.getvalue()))


def write_visible(text: str, stream: Any = None) -> None:
    """Write `text` (which may hold an agent's words) to stdout, or `stream`, made `visible`."""
    (stream or sys.stdout).write(visible(text))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain aligned table; empty tables say so instead of printing bare headers."""
    if not rows:
        print("(none)")
        return
    cells = [[visible_line(str(c)) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def print_error(err: ChoirError) -> None:
    if isinstance(err, ConfigError) and err.problems:
        header = str(err).splitlines()[0] if str(err) != "\n".join(err.problems) else None
        if header:
            write_visible(f"error: {header}\n", sys.stderr)
        for problem in err.problems:
            write_visible(f"error: {problem}\n" if not header else f"  {problem}\n", sys.stderr)
    else:
        write_visible(f"error: {err.message}\n", sys.stderr)


def warn(message: str) -> None:
    write_visible(f"warning: {message}\n", sys.stderr)
