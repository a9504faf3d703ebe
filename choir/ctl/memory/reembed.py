"""`choirctl memory reembed <agent>|--all [--missing]` (§11.9): re-embed agents' memory.

The vectors stored so far are shown as a bar on stderr after each page (not with `--json`:
scripts read the one JSON object on stdout). Stopped midway (Ctrl-C leaves choird working;
choird killed), the next run resumes where the last one stopped.

With `--all`, an agent whose re-embed fails ends the run: the agents finished before it are
still listed (their vectors are stored), then one error line names the agent, why, the agents
not started and the command that resumes; `--json` prints the same as `stopped`. The exit code
is the failure's (6 no embedder, 5 already running, 2 `--missing` on a stale agent).

choird stopping midway (killed, the connection lost) ends it the same way: choird sends each
agent's row as its run finishes, so the rows received are listed (`--json`: `{agents}` without
`stopped`, which only choird can say), then one error line names them, the agent whose run was
cut short and the command that resumes; exit 6.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table
from choir.errors import ChoirError, ExitCode, UnavailableError, UsageError, error_class

if TYPE_CHECKING:
    from choir.client import ChoirClient
    from choir.protocol.operator.answers import AgentReembedded, MemoryReembedded
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
    stream = Received(bar)
    data: MemoryReembedded | None = None
    try:
        data = with_choird(
            home,
            lambda choird: _reembed(choird, agent_id, all_agents, missing, stream),
            call_timeout=None,
        )
    except StreamBroken:
        pass  # said below, once the bar has its newline
    finally:
        if bar is not None:
            bar.close()
    command = "choirctl memory reembed --all" + (" --missing" if missing else "")
    if data is None:
        got = stream.answer()
        emit(got, as_json, lambda: show(got))
        raise ChoirError(broken_line(stream, command), exit_code=ExitCode.UNAVAILABLE)
    if data.stopped is None or data.agents or as_json:
        emit(data, as_json, lambda: show(data))
    if data.stopped is not None:
        raise ChoirError(stopped_line(data, command), exit_code=exit_code_of(data.stopped.code))


async def _reembed(
    choird: ChoirClient, agent_id: str | None, all_agents: bool, missing: bool, stream: Received
) -> MemoryReembedded:
    """The run's answer; with `--all`, StreamBroken when choird stops answering midway."""
    try:
        return await choird.memory_reembed(
            agent_id, all_agents=all_agents, missing=missing, progress=stream
        )
    except UnavailableError as error:  # the connection: a refusal is an RpcError
        if not all_agents:
            raise
        raise StreamBroken(stream) from error


@dataclass
class Received:
    """What the stream said so far: the rows of the agents finished, the agent running."""

    bar: ProgressBar | None
    finished: list[AgentReembedded] = field(default_factory=list)
    running: str | None = None
    """The agent whose pages came last and whose row has not (None: between two agents)."""

    def __call__(self, item: Progress) -> None:
        if item.reembedded is not None:
            self.finished.append(item.reembedded)
            self.running = None
            return  # its row is listed at the end, with the others
        self.running = item.agent_id
        if self.bar is not None:
            self.bar(item)

    def answer(self) -> MemoryReembedded:
        from choir.protocol.operator.answers import MemoryReembedded

        return MemoryReembedded(agents=self.finished)


class StreamBroken(Exception):
    """choird stopped answering in the middle of `--all` (what it said is in `received`)."""

    def __init__(self, received: Received) -> None:
        super().__init__("choird stopped answering")
        self.received = received


def broken_line(received: Received, command: str) -> str:
    """The one line that says choird stopped answering, which agents finished before it did,
    and how to resume once it is back."""
    where = f" while {received.running}'s re-embed ran" if received.running else ""
    finished = [row.agent_id for row in received.finished]
    done = (
        f"finished: {', '.join(finished)} (their vectors kept)" if finished else "no agent finished"
    )
    again = ": the agents finished embed nothing again" if finished else ""
    return (
        f"choird stopped answering{where}; {done}; once choird is back (`choir up`), "
        f"`{command}` resumes{again}"
    )


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
