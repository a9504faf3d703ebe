"""`choirctl knowledge`: an agent's named, versioned knowledge (tier 4, §11.6; seed design 002).

list, show (with where its content came from; `source` opens the session events it came
from; `expand` goes one step down the summary tree); the closed set of writes: add, write,
rename, alias, delete (remove), and put (write or add: the spec's update-by-key); history and
restore of versions; link and unlink (typed edges,
seed design 003). Items are addressed by name, alias or id, and carry a loc, a type, tags,
data and a kind (`--loc`, `--type`, `--tag`, `--data`, `--kind` on writes; the first three
filter `list`). The operator may write any agent's knowledge (an agent only its own, §11.2).
A text given as `-` is read from standard input (`… put agent-1 - --name notes < notes.md`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table
from choir.errors import UsageError

if TYPE_CHECKING:
    from choir.client import KnowledgeFields, KnowledgeFilter
    from choir.protocol.operator.answers import KnowledgeStored, KnowledgeView, ProvenanceView

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
TextArgument = Annotated[
    str,
    typer.Argument(help="What to remember (- reads it from standard input).", show_default=False),
]
TagsOption = Annotated[list[str] | None, typer.Option("--tag", help="A label (repeat for more).")]
LocOption = Annotated[
    str | None,
    typer.Option("--loc", help="Its place, segments joined by ':' (projects:choir:design)."),
]
TypeOption = Annotated[
    str | None, typer.Option("--type", help="system, record, info or abstract (new items: info).")
]
KindOption = Annotated[
    str | None,
    typer.Option(
        "--kind", help="correction, preference, fact or task: its importance (new items: fact)."
    ),
]
DataOption = Annotated[
    str | None,
    typer.Option("--data", help='Structured data, a JSON object (\'{"host": "castor"}\').'),
]
FilterLocOption = Annotated[
    str | None, typer.Option("--loc", help="Only items at this loc or below it.")
]
FilterTypeOption = Annotated[str | None, typer.Option("--type", help="Only items of this type.")]
FilterTagsOption = Annotated[
    list[str] | None, typer.Option("--tag", help="Only items with this tag (repeat: all of them).")
]


FilterMemoryOption = Annotated[
    str | None,
    typer.Option("--memory", help="Only items of this memory: system, knowledge, app or personal."),
]
FilterUserOption = Annotated[
    str | None,
    typer.Option("--user", help="Only this user's personal items (a DM name)."),
]


def graph_filter(
    loc: str | None,
    kind: str | None,
    tags: list[str] | None,
    memory: str | None = None,
    user: str | None = None,
) -> KnowledgeFilter:
    """The `--loc`, `--type`, `--tag`, `--memory` and `--user` filters as the client sends
    them."""
    given: dict[str, Any] = {
        "loc": loc, "type": kind, "tags": tags or None, "memory": memory, "user": user
    }  # fmt: skip
    return {key: value for key, value in given.items() if value is not None}  # type: ignore[return-value]


MemoryOption = Annotated[
    str | None,
    typer.Option(
        "--memory",
        help="A new item's memory: system (the agent's definition, read-only to it), "
        "knowledge (default), app or personal.",
    ),
]
UserOption = Annotated[
    str | None,
    typer.Option("--user", help="A personal item's user: the DM whose sessions see it."),
]


def given_text(text: str, command: str) -> str:
    """`text`, or what standard input holds when it is `-` (a file piped in)."""
    if text != "-":
        return text
    if sys.stdin.isatty():
        raise UsageError(
            "text - is read from standard input, which is a terminal: pipe the text in "
            f"(choirctl knowledge {command} <agent> … - < notes.md) or give it as an argument"
        )
    raw = sys.stdin.buffer.read()
    try:
        return raw.decode()
    except UnicodeDecodeError as error:
        raise UsageError(
            f"standard input is not UTF-8 text (a bad byte at offset {error.start}): "
            "knowledge holds text; convert it first (iconv -t UTF-8)"
        ) from None


def placed_fields(
    loc: str | None,
    kind: str | None,
    data: str | None,
    importance: str | None,
    memory: str | None,
    user: str | None,
) -> KnowledgeFields:
    """`graph_fields`, and the memory a new item goes to."""
    fields = graph_fields(loc, kind, data, importance)
    if memory is not None:
        fields["memory"] = memory
    if user is not None:
        fields["user"] = user
    return fields


def graph_fields(
    loc: str | None, kind: str | None, data: str | None, importance: str | None = None
) -> KnowledgeFields:
    """`--loc`, `--type`, `--data` (parsed) and `--kind`; choird checks them all."""
    given: dict[str, Any] = {"loc": loc, "type": kind, "kind": importance}
    if data is not None:
        import json

        from choir.errors import UsageError

        try:
            given["data"] = json.loads(data)
        except ValueError as exc:
            raise UsageError(
                f"--data is not JSON ({exc}); give an object like '{{\"a\": 1}}'"
            ) from None
        if not isinstance(given["data"], dict):
            raise UsageError("--data must be a JSON object like '{\"a\": 1}'")
    return {key: value for key, value in given.items() if value is not None}  # type: ignore[return-value]


@app.command("list")
@documented("knowledge list")
def list_items(
    agent_id: AgentArgument,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many.")] = 50,
    after: Annotated[
        str | None, typer.Option("--after", help="Start after this id (the previous page's last).")
    ] = None,
    loc: FilterLocOption = None,
    kind: FilterTypeOption = None,
    tags: FilterTagsOption = None,
    memory: FilterMemoryOption = None,
    user: FilterUserOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import dash, moment, one_line

    graph = graph_filter(loc, kind, tags, memory, user)
    data = with_choird(
        home,
        lambda choird: choird.knowledge_list(agent_id, limit=limit, after=after, graph=graph),
    )
    rows = [
        (
            item.name,
            dash(item.loc or ""),
            item.type,
            item.memory + (f" ({item.user})" if item.user else ""),
            str(item.version),
            "yes" if item.has_vector else "no",
            moment(item.updated_at),
            one_line(item.text, 40),
        )
        for item in data.items
    ]

    def human() -> None:
        table(("name", "loc", "type", "memory", "version", "vector", "updated", "text"), rows)
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
    print(f"{'loc':<10}{dash(item.loc or '')}")
    print(f"{'type':<10}{item.type}")
    print(f"{'memory':<10}{item.memory}" + (f" (user {item.user})" if item.user else ""))
    print(f"{'tags':<10}{dash(', '.join(item.tags))}")
    if item.data:
        print(f"{'data':<10}{compact(item.data, 100)}")
    if item.metadata:
        print(f"{'metadata':<10}{compact(item.metadata, 100)}")
    for edge in item.edges or ():
        arrow = (
            f"{edge.edge} {edge.name}"
            if edge.direction == "out"
            else f"{edge.name} {edge.edge} this"
        )
        print(f"{'edge':<10}{arrow}")
    sources = _source_events(item)
    if sources:
        print(f"{'sources':<10}{sources}")
    print(f"{'vector':<10}{'yes' if item.has_vector else 'no'}")
    print(f"{'created':<10}{moment(item.created_at)}")
    print(f"{'updated':<10}{moment(item.updated_at)}")
    print(f"{'source':<10}{source_line(item.provenance)}")
    print("text:")
    print(item.text)


def _source_events(item: KnowledgeView) -> str | None:
    """For a compaction archive (a leaf of the summary tree): the command that reads the
    messages it summarizes; None for any other item (a summary's sources are its edges)."""
    leaf = item.metadata.get("compaction_archive")
    if not isinstance(leaf, dict):
        return None
    first, last = int(leaf["from_rev"]), int(leaf["upto_rev"])
    return (
        f"choirctl session messages {leaf['session_id']} --offset {first - 1} "
        f"--limit {last - first + 1}"
    )


def source_line(provenance: ProvenanceView | None) -> str:
    """Where an item's content came from, one line (`choirctl knowledge source` opens it)."""
    from choir.core.memory.knowledge.provenance import UNKNOWN, provenance_of

    found = provenance_of(provenance.model_dump(mode="json") if provenance else None)
    return UNKNOWN if found is None else found.describe()


@app.command("source")
@documented("knowledge source")
def source(
    agent_id: AgentArgument, ref: RefArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import moment

    data = with_choird(home, lambda choird: choird.knowledge_source(agent_id, ref))

    def human() -> None:
        print(f"{data.name} (knowledge of {data.agent_id}): {data.note}")
        for event in data.events:
            print(f"rev {event.rev} {moment(event.created_at)} {event.lane} {event.kind}")
            print(f"  {event.text}")

    emit(data, as_json, human)


@app.command("expand")
@documented("knowledge expand")
def expand(
    agent_id: AgentArgument,
    ref: RefArgument,
    offset: Annotated[
        int | None,
        typer.Option(
            "--offset", min=0, help="A leaf: read on after this revision (a next_offset)."
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=500, help="How many items or messages.")
    ] = 50,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(
        home, lambda choird: choird.knowledge_expand(agent_id, ref, offset=offset, limit=limit)
    )

    def human() -> None:
        item = data.item
        if data.session_id is not None:
            print(
                f"{item.name} ({data.level} of {data.agent_id}): session {data.session_id}, "
                f"revs {data.from_rev}-{data.upto_rev}, {len(data.messages)} message(s)"
            )
            for message in data.messages:
                print(f"{message.rev:>6}  {message.who}: {message.text}")
            if data.next_offset is not None:
                print(
                    f"(more: choirctl knowledge expand {agent_id} {item.name} "
                    f"--offset {data.next_offset})"
                )
            return
        print(f"{item.name} ({data.level} of {data.agent_id}): {len(data.sources)} source(s)")
        for source in data.sources:
            first = source.text.splitlines()[0] if source.text else ""
            print(f"  {source.name}  {first[:100]}")
        if data.sources:
            print(f"(one step further: choirctl knowledge expand {agent_id} NAME)")

    emit(data, as_json, human)


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
    loc: LocOption = None,
    kind: TypeOption = None,
    data_json: DataOption = None,
    importance: KindOption = None,
    memory: MemoryOption = None,
    user: UserOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    text = given_text(text, "put")
    fields = placed_fields(loc, kind, data_json, importance, memory, user)
    data = with_choird(
        home,
        lambda choird: choird.knowledge_put(
            agent_id, text, name=name, tags=tags or None, fields=fields
        ),
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
    loc: LocOption = None,
    kind: TypeOption = None,
    data_json: DataOption = None,
    importance: KindOption = None,
    memory: MemoryOption = None,
    user: UserOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    text = given_text(text, "add")
    fields = placed_fields(loc, kind, data_json, importance, memory, user)
    data = with_choird(
        home,
        lambda choird: choird.knowledge_add(
            agent_id, text, name=name, tags=tags or None, fields=fields
        ),
    )
    emit(data, as_json, lambda: _stored(agent_id, data))


@app.command("write")
@documented("knowledge write")
def write(
    agent_id: AgentArgument,
    ref: RefArgument,
    text: Annotated[
        str | None,
        typer.Argument(
            help="Its new text (- reads it from standard input; leave out to change only tags, "
            "loc, type, data or kind)."
        ),
    ] = None,
    tags: TagsOption = None,
    loc: LocOption = None,
    kind: TypeOption = None,
    data_json: DataOption = None,
    importance: KindOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    if text is not None:
        text = given_text(text, "write")
    fields = graph_fields(loc, kind, data_json, importance)
    data = with_choird(
        home,
        lambda choird: choird.knowledge_write(
            agent_id, ref, text, tags=tags or None, fields=fields
        ),
    )
    emit(data, as_json, lambda: _stored(agent_id, data))


def _stored(agent_id: str, data: KnowledgeStored) -> None:
    item = data.item
    how = f"wrote version {item.version} of" if data.updated else "stored"
    if data.sealed:  # its stored text is a placeholder: nothing of the content is searchable
        vector = "encrypted: found by its name, loc, type and tags only"
    else:
        vector = "embedded" if data.embedded else "not embedded yet: found by text until a backfill"
    where = "knowledge" if item.memory == "knowledge" else f"{item.memory} memory"
    print(f"{how} {item.name} in {agent_id}'s {where}; {vector}")


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


@app.command("link")
@documented("knowledge link")
def link(
    agent_id: AgentArgument,
    ref: RefArgument,
    edge: Annotated[
        str,
        typer.Argument(
            help="relates_to, derived_from (made from the target) or supersedes (replaces it).",
            show_default=False,
        ),
    ],
    target: Annotated[str, typer.Argument(help="The item the edge points to (name, alias or id).")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.knowledge_link(agent_id, ref, target, edge))
    done = "linked" if data.new else "already linked"
    emit(data, as_json, lambda: print(f"{done}: {data.source} {data.edge} {data.target}"))


@app.command("unlink")
@documented("knowledge unlink")
def unlink(
    agent_id: AgentArgument,
    ref: RefArgument,
    target: Annotated[str, typer.Argument(help="The item the edge points to (name, alias or id).")],
    edge: Annotated[
        str | None, typer.Option("--edge", help="Only edges of this type (default: all).")
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.knowledge_unlink(agent_id, ref, target, edge))
    emit(data, as_json, lambda: print(f"removed {data.removed} edge(s) from {ref} to {target}"))
