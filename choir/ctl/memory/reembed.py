"""`choirctl memory reembed <agent>|--all [--missing]` (§11.9): re-embed agents' memory.

The vectors stored so far are shown as a bar on stderr after each page (not with `--json`:
scripts read the one JSON object on stdout). Stopped midway (Ctrl-C leaves choird working;
choird killed), the next run resumes where the last one stopped.

With `--all`, an agent whose re-embed fails ends the run: the agents finished before it are
still listed (their vectors are stored), then one error line names the agent, why, the agents
not started and the command that resumes; `--json` prints the same as `stopped`. The exit code
is the failure's (6 no embedder, 5 already running, 2 `--missing` on a stale agent).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table
from choir.errors import ChoirError, ExitCode, UsageError, error_class

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

    if all_agents == (agent_id is not None):
        raise UsageError("name one agent or pass --all: choirctl memory reembed <agent>|--all")
    bar = None if as_json else ProgressBar()
    try:
        data = with_choird(
            home,
            lambda choird: choird.memory_reembed(
                agent_id, all_agents=all_agents, missing=missing, progress=bar
            ),
            call_timeout=None,
        )
    finally:
        if bar is not None:
            bar.close()
    if data.stopped is None or data.agents or as_json:
        emit(data, as_json, lambda: show(data))
    if data.stopped is not None:
        command = "choirctl memory reembed --all" + (" --missing" if missing else "")
        raise ChoirError(stopped_line(data, command), exit_code=exit_code_of(data.stopped.code))


def exit_code_of(code: str) -> ExitCode:
    """The exit code of a refusal with wire `code` (1 for a code this choirctl does not know)."""
    from choir.protocol.wire.error_codes import ErrorCode

    try:
        return error_class(ErrorCode(code)).exit_code
    except ValueError:
        return ExitCode.ERROR


def stopped_line(data: MemoryReembedded, command: str) -> str:
    """The one line that says where `--all` stopped, what is left and how to resume."""
    stopped = data.stopped
    assert stopped is not None
    left = f"; not started: {', '.join(stopped.not_started)}" if stopped.not_started else ""
    finished = (
        f"{len(data.agents)} agent(s) finished (listed above, their vectors kept)"
        if data.agents
        else "no agent finished"
    )
    return (
        f"re-embed stopped at {stopped.agent_id}: {stopped.message}{left}; {finished}; "
        f"`{command}` resumes: the agents finished embed nothing again"
    )


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


class ProgressBar:
    """The vectors stored so far, redrawn in place on a terminal, a line each on a pipe."""

    def __init__(self) -> None:
        self._open = False
        """A bar drawn on a terminal without its newline yet (the agent's run unfinished)."""

    def __call__(self, item: Progress) -> None:
        from choir.commands.text import progress_line
        from choir.ctl.render.output import write_visible

        line = progress_line(item.model_dump(mode="json"))
        if sys.stderr.isatty():
            write_visible(f"\r{line}", sys.stderr)
            self._open = True
            if item.total is not None and item.step is not None and item.step >= item.total:
                sys.stderr.write("\n")
                self._open = False
        else:
            write_visible(line + "\n", sys.stderr)
        sys.stderr.flush()

    def close(self) -> None:
        """End a bar left open (a run that stopped midway), so the next line starts afresh."""
        if self._open:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self._open = False
