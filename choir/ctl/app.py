"""choirctl: the scripted admin CLI. One module per noun (`choir.ctl.tree` wires them up).

The root help page needs none of them, nor typer: `choir.ctl.root_help` prints it.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    try:
        _main(sys.argv[1:])
    except KeyboardInterrupt:
        # Ctrl-C at any moment, also during the imports before typer (which turns one raised
        # while a command runs into exit 130 itself) could catch it: 130, no traceback
        sys.exit(130)


def _main(args: list[str]) -> None:
    if args in ([], ["-h"], ["--help"]):
        from choir.ctl import root_help

        if root_help.fits():
            # As click does: asked for, the page goes to stdout; for no arguments, a usage
            # error, to stderr with exit code 2.
            (sys.stdout if args else sys.stderr).write(root_help.page())
            sys.exit(0 if args else 2)
    from choir.ctl.tree import run

    run()


def __getattr__(name: str) -> Any:
    """`app` and `_register` still resolve here, from `choir.ctl.tree`, for the code that
    walks the typer tree (tests, docs)."""
    if name in ("app", "_register"):
        from choir.ctl import tree

        return getattr(tree, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
