"""`choirctl knowledge`: list, show, write and delete an agent's knowledge (tier 4, §11.6).

The operator may write any agent's knowledge (an agent only its own, §11.2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

if TYPE_CHECKING:
    from choir.protocol.operator.answers import KnowledgeView

app = typer.Typer(
    rich_markup_mode=None,
    help="Read and write agents' knowledge (needs choird).",
    no_args_is_help=True,
)

AgentArgument = Annotated[str, typer.Argument(help="Whose knowledge.", show_default=False)]
RefArgument = Annotated[
    str, typer.Argument(help="The item's id or key, as `choirctl knowledge list` shows it.")
]


@app.command("list")
@documented("knowledge list")
def list_items(
    agent_id: AgentArgument,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many.")] = 50,
    after: Annotated[
        str | None, typer.Option("--after", help="Start after this id (the previous page's last).")
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import dash, moment, one_line

    data = with_choird(
        home, lambda choird: choird.knowledge_list(agent_id, limit=limit, after=after)
    )
    rows = [
        (
            item.id,
            dash(item.key),
            "yes" if item.has_vector else "no",
            moment(item.updated_at),
            one_line(item.text, 50),
        )
        for item in data.items
    ]

    def human() -> None:
        table(("id", "key", "vector", "updated", "text"), rows)
        if data.next_after:
            print(f"(more: choirctl knowledge list {agent_id} --after {data.next_after})")

    emit(data, as_json, human)


@app.command("show")
@documented("knowledge show")
def show(
    agent_id: AgentArgument, ref: RefArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.knowledge_show(agent_id, ref))
    emit(data, as_json, lambda: fields(data))


def fields(item: KnowledgeView) -> None:
    """A knowledge item, one field a line, then its text."""
    from choir.ctl.render.humanize import compact, dash, moment

    print(f"{'item':<10}{item.id} (knowledge of {item.agent_id})")
    print(f"{'key':<10}{dash(item.key)}")
    if item.metadata:
        print(f"{'metadata':<10}{compact(item.metadata, 100)}")
    print(f"{'vector':<10}{'yes' if item.has_vector else 'no'}")
    print(f"{'created':<10}{moment(item.created_at)}")
    print(f"{'updated':<10}{moment(item.updated_at)}")
    print("text:")
    print(item.text)


@app.command("put")
@documented("knowledge put")
def put(
    agent_id: AgentArgument,
    text: Annotated[str, typer.Argument(help="What to remember.", show_default=False)],
    key: Annotated[
        str | None, typer.Option("--key", help="Dedup key: replaces the item with this key.")
    ] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tag", help="A label (repeat for more).")
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(
        home, lambda choird: choird.knowledge_put(agent_id, text, key=key, tags=tags or None)
    )
    item = data.item
    named = f"{item.id} (key {item.key})" if item.key else item.id
    how = "updated" if data.updated else "stored"
    vector = "embedded" if data.embedded else "not embedded yet: found by text until a backfill"
    emit(data, as_json, lambda: print(f"{how} {named} in {agent_id}'s knowledge; {vector}"))


@app.command("delete")
@documented("knowledge delete")
def delete(
    agent_id: AgentArgument, ref: RefArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.knowledge_delete(agent_id, ref))
    emit(data, as_json, lambda: print(f"deleted {ref} from {agent_id}'s knowledge"))
