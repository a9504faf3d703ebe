"""`choirctl memory about|forget`: what an agent learnt from a user, and forgetting an item.

Editing an item is `choirctl knowledge write` (recorded as the operator's). `forget` asks for
confirmation on a terminal and refuses without `--yes` elsewhere: it removes the item, its
versions and its vector from every memory store and index, and choird records who forgot it and
when (the session event log keeps its own record).
"""

from __future__ import annotations

from typing import Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

AgentArgument = Annotated[str, typer.Argument(help="Whose memory.", show_default=False)]


@documented("memory about")
def about(
    agent_id: AgentArgument,
    user: Annotated[
        str,
        typer.Argument(
            help="The user: a DM's name or its user id on its gateway.", show_default=False
        ),
    ],
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many.")] = 100,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import moment, one_line

    data = with_choird(home, lambda choird: choird.memory_about(agent_id, user, limit=limit))
    rows = [
        (item.name, str(item.version), moment(item.updated_at), one_line(item.text, 50))
        for item in data.items
    ]

    def human() -> None:
        print(f"{agent_id} learnt {len(rows)} item(s) from {data.user}")
        if rows:
            table(("name", "version", "updated", "text"), rows)

    emit(data, as_json, human)


@documented("memory forget")
def forget(
    agent_id: AgentArgument,
    ref: Annotated[
        str, typer.Argument(help="The item's name, an alias or its id.", show_default=False)
    ],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask; required when not on a terminal.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import confirmed, with_choird

    question = f"forget {ref} from {agent_id}'s memory, with its versions and vector?"
    refusal = f"memory forget removes {ref} and its versions for good: pass --yes to confirm"
    if not confirmed(question, yes, refusal):
        print("nothing forgotten")
        raise typer.Exit(1)
    data = with_choird(home, lambda choird: choird.memory_forget(agent_id, ref))
    emit(
        data,
        as_json,
        lambda: print(
            f"forgot {ref} ({data.id}) from {agent_id}'s memory: {data.versions} version(s) "
            f"removed; recorded as forgotten by {data.by}"
        ),
    )
