"""`choirctl inbox`: the recovery inbox — what waits for a human after a restart (issue 19).

Not the DMs' message inbox: this lists *decisions* — held core jobs, crashed sessions with calls
of unknown outcome, pending approvals and those that timed out while choird was down, failed
agent updates — and `inbox resolve` decides one through the command that owns it.
`choirctl inbox` alone lists, like `choirctl inbox list`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption

if TYPE_CHECKING:
    from choir.protocol.operator.answers import InboxList, InboxResolved

app = typer.Typer(
    rich_markup_mode=None,
    help="What waits for a decision after a restart: the recovery inbox, not the DMs' "
    "messages (needs choird).",
    invoke_without_command=True,
)

AgentOption = Annotated[str | None, typer.Option("--agent", help="Only this agent's items.")]


@app.callback()
def inbox(
    ctx: typer.Context,
    agent_id: AgentOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """`choirctl inbox` alone lists, as `choirctl inbox list` does."""
    if ctx.invoked_subcommand is None:
        list_items(agent_id, home, as_json)


@app.command("list")
@documented("inbox list")
def list_items(
    agent_id: AgentOption = None, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.output import emit

    data = with_choird(home, lambda choird: choird.inbox_list(agent_id=agent_id))

    emit(data, as_json, lambda: _show(data))


def _show(data: InboxList) -> None:
    from choir.ctl.render.humanize import moment

    if not data.items:
        print("Nothing waits for a decision.")
        return
    for item in data.items:
        print(f"{item.item_id}  ({item.kind}, since {moment(item.since)})")
        print(f"  {item.title}")
        for line in item.context:
            print(f"    {line}")
        print(f"  decide: {item.hint}")


@app.command("resolve")
@documented("inbox resolve")
def resolve(
    item_id: Annotated[str, typer.Argument(help="An item id, as `choirctl inbox` shows it.")],
    choice: Annotated[
        str,
        typer.Argument(
            help="One of the item's choices: resume, read-only, abort, approve, "
            "reject, retry or dismiss."
        ),
    ],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from typing import cast, get_args

    from choir.ctl.remote import with_choird
    from choir.ctl.render.output import emit
    from choir.errors import UsageError
    from choir.protocol.operator.requests import InboxChoice

    wire = choice.replace("-", "_")
    if wire not in get_args(InboxChoice):
        known = ", ".join(c.replace("_", "-") for c in get_args(InboxChoice))
        raise UsageError(f"unknown choice {choice!r}: use one of {known}")
    data = with_choird(
        home, lambda choird: choird.inbox_resolve(item_id, cast("InboxChoice", wire))
    )
    emit(data, as_json, lambda: _resolved(data))


def _resolved(data: InboxResolved) -> None:
    print(f"{data.item_id}: {data.outcome}")
