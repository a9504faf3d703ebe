"""`choirctl agent restart|update|update-all|rollback` (§17.1, §17.4, §17.5, issue 17).

Registered on `choir.ctl.agent.commands.app`. Update and update-all can build images for minutes, so
they print each step on stderr as choird reports it (not with `--json`: scripts read the one
JSON object on stdout). Update-all exits 1 when any agent failed, after reporting every one.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.commands.text import progress_line
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, write_visible

if TYPE_CHECKING:
    from choir.protocol.operator.answers import UpdateOutcome
    from choir.protocol.operator.items import Progress

AgentArgument = Annotated[str, typer.Argument(help="Agent id.", show_default=False)]


@documented("agent restart")
def restart(agent_id: AgentArgument, home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.agent.views import started_lines, stopped_lines, summary_warning
    from choir.ctl.remote import with_choird
    from choir.ctl.render.output import warn

    data = with_choird(home, lambda choird: choird.agent_restart(agent_id), call_timeout=None)
    stopped = data.stopped

    def show() -> None:
        print("\n".join([*stopped_lines(stopped), *started_lines(data)]))

    emit(data, as_json, show)
    if (warning := summary_warning(stopped)) is not None:
        warn(warning)


@documented("agent update")
def update(agent_id: AgentArgument, home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    progress = None if as_json else show_progress
    data = with_choird(
        home, lambda choird: choird.agent_update(agent_id, progress), call_timeout=None
    )
    emit(data, as_json, lambda: print(outcome_line(data)))


@documented("agent rollback")
def rollback(
    agent_id: AgentArgument,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="A kept image (id, tag or image version) or a commit of the agent repo.",
            show_default=False,
        ),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    progress = None if as_json else show_progress
    data = with_choird(
        home, lambda choird: choird.agent_rollback(agent_id, to, progress), call_timeout=None
    )
    emit(data, as_json, lambda: print(f"{data.agent_id} {data.outcome}: {data.reason}"))


@documented("agent update-all")
def update_all(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.output import table

    progress = None if as_json else show_progress
    data = with_choird(home, lambda choird: choird.agent_update_all(progress), call_timeout=None)
    rows = [(a.agent_id, a.outcome, a.reason) for a in data.agents]
    emit(data, as_json, lambda: table(("agent", "outcome", "reason"), rows))
    if data.failed:
        raise typer.Exit(1)


def outcome_line(outcome: UpdateOutcome) -> str:
    return f"{outcome.agent_id} {outcome.outcome}: {outcome.reason}"


def show_progress(item: Progress) -> None:
    """One progress item of an update as a line on stderr."""
    line = progress_line(item.model_dump(mode="json"))
    write_visible(line + "\n", sys.stderr)
    sys.stderr.flush()
