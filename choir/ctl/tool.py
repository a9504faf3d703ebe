"""`choirctl tool register`: a human's implementation of an approved tool proposal (§8.10)."""

from __future__ import annotations

from typing import Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit

app = typer.Typer(
    rich_markup_mode=None,
    help="Register the implementation of an approved tool proposal (needs choird).",
    no_args_is_help=True,
)


@app.command("register")
@documented("tool register")
def register(
    agent_id: Annotated[str, typer.Argument(help="The agent whose repo holds the branch.")],
    branch: Annotated[
        str,
        typer.Argument(
            help="The proposal branch, proposal/<session>/<tool>, as approval show names it."
        ),
    ],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.sessions.approval import apply_lines

    data = with_choird(home, lambda choird: choird.tool_register(agent_id, branch))

    def show() -> None:
        print(f"{'approval':<10}{data.approval_id} ({data.status})")
        print("\n".join(apply_lines(data)))

    emit(data, as_json, show)
    if data.status != "applied":
        raise typer.Exit(1)
