"""`choir`: the umbrella command (`choir up`, `choir down`, `choir tui`)."""

from __future__ import annotations

import sys

USAGE = """usage: choir <command>

  up     initialise $CHOIR_HOME if needed, start choird and the default agent, open the console
  down   stop agents gracefully, then choird
  tui    the full-screen operator console

Not implemented in this version yet: use `choirctl` (see `choirctl --help`).
"""


def main() -> None:
    args = sys.argv[1:]
    if not args or args[0] in {"-h", "--help"}:
        sys.stdout.write(USAGE)
        return
    if args[0] == "tui":
        from tui.app import main as tui_main  # Textual is imported for the console only

        tui_main(args[1:])
        return
    from choir.unfinished import not_yet

    if args[0] in {"up", "down", "tui"}:
        not_yet(f"choir {args[0]}", f"`choir {args[0]}`")
    sys.stderr.write(f"error: unknown command '{args[0]}' (known: up, down, tui)\n")
    sys.exit(2)
