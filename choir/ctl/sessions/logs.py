"""`choirctl logs <agent-id|choird>`: the current log, then new lines as written (§22.2).

Lines are printed as logged (JSON lines; filter with grep or jq), any control character in them
shown rather than sent to the terminal (`choir.ctl.render.visible`). Ctrl-C stops.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption

if TYPE_CHECKING:
    from choir.client import ChoirClient
    from choir.protocol.operator.items import LogItem

SourceArgument = Annotated[str, typer.Argument(help="`choird` or an agent id.", show_default=False)]
NoFollowOption = Annotated[
    bool, typer.Option("--no-follow", help="Print the current log and exit (no tail -f).")
]


@documented("logs")
def logs(
    source: SourceArgument,
    no_follow: NoFollowOption = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    async def follow(choird: ChoirClient) -> None:
        async for item in choird.logs(source, follow=not no_follow):
            show(item, as_json)

    with_choird(home, follow)


def show(item: LogItem, as_json: bool) -> None:
    from choir.ctl.render.output import json_text, write_visible

    if as_json:
        sys.stdout.write(json_text(item.model_dump(mode="json")) + "\n")
    elif item.kind == "lines":  # an agent writes its own log: nothing in it drives the terminal
        write_visible("".join(f"{line}\n" for line in item.lines))
    elif item.kind == "rotated":
        sys.stderr.write("-- the log was archived; following the new file --\n")
    sys.stdout.flush()
