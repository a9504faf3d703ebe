"""`choirctl choird restart`: choird restarted in place, its agents kept running — `choir
restart`'s steps (`choir.launch.restart`), so both say and do the same."""

from __future__ import annotations

import sys

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption, home_of

app = typer.Typer(
    rich_markup_mode=None,
    help="Restart choird in place; agents keep running (needs choird).",
    no_args_is_help=True,
)


@app.command("restart")
@documented("choird restart")
def restart(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.render.output import emit_json
    from choir.launch.restart import all_back
    from choir.launch.restart import restart as restart_choird
    from choir.launch.up import Steps

    summary = restart_choird(home_of(home), Steps(sys.stderr if as_json else sys.stdout))
    if as_json:
        emit_json(summary)
    if not all_back(summary):  # each agent not back has had its warning line
        raise typer.Exit(1)
