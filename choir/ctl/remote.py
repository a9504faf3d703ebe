"""choirctl's side of the operator socket: one connection to choird per command.

Commands import this module lazily; it imports the client (and with it the transport) only when
a command runs, so `choirctl --help` stays fast.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from choir.ctl.options import home_of

if TYPE_CHECKING:
    from choir.client import ChoirClient

T = TypeVar("T")


def with_choird(
    home: str | Path | None,
    work: Callable[[ChoirClient], Awaitable[T]],
    *,
    call_timeout: float | None = 30.0,
) -> T:
    """Run `work` with a client of the choird serving `home`; its result.

    UnavailableError (exit 6) when choird is not running. `call_timeout` None for verbs that
    may build an image (minutes).
    """
    from choir.client import ChoirClient

    async def session() -> T:
        async with await ChoirClient.connect(home_of(home), call_timeout=call_timeout) as client:
            return await work(client)

    return asyncio.run(session())


def confirmed(question: str, yes: bool, refusal: str) -> bool:
    """True with `--yes`; asks on a terminal; raises UsageError(`refusal`) on a pipe."""
    from choir.errors import UsageError

    if yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(refusal)
    import typer

    return typer.confirm(question, default=False)
