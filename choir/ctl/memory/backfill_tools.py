"""`choirctl memory backfill-tools <agent>|--all`: tool-call rows for past sessions.

The sessions done so far are shown as a bar on stderr after each one (not with `--json`: scripts
read the one JSON object on stdout). Stopped midway, the next run completes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.memory.reembed import ProgressBar
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

if TYPE_CHECKING:
    from choir.protocol.operator.answers import MemoryToolsBackfilled


@documented("memory backfill-tools")
def backfill_tools(
    agent_id: Annotated[
        str | None, typer.Argument(help="Whose memory (omit with --all).", show_default=False)
    ] = None,
    all_agents: Annotated[bool, typer.Option("--all", help="Every configured agent.")] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.errors import UsageError

    if all_agents == (agent_id is not None):
        raise UsageError(
            "name one agent or pass --all: choirctl memory backfill-tools <agent>|--all"
        )
    progress = None if as_json else ProgressBar()
    data = with_choird(
        home,
        lambda choird: choird.memory_backfill_tools(
            agent_id, all_agents=all_agents, progress=progress
        ),
        call_timeout=None,
    )
    emit(data, as_json, lambda: show(data))


def show(data: MemoryToolsBackfilled) -> None:
    rows = [(a.agent_id, str(a.sessions), str(a.rows), str(a.already)) for a in data.agents]
    table(("agent", "sessions filled", "rows stored", "already filled"), rows)
