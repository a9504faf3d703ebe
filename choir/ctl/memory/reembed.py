"""`choirctl memory reembed <agent>|--all [--missing]` (§11.9): re-embed agents' memory.

The vectors stored so far are shown as a bar on stderr after each page (not with `--json`:
scripts read the one JSON object on stdout). Stopped midway (Ctrl-C leaves choird working;
choird killed), the next run resumes where the last one stopped.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

if TYPE_CHECKING:
    from choir.protocol.operator.answers import MemoryReembedded
    from choir.protocol.operator.items import Progress


@documented("memory reembed")
def reembed(
    agent_id: Annotated[
        str | None, typer.Argument(help="Whose memory (omit with --all).", show_default=False)
    ] = None,
    all_agents: Annotated[bool, typer.Option("--all", help="Every configured agent.")] = False,
    missing: Annotated[
        bool, typer.Option("--missing", help="Only the rows stored without a vector.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.errors import UsageError

    if all_agents == (agent_id is not None):
        raise UsageError("name one agent or pass --all: choirctl memory reembed <agent>|--all")
    progress = None if as_json else show_progress
    data = with_choird(
        home,
        lambda choird: choird.memory_reembed(
            agent_id, all_agents=all_agents, missing=missing, progress=progress
        ),
        call_timeout=None,
    )
    emit(data, as_json, lambda: show(data))


def show(data: MemoryReembedded) -> None:
    rows = [
        (
            a.agent_id,
            f"{a.model} ({a.dims})",
            "same"
            if (a.model, a.dims) == (a.previous_model, a.previous_dims)
            else f"{a.previous_model} ({a.previous_dims})",
            str(a.embedded),
        )
        for a in data.agents
    ]
    table(("agent", "model", "before", "embedded"), rows)


def show_progress(item: Progress) -> None:
    """The vectors stored so far, redrawn in place on a terminal, a line each on a pipe."""
    from choir.commands.text import progress_line
    from choir.ctl.render.output import write_visible

    line = progress_line(item.model_dump(mode="json"))
    if sys.stderr.isatty():
        write_visible(f"\r{line}", sys.stderr)
        if item.total is not None and item.step is not None and item.step >= item.total:
            sys.stderr.write("\n")
    else:
        write_visible(line + "\n", sys.stderr)
    sys.stderr.flush()
