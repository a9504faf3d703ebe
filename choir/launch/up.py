"""`choir up`: one command from nothing to a running agent and its console.

Each step says what it does and is skipped when already done, so a second `choir up` finds
everything up and says so: the home (initialised with the embedded defaults when missing,
`up_home`), choird (started in the background, `choird_process`), the default agent (built if
needed, then started; choird picks the runtime: docker when an engine answers, else process),
then the console — or, with `--no-tui` or off a terminal, a status summary.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from choir.client import ChoirClient, Payload
from choir.config.scaffolding.skeleton import CONSOLE, DEFAULT_AGENT
from choir.ctl.agent.views import sandbox_word
from choir.errors import NotFoundError
from choir.home import ChoirHome
from choir.launch import choird_process
from choir.launch.up_home import prepare_home

if TYPE_CHECKING:
    from choir.protocol.operator.items import Progress


@dataclass(frozen=True)
class UpOptions:
    home: ChoirHome
    agent: str | None = None
    """The agent to start; None: agent-1, else the only agent configured."""
    tui: bool = True
    as_json: bool = False
    runtime: str | None = None
    """choird's `--runtime` when `up` starts it; None: config.json's `container.runtime`."""


@dataclass
class Steps:
    """Progress lines: `<what>  <text>`, flushed at once; a waiting line is redrawn in place
    on a terminal."""

    out: TextIO
    changed: list[str] = field(default_factory=list)
    """What this run started or created (empty: everything was already up)."""
    _waiting: bool = False

    def line(self, what: str, text: str) -> None:
        self._end_wait()
        self.out.write(f"{what:<10}{text}\n")
        self.out.flush()

    def waiting(self, what: str, text: str, seconds: float) -> None:
        """`text` with the seconds waited; on a terminal, one line updated in place."""
        if not self.out.isatty():
            if not self._waiting:
                self.out.write(f"{what:<10}{text}\n")
                self.out.flush()
                self._waiting = True
            return
        self.out.write(f"\r{what:<10}{text} {seconds:4.1f} s")
        self.out.flush()
        self._waiting = True

    def _end_wait(self) -> None:
        """The next line replaces a waiting line redrawn in place."""
        if self._waiting and self.out.isatty():
            self.out.write("\r\033[K")
        self._waiting = False


def up(options: UpOptions) -> dict[str, Any]:
    """Every step of `choir up`; what is running at the end."""
    steps = Steps(sys.stderr if options.as_json else sys.stdout)
    home = options.home
    ready = prepare_home(home)
    if ready.created:
        steps.changed.append("home")
        model = "demo model (scripted, not a real LLM)" if ready.model == "demo" else ready.model
        steps.line("home", f"{home.root}: created (embedded Postgres, console DM, {model})")
    else:
        steps.line("home", f"{home.root}: using it as it is")
    pid = ensure_choird(home, steps, options.runtime)
    agent = asyncio.run(_agent_up(home, options.agent, steps))
    summary = {"home": str(home.root), "choird_pid": pid, "agent": agent, "started": steps.changed}
    if not steps.changed:
        steps.line("choir", "everything was already up")
    return summary


def ensure_choird(home: ChoirHome, steps: Steps, runtime: str | None = None) -> int | None:
    """choird answering on `home`'s socket, started in the background if needed; its pid."""
    if answers(home):
        pid = choird_process.running_pid(home)
        kept = f"; --runtime {runtime} applies when it next starts" if runtime else ""
        steps.line("choird", f"already running (pid {pid}){kept}")
        return pid
    pid = choird_process.running_pid(home)
    if pid is None:
        steps.line("choird", f"starting in the background (log: {home.choird_log})")
        process = choird_process.spawn(home, runtime)
        pid = process.pid

        def tick(seconds: float) -> None:
            steps.waiting("choird", "waiting for its socket", seconds)

        took = choird_process.wait_ready(home, process.poll, lambda: answers(home), tick)
    else:  # another `choir up` or a supervisor is starting it: wait for its socket too
        exited = choird_process.exit_of(pid)
        took = choird_process.wait_ready(home, exited, lambda: answers(home), lambda _: None)
    steps.changed.append("choird")
    steps.line("choird", f"ready in {took:.1f} s (pid {pid})")
    return pid


def answers(home: ChoirHome) -> bool:
    """Whether something accepts connections on `home`'s operator socket."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(home.operator_socket))
    except OSError:
        return False
    finally:
        probe.close()
    return True


async def _agent_up(home: ChoirHome, wanted: str | None, steps: Steps) -> Payload:
    async with await ChoirClient.connect(home, call_timeout=None) as choird:
        agents = {a.agent_id: a for a in (await choird.agent_list()).agents}
        agent_id = default_agent(agents, wanted)
        listed = agents[agent_id]
        if listed.state == "running":
            steps.line(agent_id, f"already running (session {listed.session_id})")
            return (await choird.agent_status(agent_id)).model_dump(mode="json")
        steps.line(agent_id, "building if needed")
        built = await choird.agent_update(agent_id, lambda item: _build_line(steps, item))
        steps.line(agent_id, "built" if built.outcome == "built" else "build up to date")
        dm = listed.bindings.get("dm") or CONSOLE
        started = await choird.agent_start(agent_id, {"dm": dm})
        steps.changed.append(agent_id)
        how = "resumed" if started.resumed else "new"
        sandbox = sandbox_word(started.runtime, started.sandboxed)
        steps.line(
            agent_id,
            f"started: session {started.session_id} ({how}), "
            f"{started.runtime} runtime ({sandbox}), DM {dm}",
        )
        return (await choird.agent_status(agent_id)).model_dump(mode="json")


def default_agent(agents: dict[str, Any], wanted: str | None) -> str:
    """`wanted`, else agent-1, else the only agent; NotFoundError naming the choices."""
    known = ", ".join(sorted(agents)) or "none configured"
    if wanted is not None:
        if wanted not in agents:
            raise NotFoundError(f"no agent named {wanted!r} (known: {known}): pass --agent <id>")
        return wanted
    if DEFAULT_AGENT in agents:
        return DEFAULT_AGENT
    if len(agents) == 1:
        return next(iter(agents))
    raise NotFoundError(
        f"no agent {DEFAULT_AGENT} to start (known: {known}): pass --agent <id>"
        if agents
        else "no agents in config.json: add one with choirctl agent init <agent-id>"
    )


def _build_line(steps: Steps, item: Progress) -> None:
    if item.phase != "build" or item.log is not None:
        return
    if isinstance(item.step, int):
        detail = f": {item.detail}" if item.detail else ""
        steps.line(item.agent_id, f"  step {item.step} {item.title}{detail}")
