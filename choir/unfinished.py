"""Entry points whose features have not landed yet say so plainly instead of pretending."""

from __future__ import annotations

import sys

from choir.errors import ExitCode


def not_yet(command: str, what: str) -> None:
    """Tell the operator `command` is not available in this version and exit non-zero."""
    sys.stderr.write(
        f"{command}: {what} is not implemented in this version of choir yet "
        "(see README, 'Status'). Available now: choirctl init, config check, secret, "
        "agent init, schema.\n"
    )
    sys.exit(int(ExitCode.ERROR))
