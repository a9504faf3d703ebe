"""`choirctl knowledge`: an agent's named, versioned knowledge (tier 4, §11.6; seed design 002).

list, show; the closed set of writes: add, write, rename, alias, delete (remove), and put (write
or add: the spec's update-by-key); history and restore of versions. Items are addressed by name,
alias or id. The operator may write any agent's knowledge (an agent only its own, §11.2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

if TYPE_CHECKING:
    from choir.protocol.operator.answers import KnowledgeStored, KnowledgeView

app = typer.Typer(
    rich_markup_mode=None,
    help="Read and write agents' knowledge (needs choird).",
    no_args_is_help=True,
)

AgentArgument = Annotated[str, typer.Argument(help="Whose knowledge.", show_default=False)]
RefArgument = Annotated[
    str,
    typer.Argument(help="The item's name, an alias or its id (`choirctl knowledge list`)."),
]
TextArgument = Annotated[str, typer.Argument(help="What to remember.", show_default=False)]
TagsOption = Annotated[list[str] | None, typer.Option("--tag", help="A label (repeat for more).")]


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
    from choir.ctl.render.humanize import moment, one_line

    data = with_choird(
        home, lambda choird: choird.knowledge_list(agent_id, limit=limit, after=after)
    )
    rows = [
        (
            item.name,
            str(item.version),
            "yes" if item.has_vector else "no",
            moment(item.updated_at),
            one_line(item.text, 50),
        )
        for item in data.items
    ]

    def human() -> None:
        table(("name", "version", "vector", "updated", "text"), rows)
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

    print(f"{'name':<10}{item.name} (knowledge of {item.agent_id})")
    print(f"{'aliases':<10}{dash(', '.join(item.aliases))}")
    print(f"{'id':<10}{item.id}")
    print(f"{'version':<10}{item.version}")
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
    text: TextArgument,
    name: Annotated[
        str | None,
        typer.Option("--name", "--key", help="The item's name: writes the item so named."),
    ] = None,
    tags: TagsOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(
        home, lambda choird: choird.knowledge_put(agent_id, text, name=name, tags=tags or None)
    )
    emit(data, as_json, lambda: _stored(agent_id, data))


@app.command("add")
@documented("knowledge add")
def add(
    agent_id: AgentArgument,
    text: TextArgument,
    name: Annotated[
        str | None, typer.Option("--name", help="Its name (default: derived from the text).")
    ] = None,
    tags: TagsOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(
        home, lambda choird: choird.knowledge_add(agent_id, text, name=name, tags=tags or None)
    )
    emit(data, as_json, lambda: _stored(agent_id, data))


@app.command("write")
@documented("knowledge write")
def write(
    agent_id: AgentArgument,
    ref: RefArgument,
    text: Annotated[str, typer.Argument(help="Its new text.", show_default=False)],
    tags: TagsOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(
        home, lambda choird: choird.knowledge_write(agent_id, ref, text, tags=tags or None)
    )
    emit(data, as_json, lambda: _stored(agent_id, data))


def _stored(agent_id: str, data: KnowledgeStored) -> None:
    item = data.item
    how = f"wrote version {item.version} of" if data.updated else "stored"
    vector = "embedded" if data.embedded else "not embedded yet: found by text until a backfill"
    print(f"{how} {item.name} in {agent_id}'s knowledge; {vector}")


@app.command("rename")
@documented("knowledge rename")
def rename(
    agent_id: AgentArgument,
    ref: RefArgument,
    name: Annotated[str, typer.Argument(help="Its new name.", show_default=False)],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.knowledge_rename(agent_id, ref, name))
    emit(data, as_json, lambda: print(f"renamed {ref} to {data.name} in {agent_id}'s knowledge"))


@app.command("alias")
@documented("knowledge alias")
def alias(
    agent_id: AgentArgument,
    ref: RefArgument,
    alias: Annotated[str, typer.Argument(help="Another name for it.", show_default=False)],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.knowledge_alias(agent_id, ref, alias))
    emit(data, as_json, lambda: print(f"{data.name} now answers to {', '.join(data.aliases)}"))


@app.command("history")
@documented("knowledge history")
def history(
    agent_id: AgentArgument,
    ref: RefArgument,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many.")] = 50,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import moment, one_line

    data = with_choird(home, lambda choird: choird.knowledge_history(agent_id, ref, limit=limit))
    rows = [
        (
            str(v.version),
            moment(v.written_at),
            f"restored {v.restored_from}" if v.restored_from else "",
            v.name,
            one_line(v.text, 50),
        )
        for v in data.versions
    ]
    emit(data, as_json, lambda: table(("version", "written", "", "name", "text"), rows))


@app.command("restore")
@documented("knowledge restore")
def restore(
    agent_id: AgentArgument,
    ref: RefArgument,
    version: Annotated[
        int, typer.Argument(help="The version to restore (`knowledge history`).", min=1)
    ],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.knowledge_restore(agent_id, ref, version))
    item = data.item
    emit(
        data,
        as_json,
        lambda: print(f"restored {item.name} to version {version}: now version {item.version}"),
    )


@app.command("delete")
@documented("knowledge delete")
def delete(
    agent_id: AgentArgument, ref: RefArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.knowledge_delete(agent_id, ref))
    emit(data, as_json, lambda: print(f"deleted {ref} from {agent_id}'s knowledge"))
