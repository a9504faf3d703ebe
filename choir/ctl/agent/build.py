"""`choirctl agent build <agent-id>` (§17.3): build the agent's image in choird.

choird owns the config and the repo clones, so the build runs there; this prints its progress
on stderr as it comes — the ten steps, and docker's own `Step n/m` lines (`--verbose` prints
every line of build output) — and the result on stdout (`--json`: one object, no progress).
A failed build exits 1 with the build's last lines; the previous image stays the one to run.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, write_visible

if TYPE_CHECKING:
    from choir.protocol.operator.answers import ImageBuilt
    from choir.protocol.operator.items import Progress

AgentArgument = Annotated[str, typer.Argument(help="Agent id.", show_default=False)]
VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Print every line of docker build output."),
]


@documented("agent build")
def build(
    agent_id: AgentArgument,
    verbose: VerboseOption = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    progress = None if as_json else Printer(verbose)
    data = with_choird(
        home, lambda choird: choird.agent_build(agent_id, progress), call_timeout=None
    )
    emit(data, as_json, lambda: print(result_line(data)))


def result_line(data: ImageBuilt) -> str:
    state = "built" if data.built else "up to date"
    return f"{data.agent_id}: {data.tag} {state} ({data.image_id[7:19]})"


class Printer:
    """Progress items as lines on stderr: each step once it says something, docker's steps."""

    def __init__(self, verbose: bool) -> None:
        self._verbose = verbose

    def __call__(self, item: Progress) -> None:
        line = self.line(item)
        if line is not None:
            write_visible(line + "\n", sys.stderr)
            sys.stderr.flush()

    def line(self, item: Progress) -> str | None:
        log = item.log
        if log is not None:
            return f"    {log}" if self._verbose or log.startswith("Step ") else None
        if not item.detail:
            return None  # a step starting; its detail follows
        return f"[{item.step}/{item.total or 10}] {item.title}: {item.detail}"
