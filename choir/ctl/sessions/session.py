"""`choirctl session`: list sessions, read or follow their events, steer core jobs (§17.1)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

if TYPE_CHECKING:
    from choir.client import ChoirClient
    from choir.protocol.operator.answers import SessionEvents
    from choir.protocol.operator.requests import RecoverChoice
    from choir.protocol.operator.views import EventView

app = typer.Typer(
    rich_markup_mode=None,
    help="Inspect agent sessions and steer their core jobs (needs choird).",
    no_args_is_help=True,
)

SessionArgument = Annotated[
    str, typer.Argument(help="Session id, as `choirctl session list` shows it.", show_default=False)
]


@app.command("list")
@documented("session list")
def list_sessions(
    agent_id: Annotated[
        str | None, typer.Argument(help="Only this agent's sessions.", show_default=False)
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many.")] = 50,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import duration, moment

    data = with_choird(home, lambda choird: choird.session_list(agent_id, limit=limit))
    rows = [
        (
            s.session_id,
            s.agent_id,
            s.status,
            moment(s.started_at),
            duration(s.uptime_s) if s.status == "active" else moment(s.ended_at),
            s.ack_rev,
        )
        for s in data.sessions
    ]
    headers = ("session", "agent", "status", "started", "up / ended", "rev")
    emit(data, as_json, lambda: table(headers, rows))


@app.command("events")
@documented("session events")
def events(
    session_id: SessionArgument,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until it ends.")
    ] = False,
    from_rev: Annotated[
        int | None,
        typer.Option("--from-rev", min=1, help="Start at this revision (default: the last N)."),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=1000, help="How many events (N).")
    ] = 100,
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="Print events stored as previews whole (read back from choird)."
        ),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    if not follow:

        async def read(choird: ChoirClient) -> SessionEvents:
            data = await choird.session_events(session_id, from_rev=from_rev, limit=limit)
            if full:
                whole = [await _whole(choird, session_id, e) for e in data.events]
                data = data.model_copy(update={"events": whole})
            return data

        data = with_choird(home, read)
        emit(data, as_json, lambda: _print_events(session_id, data.events, full=full))
        return

    async def stream(choird: ChoirClient) -> None:
        async for event in choird.follow_session_events(session_id, from_rev=from_rev, limit=limit):
            if full:
                event = await _whole(choird, session_id, event)
            _print_follow(session_id, event, as_json, full=full)

    with_choird(home, stream)


async def _whole(choird: ChoirClient, session_id: str, event: EventView) -> EventView:
    """`event` with its whole payload when it is stored as a preview."""
    if not event.artifact:
        return event
    return event.model_copy(update={"payload": await choird.session_event(session_id, event.rev)})


def event_line(event: EventView, session_id: str | None = None, *, full: bool = False) -> str:
    from choir.core.memory.recall import recall_line
    from choir.ctl.render.humanize import compact, moment

    payload = {
        key: value
        for key, value in event.payload.items()
        if key != "kind" and value not in (None, "", [], {})
    }
    # the recalled memories' texts would fill the line: who, scores and tokens say enough
    shown = recall_line(payload) if event.event_type == "memory_recalled" else compact(payload)
    line = (
        f"{event.rev:>6}  {moment(event.created_at)}  {event.lane:<18} "
        f"{event.event_type:<20} {shown}"
    )
    artifact = event.artifact
    if artifact and not full and session_id is not None:
        line += (
            f"  [preview of {artifact['size']} bytes; whole: choirctl session events "
            f"{session_id} --from-rev {event.rev} -n 1 --full]"
        )
    return line


def _print_events(session_id: str, events: list[EventView], *, full: bool) -> None:
    if not events:
        print("(no events)")
    for event in events:
        print(event_line(event, session_id, full=full))
        if full and event.artifact:
            print(_indented(event.payload))


def _print_follow(session_id: str, event: EventView, as_json: bool, *, full: bool) -> None:
    from choir.ctl.render.output import json_text, write_visible

    if as_json:
        sys.stdout.write(json_text(event.model_dump(mode="json")) + "\n")
    else:
        write_visible(event_line(event, session_id, full=full) + "\n")
        if full and event.artifact:
            write_visible(_indented(event.payload) + "\n")
    sys.stdout.flush()


def _indented(payload: dict[str, Any]) -> str:
    """A whole event's payload, indented under its line."""
    import orjson

    return orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode()


@app.command("messages")
@documented("session messages")
def messages(
    session_id: SessionArgument,
    offset: Annotated[
        int, typer.Option("--offset", min=0, help="Read on after this revision (a next_offset).")
    ] = 0,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=500, help="How many messages.")
    ] = 50,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(
        home, lambda choird: choird.session_messages(session_id, offset=offset, limit=limit)
    )

    def show() -> None:
        for message in data.messages:
            print(f"{message.rev:>6}  {message.who}: {message.text}")
        if data.next_offset is not None:
            print(f"(more: choirctl session messages {session_id} --offset {data.next_offset})")

    emit(data, as_json, show)


@app.command("cores")
@documented("session cores")
def cores(
    session_id: SessionArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import dash, moment

    data = with_choird(home, lambda choird: choird.session_cores(session_id))
    rows = [
        (
            c.job_name,
            c.held.state if c.held else c.state,
            dash(c.skill),
            dash(c.step),
            moment(c.reported_at),
        )
        for c in data.cores
    ]
    hints = [f"decide {c.job_name}: {c.held.hint}" for c in data.cores if c.held]

    def show() -> None:
        table(("job", "state", "skill", "step", "reported"), rows)
        for hint in hints:
            print(hint)

    emit(data, as_json, show)


@app.command("locks")
@documented("session locks")
def locks(
    session_id: SessionArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import dash

    data = with_choird(home, lambda choird: choird.session_locks(session_id))
    rows = [
        (
            lock.resource,
            lock.mode,
            ", ".join(lock.holders) or "-",
            ", ".join(f"{w.owner}:{w.mode}" for w in lock.waiters) or "-",
            dash(None if lock.held_for_s is None else f"{lock.held_for_s:.1f}s"),
        )
        for lock in data.locks
    ]
    headers = ("resource", "mode", "holders", "waiters", "held for")
    emit(data, as_json, lambda: table(headers, rows) if rows else print("(no locks)"))


@app.command("cancel")
@documented("session cancel")
def cancel(
    session_id: SessionArgument,
    job_name: Annotated[str, typer.Argument(help="The core job's name (see session cores).")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.session_cancel(session_id, job_name))
    emit(data, as_json, lambda: print(f"asked session {session_id} to cancel core job {job_name}"))


@app.command("inject")
@documented("session inject")
def inject(
    session_id: SessionArgument,
    job_name: Annotated[str, typer.Argument(help="The core job's name (see session cores).")],
    text: Annotated[str, typer.Argument(help="The instruction for the job.")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.session_inject(session_id, job_name, text))
    emit(
        data, as_json, lambda: print(f"asked session {session_id} to instruct core job {job_name}")
    )


@app.command("compact")
@documented("session compact")
def compact(
    session_id: SessionArgument,
    lane: Annotated[
        str | None,
        typer.Option("--lane", help="Only this lane: edge or core:<job>. Default: every lane."),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.session_compact(session_id, lane))
    what = f"lane {lane}" if lane else "every lane"
    emit(data, as_json, lambda: print(f"asked session {session_id} to compact {what}"))


@app.command("recover")
@documented("session recover")
def recover(
    session_id: SessionArgument,
    job: Annotated[
        str | None,
        typer.Option("--job", help="Only this held core job. Default: every held job."),
    ] = None,
    choice: Annotated[
        str | None,
        typer.Option(
            "--choice",
            help="resume, read-only or abort. Without it, list the interrupted calls.",
        ),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.errors import UsageError

    choices = {"resume": "resume", "read-only": "read_only", "abort": "abort"}
    if choice is not None and choice not in choices:
        raise UsageError(f"--choice must be one of {', '.join(choices)}, not {choice!r}")
    wire: RecoverChoice | None = None
    if choice is not None:
        wire = "resume" if choice == "resume" else "read_only" if choice == "read-only" else "abort"
    data = with_choird(
        home, lambda choird: choird.session_recover(session_id, job_name=job, choice=wire)
    )
    if choice is not None:
        emit(data, as_json, lambda: print(f"asked session {session_id} to {choice}"))
        return
    rows = [(c.call_id, c.tool, c.lane, str(c.rev)) for c in data.interrupted]
    emit(data, as_json, lambda: table(("call", "tool", "lane", "rev"), rows))
