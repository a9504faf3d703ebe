"""`choirctl workspace`: workspaces, their paths and lease holders; reset one (§15.4)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

if TYPE_CHECKING:
    from choir.client import ChoirClient
    from choir.protocol.operator.answers import WorkspaceReset

app = typer.Typer(
    rich_markup_mode=None, help="List and reset workspaces (needs choird).", no_args_is_help=True
)


@app.command("list")
@documented("workspace list")
def list_workspaces(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import dash

    data = with_choird(home, lambda choird: choird.workspace_list())
    rows = [
        (
            w.name,
            w.path + ("" if w.exists else " (missing)"),
            dash(w.leased_to),
            dash(w.session_id),
        )
        for w in data.workspaces
    ]
    emit(data, as_json, lambda: table(("name", "path", "leased to", "session"), rows))


@app.command("reset")
@documented("workspace reset")
def reset(
    name: Annotated[str, typer.Argument(help="Workspace name from config.json.")],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask; required when not on a terminal.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import confirmed, with_choird

    async def work(choird: ChoirClient) -> WorkspaceReset | None:
        listed = {w.name: w for w in (await choird.workspace_list()).workspaces}
        if name not in listed:
            return await choird.workspace_reset(name)  # refused: names the known workspaces
        path, holder = listed[name].path, listed[name].leased_to
        stopping = f"stop {holder} and " if holder else ""
        question = f"{stopping}delete everything inside workspace {name} ({path})?"
        refusal = f"workspace reset deletes every file in {path}: pass --yes to confirm"
        if not confirmed(question, yes, refusal):
            return None
        return await choird.workspace_reset(name)

    data = with_choird(home, work, call_timeout=None)  # stopping the agent may take a while
    if data is None:
        print("nothing deleted")
        raise typer.Exit(1)

    def show() -> None:
        stopped = data.stopped
        if stopped:
            print(f"{stopped.agent_id} stopped first: session {stopped.session_id}")
        print(f"workspace {name} reset: {data.removed} entries removed from {data.path}")

    emit(data, as_json, show)
